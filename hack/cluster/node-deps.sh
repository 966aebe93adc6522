#!/usr/bin/env bash
# What the real node (`make cluster-up REAL_NODE=1`) runs besides the kubelet,
# from Debian's packages: containerd (the container runtime the kubelet talks
# to), runc (which it starts containers with), containernetworking-plugins
# (bridge, host-local, loopback, portmap: the pods' network) and iptables (the
# one DNAT that lets pods reach the loopback apiserver). Without root it says
# what is missing and the cluster comes up without the node.
set -euo pipefail
missing=()
command -v containerd >/dev/null || missing+=(containerd)
command -v runc >/dev/null || missing+=(runc)
[[ -x /usr/lib/cni/bridge ]] || missing+=(containernetworking-plugins)
command -v iptables >/dev/null || missing+=(iptables)
((${#missing[@]})) || exit 0
if [[ $(id -u) -ne 0 ]]; then
  echo "node deps: not installed: ${missing[*]} (apt-get install ${missing[*]}); no real node" >&2
  exit 0
fi
echo "node deps: apt-get install ${missing[*]}" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
