"""The pods of others, on the real apiserver: a pass lists only the pods that
carry our label, and looks up by name only the desired names those do not
show (test_drift and test_status cover our pod with its label removed and a
foreign pod on a desired name, found on the first pass)."""

from __future__ import annotations

import yaml

from .conftest import Kubectl, Reconciler, gated_pod
from .test_redis import pods, redis, redis_yaml, settled
from .test_status import condition

OTHERS = 40


def others(kubectl: Kubectl, ns: str) -> None:
    """Another team's pods in the same namespace, held Pending by a gate."""
    for i in range(OTHERS):
        doc = yaml.safe_load(gated_pod(ns, {"app.kubernetes.io/name": "web"}))
        doc["metadata"]["name"] = f"web-{i}"
        kubectl.apply(yaml.safe_dump(doc))


def test_a_converged_pass_reads_nothing_of_the_pods_of_others(
    kubectl: Kubectl, reconciler: Reconciler, ns: str
) -> None:
    kubectl.apply(redis_yaml(ns, num=2))
    reconciler.converge(ns, settle=lambda: settled(kubectl, ns))
    alone = reconciler.sync(ns)
    others(kubectl, ns)
    beside = reconciler.sync(ns)
    assert beside.writes == 0 and beside.summary["planned"] == 0
    assert "listed 2 Pod" in beside.stderr
    assert beside.summary["api_requests"] == alone.summary["api_requests"]
    # The same bytes but for digits of resourceVersions: 40 pods would be kilobytes.
    assert abs(beside.summary["bytes_received"] - alone.summary["bytes_received"]) < 200


def test_past_fifty_missing_names_one_list_finds_the_one_held_by_another(
    kubectl: Kubectl, reconciler: Reconciler, ns: str
) -> None:
    """55 desired pods, none there yet, and a foreign pod on the last name:
    one LIST of every pod instead of 55 GETs, and the conflict is in the
    status of the first pass."""
    others(kubectl, ns)
    kubectl.run("run", "redis-sample-54", "-n", ns, "--image=nginx", "--restart=Never")
    kubectl.apply(redis_yaml(ns, num=55))
    first = reconciler.sync(ns)
    assert first.summary["actions"].get("Pod/create/ok") == 54, first.summary["actions"]
    degraded = condition(redis(kubectl, ns), "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "PodConflict")
    assert "redis-sample-54" in degraded["message"]
    assert "ownerReferences" not in pods(kubectl, ns)["redis-sample-54"]["metadata"]
