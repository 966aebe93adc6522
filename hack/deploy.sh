#!/usr/bin/env bash
# make deploy / make undeploy: a kustomize overlay with its image set to $IMG,
# applied to (or deleted from) the current kubeconfig's cluster. Needs kubectl
# (and bash, coreutils, awk), no Python. The image is set
# by a kustomization in a temporary directory that points at the overlay, so
# no file in config/ is edited.
#
#   hack/deploy.sh render|deploy|undeploy [kubectl args...]
#   OVERLAY  config/daemon (default) or config/cronjob
#   IMG      the image, e.g. registry.example.com/reconciler:0.2.0 or ...@sha256:...;
#            empty: the overlay's own (reconciler:0.2.0)
#
# undeploy leaves the CRDs, and so every Redis and Xca, in place: deleting a CRD
# deletes its objects. `make uninstall` removes them.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
verb="${1:?usage: hack/deploy.sh render|deploy|undeploy [kubectl args...]}"
shift
overlay="${OVERLAY:-config/daemon}"
img="${IMG:-}"
[[ -f "$overlay/kustomization.yaml" ]] || { echo "deploy: OVERLAY=$overlay: no kustomization.yaml there" >&2; exit 2; }

render() {
  if [[ -z "$img" ]]; then
    kubectl kustomize "$overlay"
    return
  fi
  local tmp name tag="" digest=""
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' RETURN
  name="$img"
  if [[ "$img" == *@* ]]; then
    name="${img%%@*}"; digest="${img#*@}"
  elif [[ "${img##*/}" == *:* ]]; then
    name="${img%:*}"; tag="${img##*:}"
  fi
  {
    echo "apiVersion: kustomize.config.k8s.io/v1beta1"
    echo "kind: Kustomization"
    echo "resources:"
    echo "  - $(realpath --relative-to="$tmp" "$overlay")"
    echo "images:"
    echo "  - name: reconciler"
    echo "    newName: \"$name\""
    [[ -n "$tag" ]] && echo "    newTag: \"$tag\""
    [[ -n "$digest" ]] && echo "    digest: \"$digest\""
    true
  } > "$tmp/kustomization.yaml"
  kubectl kustomize "$tmp"
}

# The rendered stream without its CustomResourceDefinitions, with awk rather
# than a YAML library, so that undeploy needs kubectl alone: `kubectl kustomize`
# writes one document after each `---` line, its top-level keys at column 0.
without_crds() {
  awk '
    function flush() { if (doc != "" && !crd) printf "---\n%s", doc; doc = ""; crd = 0 }
    /^---[ \t]*$/ { flush(); next }
    /^kind:[ \t]*CustomResourceDefinition[ \t]*$/ { crd = 1 }
    { doc = doc $0 "\n" }
    END { flush() }'
}

case "$verb" in
  render) render ;;
  deploy) render | kubectl apply -f - "$@" ;;
  undeploy) render | without_crds | kubectl delete --ignore-not-found -f - "$@" ;;
  *) echo "deploy: unknown command $verb (render, deploy or undeploy)" >&2; exit 2 ;;
esac
