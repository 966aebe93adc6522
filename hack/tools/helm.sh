#!/usr/bin/env bash
# Build helm from the Go module proxy, once, into a cache directory keyed by
# its version (hack/tools/versions.env). Prints the bin directory on stdout;
# progress goes to stderr.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"

cache="${TOOLS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/reconciler/tools}/helm-${HELM_VERSION}"
bin="$cache/bin"
if [[ -x "$bin/helm" ]]; then
  echo "$bin"
  exit 0
fi

command -v go >/dev/null || { echo "tools/helm.sh: go is required (Go >= 1.26)" >&2; exit 1; }
mkdir -p "$bin" "$cache/src"
export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local
start=$(date +%s)
echo "[tools-build] helm ${HELM_VERSION}" >&2
d="$cache/src/helm"
rm -rf "$d"; mkdir -p "$d"; cd "$d"
printf 'module reconciler.local/tools-build/helm\n\ngo 1.26\n\nrequire helm.sh/helm/v3 %s\n' \
  "$HELM_VERSION" > go.mod
go build -trimpath -o "$bin/" \
  -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=${HELM_VERSION}" \
  helm.sh/helm/v3/cmd/helm
[[ -x "$bin/helm" ]] || { echo "tools/helm.sh: build finished but $bin/helm is missing" >&2; exit 1; }
echo "[tools-build] built in $(( $(date +%s) - start ))s into $bin" >&2
echo "$bin"
