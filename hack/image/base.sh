#!/usr/bin/env bash
# A stand-in for python:3.11-slim, for the image tests on machines that reach
# Debian's packages but no container registry: a Debian bookworm root with
# Debian's python3.11, made by mmdebstrap and imported into the engine's
# storage. The tar is cached outside the repo, keyed by this script and the
# CA certificates the host trusts (copied in, so that the build's pip reaches
# the package index the host reaches). Prints the image's name on stdout.
#
# Needs CONTAINERS_CONF and CONTAINERS_STORAGE_CONF set by the caller, as
# tests/e2e/image.py does.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SUITE=bookworm
PACKAGES=python3.11,python3.11-venv,python3-pip,python-is-python3,ca-certificates

cas=(/usr/local/share/ca-certificates/*.crt)
[[ -e "${cas[0]}" ]] || cas=()
key="$( { cat "$here/base.sh"; echo "$SUITE $PACKAGES"; cat "${cas[@]}" /dev/null; } | sha256sum | cut -c1-16)"
cache="${IMAGE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/reconciler/image}"
tar="$cache/base-$key.tar"
name="localhost/reconciler-base:$key"

if podman image exists "$name"; then
  echo "$name"
  exit 0
fi
mkdir -p "$cache"
if [[ ! -s "$tar" ]]; then
  start=$(date +%s)
  echo "[image-base] mmdebstrap $SUITE with $PACKAGES" >&2
  hook='mkdir -p "$1/usr/local/share/ca-certificates"'
  for ca in "${cas[@]}"; do hook+=" && cp '$ca' \"\$1/usr/local/share/ca-certificates/\""; done
  hook+=' && chroot "$1" update-ca-certificates >/dev/null'
  hook+=' && printf "[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n" > "$1/etc/pip.conf"'
  hook+=' && rm -rf "$1/var/cache/apt/archives"/*.deb "$1/var/lib/apt/lists"/*'
  mmdebstrap --quiet --format=tar --variant=apt --include="$PACKAGES" --customize-hook="$hook" \
    "$SUITE" "$tar.part" >&2
  mv "$tar.part" "$tar"
  echo "[image-base] made in $(( $(date +%s) - start ))s: $tar" >&2
fi
podman import --quiet "$tar" "$name" >/dev/null
echo "$name"
