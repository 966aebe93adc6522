#!/usr/bin/env bash
# Build prometheus and promtool from the Go module proxy, once, into a cache
# directory keyed by version. The web UI is not embedded (it needs npm and a
# bundle step); the HTTP API, which the tests query, is all there.
# remove_all_sd leaves out the optional service discoveries (the tests use
# static targets); one of them, nomad, needs a module the proxy does not serve.
#
# Prints the bin directory on stdout; progress goes to stderr.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"

key="prometheus-${PROMETHEUS_MODULE_VERSION}"
cache="${TOOLS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/reconciler/tools}/$key"
bin="$cache/bin"
want=(prometheus promtool)

have_all() {
  local b
  for b in "${want[@]}"; do [[ -x "$bin/$b" ]] || return 1; done
}

if have_all; then
  echo "$bin"
  exit 0
fi

command -v go >/dev/null || { echo "tools/build.sh: go is required (Go >= 1.26)" >&2; exit 1; }
mkdir -p "$bin" "$cache/src"
export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local
start=$(date +%s)
echo "[tools-build] prometheus ${PROMETHEUS_VERSION} (module ${PROMETHEUS_MODULE_VERSION})" >&2
d="$cache/src/prometheus"
rm -rf "$d"; mkdir -p "$d"; cd "$d"
printf 'module reconciler.local/tools-build/prometheus\n\ngo 1.26\n\nrequire github.com/prometheus/prometheus %s\n' \
  "$PROMETHEUS_MODULE_VERSION" > go.mod
v=github.com/prometheus/common/version
go build -trimpath -tags netgo,remove_all_sd -o "$bin/" \
  -ldflags "-s -w -X $v.Version=$PROMETHEUS_VERSION -X $v.Revision=module-$PROMETHEUS_MODULE_VERSION -X $v.Branch=release" \
  github.com/prometheus/prometheus/cmd/prometheus \
  github.com/prometheus/prometheus/cmd/promtool

have_all || { echo "tools/build.sh: build finished but binaries are missing in $bin" >&2; exit 1; }
echo "[tools-build] built in $(( $(date +%s) - start ))s into $bin" >&2
echo "$bin"
