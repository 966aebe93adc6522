"""hack/cluster/realnode.py: the real node comes up beside kwok's in a
cluster of its own and `down` leaves nothing on the host (the leftover
lister of realnode_host.py, which is unit-tested in test_realnode_host.py,
says so). Run only when asked (REAL_NODE=1), as root, on a host where no
other real node runs: it changes the host while it runs."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from hack.cluster import cluster as launcher
from hack.cluster import realnode
from hack.cluster import realnode_host as host


def _another_node_runs() -> bool:
    return subprocess.run(["ip", "link", "show", host.BRIDGE], capture_output=True).returncode == 0


asked = pytest.mark.skipif(os.environ.get(realnode.ENV_VAR) != "1", reason="REAL_NODE=1 not set")


@asked
def test_up_adds_real_0_and_down_leaves_nothing_on_the_host(tmp_path: Path) -> None:
    why = realnode.cannot_run()
    if why is not None:
        pytest.skip(f"no real node here: {why}")
    if _another_node_runs():
        pytest.skip(f"a real node runs on this host already (bridge {host.BRIDGE})")
    node = realnode.Node.of(tmp_path.resolve())
    try:
        cluster = launcher.up(tmp_path, real_node=True)
        assert realnode.state(node)["ready"], realnode.state(node)
        code, found = launcher._api(cluster, "GET", f"/api/v1/nodes/{realnode.NAME}")
        assert code == 200
        assert found["spec"]["taints"] == [realnode.TAINT]
        assert node.leftovers(), "a running node shows in the lister"
    finally:
        launcher.down(tmp_path)
    assert node.leftovers() == []


def test_a_machine_without_root_gets_one_reason_and_a_cluster_without_the_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    said: list[str] = []
    monkeypatch.setattr(realnode.os, "geteuid", lambda: 1000)
    node = realnode.Node.of(tmp_path)
    reason = realnode.start(
        node, bin_dir=tmp_path, server="https://127.0.0.1:1", ca=tmp_path / "ca.crt",
        api=lambda *a: (0, {}), log=said.append,
    )  # fmt: skip
    assert reason == "not root (the kubelet needs root)"
    assert said == []  # cluster.py says it, once
    assert realnode.state(node) == {"ready": False, "reason": reason}
    assert not (tmp_path / "node" / "containerd.toml").exists()


@asked
def test_a_second_cluster_gets_no_node_and_leaves_the_running_one_alone(tmp_path: Path) -> None:
    """One real node per host: a second cluster asking for one says why it
    has none, and neither its start nor its down touches the node that runs."""
    if not _another_node_runs():
        pytest.skip("no real node runs on this host to be left alone")
    before = sorted(host.bridge_links(host.run("ip", "-o", "link").stdout))
    node = realnode.Node.of(tmp_path.resolve())
    try:
        launcher.up(tmp_path, real_node=True)
        assert realnode.state(node)["reason"].startswith("another real node runs on this host")
    finally:
        launcher.down(tmp_path)
    assert sorted(host.bridge_links(host.run("ip", "-o", "link").stdout)) == before


def test_the_apiserver_calls_the_kubelet_with_a_client_certificate_only_with_the_node(
    tmp_path: Path,
) -> None:
    lay = launcher._layout(tmp_path)
    node = realnode.Node.of(lay.root)
    node.pki.mkdir(parents=True)
    (node.pki / "kubelet-ca.crt").touch()
    ports = dict.fromkeys(launcher.PORTS, 1)

    def kubelet_flags() -> list[str]:
        args = launcher._apiserver_args(lay, tmp_path, ports)
        return sorted(a.split("=")[0] for a in args if a.startswith("--kubelet-"))

    assert kubelet_flags() == []
    realnode.request(node, True)
    assert kubelet_flags() == [
        "--kubelet-certificate-authority",
        "--kubelet-client-certificate",
        "--kubelet-client-key",
        "--kubelet-preferred-address-types",
    ]
    assert "root-ca-certificate-publisher" in launcher._kcm_controllers(lay)
