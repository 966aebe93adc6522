#!/usr/bin/env bash
# Build the controller-runtime peer operator (crpeer/) from the Go module
# proxy, once, into a cache directory keyed by the controller-runtime version
# and a hash of the peer's sources: editing main.go rebuilds, anything else
# reuses the binary.
#
# Prints the binary's path on stdout; progress goes to stderr.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"

src="$here/crpeer"
shopt -s nullglob
files=(go.mod go.sum)
for f in "$src"/*.go; do files+=("${f##*/}"); done
shopt -u nullglob
sources="$(cd "$src" && sha256sum -- "${files[@]}" | sha256sum | cut -c1-12)"

key="crpeer-${CONTROLLER_RUNTIME_VERSION}-${sources}"
cache="${PEERS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/reconciler/peers}/$key"
binary="$cache/bin/crpeer"

if [[ -x "$binary" ]]; then
  echo "$binary"
  exit 0
fi

# go.mod is what gets built: it must say what versions.env says.
want=(
  "sigs.k8s.io/controller-runtime $CONTROLLER_RUNTIME_VERSION"
  "k8s.io/api $K8S_MODULES_VERSION"
  "k8s.io/apimachinery $K8S_MODULES_VERSION"
  "k8s.io/client-go $K8S_MODULES_VERSION"
)
for req in "${want[@]}"; do
  grep -qE "^[[:space:]]*(require[[:space:]]+)?${req//./\\.}([[:space:]]|$)" "$src/go.mod" || {
    echo "peers/build.sh: $src/go.mod does not require $req (versions.env); update it and run go mod tidy" >&2
    exit 1
  }
done

command -v go >/dev/null || { echo "peers/build.sh: go is required (Go >= 1.26)" >&2; exit 1; }
export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local
start=$(date +%s)
echo "[peers-build] crpeer: controller-runtime ${CONTROLLER_RUNTIME_VERSION}, k8s.io ${K8S_MODULES_VERSION}, sources ${sources}" >&2
# Build a copy, so that the repository's files are never rewritten and a
# concurrent edit cannot slip into a binary cached under the old hash.
work="$cache/src"
rm -rf "$work"; mkdir -p "$work" "$cache/bin"
(cd "$src" && cp -- "${files[@]}" "$work/")
[[ "$(cd "$work" && sha256sum -- "${files[@]}" | sha256sum | cut -c1-12)" == "$sources" ]] || {
  echo "peers/build.sh: $src changed while copying; run again" >&2
  exit 1
}
trap 'rm -f "$binary.tmp.$$"' EXIT
(cd "$work" && go build -trimpath -ldflags "-s -w" -o "$binary.tmp.$$" .)
mv -f "$binary.tmp.$$" "$binary"
rm -rf "$work"

[[ -x "$binary" ]] || { echo "peers/build.sh: build finished but $binary is missing" >&2; exit 1; }
echo "[peers-build] built in $(( $(date +%s) - start ))s into $binary" >&2
echo "$binary"
