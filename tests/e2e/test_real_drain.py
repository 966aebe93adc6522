"""`kubectl drain real-0` against a Redis's PodDisruptionBudget, with a real
kubelet stopping the pods: the drain evicts what the budget allows and waits
on the pod whose eviction would break it (a short --timeout ends it with the
budget's refusal); after `kubectl uncordon` the Redis is Ready again, with
the keys written before, on its claims.

Serial: the drain takes the whole node, so it would evict any other test's
pods on it. Skipped, with the cluster's reason, where there is no real node."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hack.cluster import realnode

from .conftest import Kubectl, Reconciler, wait_for
from .test_real_node import PASSWORD, cli, node_images, placed, ready_pod

__all__ = ["node_images"]  # the fixture, shared with test_real_node

pytestmark = pytest.mark.serial("drains real-0")

NAME, NUM = "g", 2
PODS = [f"{NAME}-{i}" for i in range(NUM)]
REFUSED = "would violate the pod's disruption budget"  # the eviction API's words


def _ready(kubectl: Kubectl, ns: str) -> dict[str, dict[str, Any]]:
    found = {n: ready_pod(kubectl, ns, n) for n in PODS}
    return {n: p for n, p in found.items() if p}


def _budget_allows(kubectl: Kubectl, ns: str) -> int | None:
    found = kubectl.run("get", "pdb", NAME, "-n", ns, "-o", "json", check=False)
    if found.returncode != 0:
        return None
    status = json.loads(found.stdout).get("status", {})
    return int(status.get("disruptionsAllowed", 0)) if status.get("observedGeneration") else None


def test_a_drain_evicts_within_the_budget_and_after_uncordon_the_keys_are_back(
    kubectl: Kubectl, reconciler: Reconciler, ns: str, node_images: dict[str, str]
) -> None:
    kubectl.run("create", "secret", "generic", "auth", "-n", ns,
                f"--from-literal=password={PASSWORD}")  # fmt: skip
    spec = {"num": NUM, "image": node_images["redis"], "auth": {"passwordSecret": {"name": "auth"}},
            "storage": {"size": "64Mi"}}  # fmt: skip
    kubectl.run("apply", "-n", ns, "-f", "-", stdin=json.dumps(placed(NAME, spec)))

    def serving() -> dict[str, dict[str, Any]] | None:
        reconciler.sync(ns)
        found = _ready(kubectl, ns)
        return found if len(found) == NUM and _budget_allows(kubectl, ns) == 1 else None

    pods = wait_for(serving, what="two pods Ready, the budget allowing one", timeout=90)
    for name, pod in pods.items():
        assert cli(pod["status"]["podIP"], "-a", PASSWORD, "SET", "k", name) == "OK"

    try:
        drain = kubectl.run("drain", realnode.NAME, "--ignore-daemonsets",
                            "--delete-emptydir-data", "--timeout=15s", check=False)  # fmt: skip
        assert drain.returncode != 0, drain.stdout
        assert REFUSED in drain.stderr, drain.stderr
        left = _ready(kubectl, ns)
        assert len(left) == 1, left  # one evicted, the other held by the budget
        (evicted,) = set(PODS) - set(left)
        assert f"pod/{evicted} evicted" in drain.stdout, drain.stdout
    finally:
        kubectl.run("uncordon", realnode.NAME)

    pods = wait_for(serving, what="two pods Ready again", timeout=90, interval=0.5)
    assert {n: cli(p["status"]["podIP"], "-a", PASSWORD, "GET", "k") for n, p in pods.items()} == {
        n: n for n in PODS
    }
