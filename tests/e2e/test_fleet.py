"""One command over two clusters: two control planes side by side
(`cluster.py fleet-up`), one kubeconfig with a context for each, as a
bastion has. Each cluster is served on its own: one that is down or refuses
the credentials is reported by name, and the other still converges."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from hack.cluster import cluster as launcher

from .conftest import Kubectl, Reconciler, delete_namespace, free_port, wait_for
from .test_redis import pods, redis_yaml, settled

ONE, TWO = "local", "local-2"


@pytest.fixture(scope="module")
def second(cluster: Any) -> Iterator[Any]:
    state_dir = launcher.FLEET[TWO]
    was_up = launcher.status(state_dir) is not None
    yield launcher.up(state_dir)
    if not was_up and not os.environ.get("KEEP_E2E_CLUSTER"):
        launcher.down(state_dir)


@pytest.fixture(scope="module")
def fleet_kubeconfig(cluster: Any, second: Any, tmp_path_factory: Any) -> Path:
    path = tmp_path_factory.mktemp("fleet") / "kubeconfig"
    return launcher.fleet_kubeconfig({ONE: cluster, TWO: second}, path)


@pytest.fixture
def kubectl2(second: Any, ns: str) -> Iterator[Kubectl]:
    """The second cluster, with the test's namespace made there too."""
    other = Kubectl(second.kubeconfig)
    other.run("create", "namespace", ns)
    yield other
    if launcher.status(launcher.FLEET[TWO]) is None:
        launcher.start_component("kube-apiserver", launcher.FLEET[TWO])
    delete_namespace(other, Reconciler(second.kubeconfig), ns)


