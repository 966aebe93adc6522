#!/usr/bin/env bash
# The Python side of the toolchain, idempotently: a virtualenv in .venv with
# this package and its test and lint tools. Needs neither Go nor apt-get, so
# `make lint` and `make test-unit` run on any machine with Python 3.11+.
# kubectl is built from source by hack/deps.sh, to match the local cluster.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

VENV="${VENV:-.venv}"
EXTRAS="${EXTRAS:-test}"

stamp="$VENV/.venv-$(cat setup.cfg hack/venv.sh | sha256sum | cut -c1-12)-${EXTRAS//,/_}"
if [[ ! -e "$stamp" ]]; then
  [[ -x "$VENV/bin/python" ]] || python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check --upgrade pip >/dev/null
  "$VENV/bin/pip" install -q --disable-pip-version-check -e ".[$EXTRAS]"
  rm -f "$VENV"/.venv-*
  touch "$stamp"
fi
echo "venv: ready ($VENV)" >&2
