#!/usr/bin/env bash
# Everything `make test` and `make demo` need, idempotently: the venv
# (hack/venv.sh), then the system side:
#   - Debian packages: openssl for the local cluster's certificates, systemd
#     for systemd-analyze, which checks the units in systemd/, faketime for a
#     replica whose wall clock is off (tests/e2e/test_shard.py), redis-server
#     to run spec.config's directives as a pod would
#     (tests/unit/kinds/redis/test_server_real.py);
#   - Go (>= 1.24), which builds the local cluster (hack/cluster/build.sh,
#     cached outside the repo);
#   - kubectl, built from the same Kubernetes tag as the local cluster's
#     apiserver and linked into .venv/bin (the first time takes a few minutes).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash hack/venv.sh

missing=()
command -v openssl >/dev/null || missing+=(openssl)
command -v systemd-analyze >/dev/null || missing+=(systemd)  # verifies systemd/ units
command -v faketime >/dev/null || missing+=(faketime)  # a sharded replica whose clock is off
command -v redis-server >/dev/null || missing+=(redis-server)  # spec.config against a real server
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
bin="$(bash hack/cluster/build.sh kubectl)"
ln -sfn "$bin/kubectl" "${VENV:-.venv}/bin/kubectl"
echo "deps: ready" >&2
