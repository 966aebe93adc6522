"""The real node's leftover listers (hack/cluster/realnode_host.py), on the
host's own text: what `make cluster-down` must have undone is found, and what
is not the node's is not."""

from __future__ import annotations

import json
from pathlib import Path

from hack.cluster import realnode_host as host

MOUNTINFO = """\
22 1 254:0 / / rw,relatime - ext4 /dev/vda rw
90 22 0:50 / /run/reconciler-node-abc/kubelet/pods/u1/volumes/tok rw - tmpfs tmpfs rw
91 22 0:51 / /run/reconciler-node-abc/containerd/k8s.io/c1/rootfs rw - overlay overlay rw
92 22 0:52 / /run/reconciler-node-abc/netns/cni-1 rw - nsfs nsfs rw
93 22 0:53 / /run/reconciler-node-abcdef/other rw - tmpfs tmpfs rw
94 22 0:54 / /run/netns/cni-podman rw - nsfs nsfs rw
"""


def test_mounts_under_lists_the_node_dirs_deepest_first_and_nothing_else() -> None:
    found = host.mounts_under(MOUNTINFO, [Path("/run/reconciler-node-abc")])
    assert found == [
        "/run/reconciler-node-abc/kubelet/pods/u1/volumes/tok",
        "/run/reconciler-node-abc/containerd/k8s.io/c1/rootfs",
        "/run/reconciler-node-abc/netns/cni-1",
    ]


def test_mounts_under_is_empty_on_a_clean_host() -> None:
    assert host.mounts_under(MOUNTINFO.splitlines()[0], [Path("/run/reconciler-node-abc")]) == []


IP_LINK = f"""\
1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN mode DEFAULT
2: eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc fq state UP mode DEFAULT
5: {host.BRIDGE}: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP mode DEFAULT
6: veth1a2b@if2: <BROADCAST,MULTICAST,UP> mtu 1500 qdisc noqueue master {host.BRIDGE} state UP
7: cni-podman0: <NO-CARRIER,BROADCAST,MULTICAST,UP> mtu 1500 qdisc noqueue state DOWN
8: veth9@if3: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue master cni-podman0 state UP
"""


def test_bridge_links_are_the_bridge_and_its_veths_not_podmans() -> None:
    assert host.bridge_links(IP_LINK) == [host.BRIDGE, "veth1a2b"]
    assert host.bridge_links("\n".join(IP_LINK.splitlines()[:2])) == []


IPTABLES = f"""\
*filter
:INPUT ACCEPT [0:0]
:CNI-FORWARD - [0:0]
:KUBE-KUBELET-CANARY - [0:0]
-A FORWARD -j CNI-FORWARD
COMMIT
*nat
:PREROUTING ACCEPT [0:0]
:{host.CHAIN} - [0:0]
-A PREROUTING -i {host.BRIDGE} -j {host.CHAIN}
-A {host.CHAIN} -d 10.96.0.1/32 -p tcp -m tcp --dport 443 -j DNAT --to-destination 127.0.0.1:1
COMMIT
"""


def test_chains_left_names_ours_and_the_kubelets_not_podmans() -> None:
    found = host.chains_left(IPTABLES)
    assert found == [
        "iptables filter chain KUBE-KUBELET-CANARY",
        f"iptables nat chain {host.CHAIN}",
        f"iptables nat rule -A PREROUTING -i {host.BRIDGE} -j {host.CHAIN}",
    ]


def test_chains_left_is_empty_on_a_host_with_podmans_chains_only() -> None:
    podman = "*filter\n:CNI-FORWARD - [0:0]\n-A FORWARD -j CNI-FORWARD\nCOMMIT\n"
    assert host.chains_left(podman) == []


def test_changed_sysctls_names_each_value_not_restored() -> None:
    saved = json.dumps({"kernel.panic": "1", "vm.overcommit_memory": "0"})
    now = {"kernel.panic": "10", "vm.overcommit_memory": "0"}
    assert host.changed_sysctls(saved, now) == ["sysctl kernel.panic: 10 (was 1)"]
    assert host.changed_sysctls(saved, {"kernel.panic": "1", "vm.overcommit_memory": "0"}) == []


def test_cgroups_left_are_the_kubepods_trees_deepest_first(tmp_path: Path) -> None:
    (tmp_path / "memory" / "kubepods" / "besteffort" / "pod1").mkdir(parents=True)
    (tmp_path / "cpu" / "libpod_parent").mkdir(parents=True)
    found = host.cgroups_left(tmp_path)
    assert found == [
        tmp_path / "memory/kubepods/besteffort/pod1",
        tmp_path / "memory/kubepods/besteffort",
        tmp_path / "memory/kubepods",
    ]
