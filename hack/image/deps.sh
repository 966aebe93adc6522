#!/usr/bin/env bash
# What the image tests need, from Debian's packages: podman and buildah to build
# and run the image, runc to run it, mmdebstrap to make the stand-in base image
# (there is no registry to pull python:3.11-slim from). Not root: says what is
# missing, and the image tests skip.
set -euo pipefail
missing=()
for tool in podman buildah runc mmdebstrap; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
((${#missing[@]})) || exit 0
if [[ $(id -u) -ne 0 ]]; then
  echo "image deps: not installed: ${missing[*]} (apt-get install ${missing[*]}); the image tests will skip" >&2
  exit 0
fi
echo "image deps: apt-get install ${missing[*]}" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  "${missing[@]}" uidmap containernetworking-plugins >/dev/null
