#!/usr/bin/env bash
# The images the real node runs, built here with podman (no registry): the
# pause image of its pods' sandboxes (the static pause of build.sh on
# scratch), Redis (redis.Containerfile: Debian's redis-server on the
# project's base, hack/image/base.sh), the reconciler's own (hack/image.sh)
# and the Redis exporter (build.sh's redis_exporter on scratch).
# Each is tagged by a digest of what it is built from and saved once as an OCI
# archive in the cache, so a second run builds and saves nothing.
#
# usage: node-images.sh BIN_DIR   (build.sh kubelet's: pause, redis_exporter)
# Prints one line per image: "<role> <name> <archive>", pause first. Progress
# goes to stderr.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
bin="${1:?usage: node-images.sh BIN_DIR}"
cache="${IMAGE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/reconciler/image}"
mkdir -p "$cache/node"
# The engine settings of the image tests (hack/image/podman.py): nothing in /etc.
export CONTAINERS_CONF="$repo/hack/image/containers.conf"
export CONTAINERS_STORAGE_CONF="$cache/storage.conf"
printf '[storage]\ndriver = "vfs"\ngraphroot = "%s/storage"\nrunroot = "%s/run"\n' \
  "$cache" "$cache" > "$CONTAINERS_STORAGE_CONF"
log() { echo "[node-images] $*" >&2; }
digest() { sha256sum | cut -c1-16; }

emit() {  # role name: save it once, print "<role> <name> <archive>"
  local role="$1" name="$2" tar="$cache/node/$(echo "$2" | tr '/:' '__').tar"
  if [[ ! -s "$tar" ]]; then
    podman save --quiet --format oci-archive -o "$tar.part" "$name" >&2
    mv "$tar.part" "$tar"
  fi
  echo "$role $name $tar"
}

build() {  # name context [podman build args...]: unless it exists already
  local name="$1" ctx="$2"; shift 2
  podman image exists "$name" && return 0
  local start=$(date +%s)
  log "building $name"
  podman build --quiet --isolation chroot -t "$name" "$@" "$ctx" >&2
  log "built $name in $(( $(date +%s) - start ))s"
}

static() {  # role binary user: the binary alone on scratch, run as user
  local role="$1" binary="$2" user="$3" key name ctx
  key="$(cat "$bin/$binary" | digest)"
  name="localhost/reconciler-$role:$key"
  if ! podman image exists "$name"; then
    ctx="$(mktemp -d)"
    cp "$bin/$binary" "$ctx/$binary"
    printf 'FROM scratch\nCOPY %s /%s\nUSER %s\nENTRYPOINT ["/%s"]\n' \
      "$binary" "$binary" "$user" "$binary" > "$ctx/Containerfile"
    build "$name" "$ctx"
    rm -rf "$ctx"
  fi
  emit "$role" "$name"
}

static pause pause 65535:65535
static exporter redis_exporter 59000:59000  # the upstream image's user

base="$(bash "$repo/hack/image/base.sh")"

# redis
key="$( { cat "$here/redis.Containerfile"; echo "$base"; } | digest)"
redis="localhost/reconciler-redis:$key"
build "$redis" "$here" -f "$here/redis.Containerfile" --build-arg "BASE=$base"
emit redis "$redis"

# the reconciler: what its Dockerfile copies
key="$(cd "$repo" && { echo "$base"; find Dockerfile setup.cfg pyproject.toml README.md reconciler crds \
  -type f ! -name '*.pyc' ! -path '*/__pycache__/*' -print0 | sort -z | xargs -0 sha256sum; } | digest)"
img="localhost/reconciler:$key"
if ! podman image exists "$img"; then
  log "building $img"
  (cd "$repo" && IMG="$img" BASE="$base" BUILDER=podman bash hack/image.sh build >&2)
fi
emit reconciler "$img"