def both(kubeconfig: Path, ns: str, *args: str, expect: int | None = 0) -> tuple[int, dict, str]:
    """``reconciler <args> --context local --context local-2 -n ns -o json``."""
    cmd = [sys.executable, "-m", "reconciler", *args, "--kubeconfig", str(kubeconfig)]
    cmd += ["--context", ONE, "--context", TWO, "-n", ns, "-o", "json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    if expect is not None and proc.returncode != expect:
        raise AssertionError(f"{args} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def test_one_sync_wait_converges_both_clusters_and_a_change_in_either(
    kubectl: Kubectl, kubectl2: Kubectl, ns: str, fleet_kubeconfig: Path
):
    kubectl.apply(redis_yaml(ns, num=2))
    kubectl2.apply(redis_yaml(ns, num=1))
    _, out, stderr = both(fleet_kubeconfig, ns, "sync", "--wait", "--timeout", "120")
    assert {name: c["wait"]["result"] for name, c in out["clusters"].items()} == {
        ONE: "converged",
        TWO: "converged",
    }
    assert (len(pods(kubectl, ns)), len(pods(kubectl2, ns))) == (2, 1)
    assert settled(kubectl, ns) and settled(kubectl2, ns)
    assert f"[{ONE} {ns}/redis-sample] " in stderr and f"[{TWO} {ns}/redis-sample] " in stderr

    kubectl2.run(
        "patch", "redis", "redis-sample", "-n", ns, "--type=merge", "-p", '{"spec":{"num":3}}'
    )
    _, out, _ = both(fleet_kubeconfig, ns, "sync", "--wait", "--timeout", "120")
    assert (len(pods(kubectl, ns)), len(pods(kubectl2, ns))) == (2, 3)
    ready = kubectl2.json("get", "redis", "redis-sample", "-n", ns)["status"]["readyReplicas"]
    assert ready == 3 and out["exit_code"] == 0


def test_a_cluster_whose_apiserver_is_down_holds_up_no_other(
    kubectl: Kubectl, kubectl2: Kubectl, ns: str, fleet_kubeconfig: Path
):
    kubectl.apply(redis_yaml(ns, num=2))
    kubectl2.apply(redis_yaml(ns, num=1))
    launcher.stop_component("kube-apiserver", launcher.FLEET[TWO])
    code, out, stderr = both(fleet_kubeconfig, ns, "sync", expect=None)
    assert code == 3 and out["exit_code"] == 3
    assert out["clusters"][ONE]["result"] == "ok"
    assert out["clusters"][ONE]["actions"]["Pod/create/ok"] == 2
    assert out["clusters"][TWO]["result"] == "unreachable"
    assert f"reconciler: error: [{TWO}] " in stderr
    wait_for(lambda: settled(kubectl, ns) and len(pods(kubectl, ns)) == 2, what="pods Ready")

    launcher.start_component("kube-apiserver", launcher.FLEET[TWO])
    _, out, _ = both(fleet_kubeconfig, ns, "sync", "--wait", "--timeout", "120")
    assert out["clusters"][TWO]["wait"]["result"] == "converged"
    assert len(pods(kubectl2, ns)) == 1


def test_a_context_whose_credentials_are_refused_is_named_unauthorized(
    kubectl: Kubectl, kubectl2: Kubectl, ns: str, fleet_kubeconfig: Path, tmp_path: Path
):
    refused = refused_kubeconfig(fleet_kubeconfig, tmp_path / "kubeconfig")
    kubectl.apply(redis_yaml(ns, num=1))
    kubectl2.apply(redis_yaml(ns, num=1))
    code, out, _ = both(refused, ns, "sync", expect=None)
    assert code == 3
    assert out["clusters"][ONE]["result"] == "ok"
    assert out["clusters"][TWO]["result"] == "unreachable"
    assert "unauthorized" in out["clusters"][TWO]["error"].lower()
    assert pods(kubectl2, ns) == {}


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        return str(resp.read().decode())


def readyz(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def both_daemon(kubeconfig: Path, ns: str) -> tuple[subprocess.Popen[str], int]:
    """``reconciler run --context local --context local-2 -n ns``, with its metrics port."""
    port = free_port()
    contexts = ("--context", ONE, "--context", TWO)
    daemon = Reconciler(kubeconfig).daemon(ns, *contexts, "--metrics-address", f"127.0.0.1:{port}")
    return daemon, port


def ready_redis(kubectl: Kubectl, ns: str, want: int) -> bool:
    found = kubectl.json("get", "redis", "redis-sample", "-n", ns).get("status") or {}
    return found.get("readyReplicas") == want and len(pods(kubectl, ns)) == want


def test_one_daemon_keeps_one_cluster_converging_while_the_other_is_down(
    kubectl: Kubectl, kubectl2: Kubectl, ns: str, fleet_kubeconfig: Path
):
    kubectl.apply(redis_yaml(ns, num=1))
    kubectl2.apply(redis_yaml(ns, num=1))
    daemon, port = both_daemon(fleet_kubeconfig, ns)
    try:
        for k in (kubectl, kubectl2):
            wait_for(lambda k=k: ready_redis(k, ns, 1), what="both clusters converged")
        wait_for(lambda: readyz(port) == (200, "ok\n"), what="the daemon ready")
        patch = ("patch", "redis", "redis-sample", "-n", ns, "--type=merge")
        kubectl2.run(*patch, "-p", '{"spec":{"num":2}}')
        wait_for(lambda: ready_redis(kubectl2, ns, 2), what="a change in the second reconciled")

        launcher.stop_component("kube-apiserver", launcher.FLEET[TWO])
        kubectl.run(*patch, "-p", '{"spec":{"num":3}}')
        wait_for(lambda: ready_redis(kubectl, ns, 3), what="the first converging alone")
        _, why = wait_for(
            lambda: (r := readyz(port))[0] == 503 and r, what="/readyz to name the cluster down"
        )
        assert why.startswith(f"{TWO}: no pass has reached the cluster for "), why
        metrics = scrape(port)
        assert f'reconciler_passes_total{{cluster="{TWO}",result="unreachable"}}' in metrics
        assert f'reconciler_objects_observed{{cluster="{ONE}",kind="Redis"}} 1.0' in metrics

        launcher.start_component("kube-apiserver", launcher.FLEET[TWO])
        kubectl2.run(*patch, "-p", '{"spec":{"num":1}}')
        wait_for(lambda: ready_redis(kubectl2, ns, 1), what="the second converging again")
        wait_for(lambda: readyz(port) == (200, "ok\n"), what="the daemon ready again")
    finally:
        daemon.send_signal(signal.SIGTERM)
        out, _ = daemon.communicate(timeout=60)
    assert daemon.returncode == 0, out[-3000:]
    assert f"[{ONE} {ns}/redis-sample] " in out and f"[{TWO} {ns}/redis-sample] " in out
    assert f"[{TWO}] " in out and "connection refused" in out, out[-3000:]


def refused_kubeconfig(fleet_kubeconfig: Path, path: Path) -> Path:
    """The fleet's kubeconfig with the second context's token replaced by one
    its apiserver refuses."""
    doc = yaml.safe_load(fleet_kubeconfig.read_text())
    for user in doc["users"]:
        if user["name"] == TWO:
            user["user"]["token"] = "not-a-token"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_one_daemon_holds_a_lease_in_each_cluster(
    kubectl: Kubectl, kubectl2: Kubectl, ns: str, fleet_kubeconfig: Path
):
    kubectl.apply(redis_yaml(ns, num=1))
    kubectl2.apply(redis_yaml(ns, num=1))
    daemon = Reconciler(fleet_kubeconfig).daemon(
        ns, "--context", ONE, "--context", TWO, "--leader-elect",
        "--leader-election-namespace", ns,
    )  # fmt: skip
    try:
        for k in (kubectl, kubectl2):
            wait_for(lambda k=k: ready_redis(k, ns, 1), what="both clusters converged")
        holders = [
            k.json("get", "lease", "reconciler", "-n", ns)["spec"]["holderIdentity"]
            for k in (kubectl, kubectl2)
        ]
    finally:
        daemon.send_signal(signal.SIGTERM)
        out, _ = daemon.communicate(timeout=60)
    assert daemon.returncode == 0, out[-3000:]
    assert all(holders), holders  # each cluster's Lease, held by this process's elector there
    # Released on the way out, in each cluster.
    for k in (kubectl, kubectl2):
        assert not k.json("get", "lease", "reconciler", "-n", ns)["spec"].get("holderIdentity")


def test_one_daemon_names_the_cluster_that_refuses_its_credentials(
    kubectl: Kubectl, kubectl2: Kubectl, ns: str, fleet_kubeconfig: Path, tmp_path: Path
):
    refused = refused_kubeconfig(fleet_kubeconfig, tmp_path / "kubeconfig")
    kubectl.apply(redis_yaml(ns, num=2))
    kubectl2.apply(redis_yaml(ns, num=1))
    daemon, port = both_daemon(refused, ns)
    try:
        wait_for(lambda: ready_redis(kubectl, ns, 2), what="the first cluster converged")
        _, why = wait_for(
            lambda: (r := readyz(port))[0] == 503 and r, what="/readyz to name the refused one"
        )
        metrics = scrape(port)
    finally:
        daemon.send_signal(signal.SIGTERM)
        out, _ = daemon.communicate(timeout=60)
    assert why.startswith(f"{TWO}: no pass has reached the cluster for "), why
    assert "unauthorized" in why, why
    assert f'reconciler_api_requests_total{{cluster="{TWO}",code="401",verb="LIST"}}' in metrics
    assert pods(kubectl2, ns) == {}
    assert f"[{TWO}] unauthorized" in out, out[-3000:]
