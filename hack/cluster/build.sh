#!/usr/bin/env bash
# Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok and
# kubectl from the Go module proxy, once, into a cache directory keyed by
# version. kubectl comes from the same Kubernetes tag as the apiserver, so the
# client never leaves kubectl's supported version skew.
#
# `build.sh kubectl` builds (or finds) kubectl alone, for `make deps` on a
# machine that talks to a cluster of its own. `build.sh kubelet` builds the
# kubelet of the same tag, for the real node (`make cluster-up REAL_NODE=1`),
# the pause binary its pods' sandboxes run (hack/cluster/pause/) and the Redis
# exporter of EXPORTER_VERSION.
#
# k8s.io/kubernetes cannot be `go install`ed (its go.mod maps the staging
# modules to local paths), so each component is built inside a small wrapper
# module whose replace lines point those staging modules at their published
# v0.x releases. The list is generated from the tag's own go.mod.
#
# Prints the bin directory on stdout; progress goes to stderr.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"

key="k8s-${K8S_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}"
cache="${CLUSTER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/reconciler/cluster}/$key"
bin="$cache/bin"
want=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok kubectl)
[[ "${1:-}" == kubectl ]] && want=(kubectl)
[[ "${1:-}" == kubelet ]] && want=(kubelet pause redis_exporter)

have_all() {
  local b
  for b in "${want[@]}"; do [[ -x "$bin/$b" ]] || return 1; done
}

if have_all; then
  echo "$bin"
  exit 0
fi

command -v go >/dev/null || { echo "build.sh: go is required (Go >= 1.24)" >&2; exit 1; }
mkdir -p "$bin" "$cache/src"
export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local
start=$(date +%s)
log() { echo "[cluster-build] $*" >&2; }

k8s_module() {  # the wrapper module in $cache/src/kubernetes, made once
  local d="$cache/src/kubernetes" v="${K8S_VERSION}" staging="v0.${K8S_VERSION#v1.}"
  mkdir -p "$d"; cd "$d"
  [[ -s go.mod ]] && grep -q "require k8s.io/kubernetes $v" go.mod && return 0
  log "kubernetes $v (staging modules at $staging)"
  local modfile
  modfile="$(go mod download -json "k8s.io/kubernetes@$v" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
  {
    echo "module reconciler.local/cluster-build/kubernetes"
    echo
    echo "go 1.24.0"
    echo
    echo "require k8s.io/kubernetes $v"
    echo
    echo "replace ("
    sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/src/k8s.io/[a-z0-9-]*$#\t\1 => \1 '"$staging"'#p' "$modfile"
    echo ")"
  } > go.mod
  go mod download k8s.io/kubernetes
}

k8s_ldflags() {  # the version a built binary reports (`kubectl version`, /version)
  local v="${K8S_VERSION}" major minor pkg ld="-s -w"
  major="${v#v}"; major="${major%%.*}"
  minor="${v#v*.}"; minor="${minor%%.*}"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $pkg.gitVersion=$v -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    ld+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  echo "$ld"
}

build_k8s() {  # binary... : the k8s.io/kubernetes/cmd/<binary> not built yet
  local b pkgs=()
  for b in "$@"; do [[ -x "$bin/$b" ]] || pkgs+=("k8s.io/kubernetes/cmd/$b"); done
  ((${#pkgs[@]})) || return 0
  k8s_module
  log "building ${pkgs[*]##*/}"
  go build -trimpath -ldflags "$(k8s_ldflags)" -o "$bin/" "${pkgs[@]}"
}

build_simple() {  # name module-version package output
  local name="$1" modver="$2" pkg="$3" out="$4"
  [[ -x "$bin/$out" ]] && return 0
  log "$name $modver"
  local d="$cache/src/$name"
  rm -rf "$d"; mkdir -p "$d"; cd "$d"
  printf 'module reconciler.local/cluster-build/%s\n\ngo 1.24.0\n\nrequire %s\n' "$name" "$modver" > go.mod
  go build -trimpath -ldflags "-s -w" -o "$bin/$out" "$pkg"
}

build_pause() {  # a static pause from this repository's source, for the sandbox image
  [[ -x "$bin/pause" ]] && return 0
  log "pause (hack/cluster/pause)"
  (cd "$here/pause" && go build -trimpath -ldflags "-s -w" -o "$bin/pause" .)
}

if [[ "${want[*]}" == kubectl ]]; then
  build_k8s kubectl
elif [[ "${want[*]}" == "kubelet pause redis_exporter" ]]; then
  build_k8s kubelet
  build_pause
  # The checksum database answers 404 for this module (its dependencies are
  # checked as usual): it comes from the module proxy unverified by it.
  GONOSUMDB=github.com/oliver006/redis_exporter build_simple redis_exporter \
    "github.com/oliver006/redis_exporter ${EXPORTER_VERSION}" github.com/oliver006/redis_exporter redis_exporter
else
  build_simple etcd "go.etcd.io/etcd/server/v3 ${ETCD_VERSION}" go.etcd.io/etcd/server/v3 etcd
  build_simple kwok "sigs.k8s.io/kwok ${KWOK_VERSION}" sigs.k8s.io/kwok/cmd/kwok kwok
  build_k8s kube-apiserver kube-controller-manager kube-scheduler kubectl
fi

have_all || { echo "build.sh: build finished but binaries are missing in $bin" >&2; exit 1; }
log "built in $(( $(date +%s) - start ))s into $bin"
echo "$bin"
