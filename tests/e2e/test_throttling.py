"""An apiserver that answers 429 under load, as API Priority and Fairness and
the max-in-flight filter do: throttled writes are not the objects' failure,
and the leader keeps its Lease.

A second kube-apiserver on the test cluster's etcd serves the daemon, with
one mutating request in flight at a time; the reconciler's retries are off
(``max_retries: 0``), so every 429 outlasts them."""

from __future__ import annotations

import re
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hack.cluster import cluster as launcher

from .conftest import Identities, Kubectl, Reconciler, free_port, kubeconfig_for, wait_for
from .test_leader import LEASE, Replica
from .test_redis import pods

NAME = "kube-apiserver-throttled"
REDIS, NUM = 12, 2


@pytest.fixture(scope="module")
def throttled(cluster: Any) -> Iterator[Reconciler]:
    state_dir = cluster.state_dir
    loaded, _ = launcher.extra_apiserver(
        NAME,
        [
            "--enable-priority-and-fairness=false",
            "--max-requests-inflight=10",
            "--max-mutating-requests-inflight=1",
        ],
        state_dir,
    )
    yield loaded
    launcher.stop_component(NAME, state_dir)


def many(ns: str) -> str:
    return "\n---\n".join(
        f"apiVersion: myapp.demo.kubebuilder.io/v1\nkind: Redis\n"
        f"metadata: {{name: r{i}, namespace: {ns}}}\nspec: {{port: 6379, num: {NUM}}}"
        for i in range(REDIS)
    )


def ever_held(kubectl: Kubectl, ns: str) -> list[str]:
    """Redis whose status records a failure or says Degraded."""
    held = []
    for obj in kubectl.json("get", "redis", "-n", ns)["items"]:
        status = obj.get("status") or {}
        degraded = any(
            c["type"] == "Degraded" and c["status"] == "True" for c in status.get("conditions", [])
        )
        if degraded or "backoff" in status:
            held.append(obj["metadata"]["name"])
    return held


def test_throttled_writes_are_not_failures_and_the_leader_keeps_its_lease(
    kubectl: Kubectl, throttled: Any, ns: str, identities: Identities, tmp_path: Path
):
    """As the shipped ServiceAccount: system:masters is never throttled."""
    account = identities.service_account("reconciler")
    kubectl.run(
        "create", "role", "leases", "-n", ns, "--verb=get,create,update", "--resource=leases"
    )
    kubectl.run(
        "create",
        "rolebinding",
        "leases",
        "-n",
        ns,
        "--role=leases",
        f"--serviceaccount={ns}:{account}",
    )
    config = kubeconfig_for(
        kubectl,
        tmp_path / "kubeconfig",
        {"token": identities.token(account)},
        server=throttled.server,
    )
    kubectl.apply(many(ns))
    port = free_port()
    proc = Reconciler(config).daemon(
        ns,
        "--leader-elect",
        "--leader-election-namespace",
        ns,
        "--metrics-address",
        f"127.0.0.1:{port}",
        env={**LEASE, "RECONCILER_MAX_RETRIES": "0"},
        stdout=(log := (tmp_path / "daemon.log").open("w")),
    )
    replica = Replica(proc, port)
    held: set[str] = set()
    try:
        wait_for(lambda: replica.leader, what="the leader", timeout=30)

        def converged() -> bool:
            held.update(ever_held(kubectl, ns))
            current = pods(kubectl, ns)
            ready = [
                r
                for r in kubectl.json("get", "redis", "-n", ns)["items"]
                if (r.get("status") or {}).get("state") == "Ready"
            ]
            return len(current) == REDIS * NUM and len(ready) == REDIS

        wait_for(converged, what="every Redis Ready through the throttled apiserver", timeout=60)
        throttled_total = replica.metric("reconciler_throttled_total")
        leader_after = replica.leader
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        log.close()
    out = (tmp_path / "daemon.log").read_text()
    assert throttled_total > 0, "the apiserver never throttled: the test proves nothing"
    assert held == set(), f"throttling recorded as failure on {sorted(held)}"
    warnings = kubectl.json("get", "events", "-n", ns, "--field-selector", "type=Warning")
    assert [e["reason"] for e in warnings["items"]] == []
    assert leader_after and "renewal deadline passed" not in out
    lines = re.findall(r"pass \w+ \w+ in .*; (\d+) throttled;", out)
    assert lines and sum(map(int, lines)) == throttled_total
    assert "failed" not in " ".join(re.findall(r"pass \w+ .*", out))
