#!/usr/bin/env bash
# `make docker-build` and `make docker-push`: build or push IMG with whichever
# builder the machine has, found in this order:
#   docker  (only if its engine answers: a client alone cannot build),
#   podman,
#   buildah.
# BUILDER=docker|podman|buildah picks one; BASE, if set, replaces the
# Dockerfile's base image (--build-arg BASE=...).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

verb="${1:?usage: hack/image.sh build|push|builder}"
IMG="${IMG:-}"

find_builder() {
  if [[ -n "${BUILDER:-}" ]]; then
    command -v "$BUILDER" >/dev/null || { echo "image: BUILDER=$BUILDER is not installed" >&2; return 1; }
    echo "$BUILDER"; return 0
  fi
  if command -v docker >/dev/null && docker info >/dev/null 2>&1; then echo docker; return 0; fi
  if command -v podman >/dev/null; then echo podman; return 0; fi
  if command -v buildah >/dev/null; then echo buildah; return 0; fi
  echo "image: no image builder found: install docker (with a running engine), podman or buildah" >&2
  return 1
}

builder="$(find_builder)"
case "$verb" in
  builder)
    echo "$builder" ;;
  build)
    [[ -n "$IMG" ]] || { echo "image: set IMG, e.g. make docker-build IMG=registry.example.com/reconciler:0.2.0" >&2; exit 2; }
    args=(-t "$IMG")
    [[ -n "${BASE:-}" ]] && args+=(--build-arg "BASE=$BASE")
    case "$builder" in
      docker) cmd=(docker build) ;;
      podman) cmd=(podman build) ;;
      buildah) cmd=(buildah bud) ;;
    esac
    # podman and buildah run the RUN steps in a chroot unless told otherwise:
    # it needs no user namespace and no OCI runtime, so it works as root in a
    # container and on hosts where crun or runc cannot start one.
    [[ "$builder" != docker ]] && args+=(--isolation "${BUILDAH_ISOLATION:-chroot}")
    echo "image: $builder building $IMG" >&2
    "${cmd[@]}" "${args[@]}" . ;;
  push)
    [[ -n "$IMG" ]] || { echo "image: set IMG, e.g. make docker-push IMG=registry.example.com/reconciler:0.2.0" >&2; exit 2; }
    "$builder" push "$IMG" ;;
  *)
    echo "usage: hack/image.sh build|push|builder" >&2; exit 2 ;;
esac
