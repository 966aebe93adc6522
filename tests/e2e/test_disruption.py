"""Disruptions within a budget on a real apiserver and disruption controller:
our PodDisruptionBudget, a drain that takes one pod of a Redis at a time, a
crash-looping pod that never blocks a drain, and refused evictions of our
rolling update said in the status until they go through."""

from __future__ import annotations

import json
from typing import Any

import pytest

from . import kubelet
from .conftest import Kubectl, Reconciler, wait_for
from .test_real_clusters import columns, events, set_image, status
from .test_redis import pods, redis_yaml, settled

pytestmark = pytest.mark.e2e

INSTANCE = {"app.kubernetes.io/instance": "redis-sample"}


def budget(kubectl: Kubectl, ns: str, name: str = "redis-sample") -> dict[str, Any]:
    return kubectl.json("get", "pdb", name, "-n", ns)


def allowed(kubectl: Kubectl, ns: str, name: str = "redis-sample") -> int | None:
    st = budget(kubectl, ns, name).get("status") or {}
    return st.get("disruptionsAllowed") if st.get("observedGeneration") else None


def evict(kubectl: Kubectl, ns: str, pod: str) -> tuple[bool, str]:
    """What `kubectl drain` does for each pod: a POST to its eviction."""
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": pod, "namespace": ns},
    }
    done = kubectl.run(
        "create",
        "--raw",
        f"/api/v1/namespaces/{ns}/pods/{pod}/eviction",
        "-f",
        "-",
        stdin=json.dumps(body),
        check=False,
    )
    return done.returncode == 0, done.stderr


def their_budget(kubectl: Kubectl, ns: str, **spec: Any) -> None:
    kubectl.apply(
        json.dumps(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "theirs", "namespace": ns},
                "spec": {"selector": {"matchLabels": INSTANCE}, **spec},
            }
        )
    )


def converged(kubectl: Kubectl, reconciler: Reconciler, ns: str, num: int) -> None:
    kubectl.apply(redis_yaml(ns, num=num))
    reconciler.converge(ns, settle=lambda: settled(kubectl, ns))
    wait_for(lambda: settled(kubectl, ns), what="pods Ready")


def test_a_drain_takes_one_pod_of_a_redis_at_a_time(
    kubectl: Kubectl, reconciler: Reconciler, ns: str
):
    converged(kubectl, reconciler, ns, 3)
    pdb = budget(kubectl, ns)
    assert pdb["spec"]["minAvailable"] == 2 and "maxUnavailable" not in pdb["spec"]
    assert pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    assert pdb["metadata"]["ownerReferences"][0]["name"] == "redis-sample"
    wait_for(lambda: allowed(kubectl, ns) == 1, what="the budget to allow one disruption")
    first, _ = evict(kubectl, ns, "redis-sample-0")
    second, why = evict(kubectl, ns, "redis-sample-1")
    assert first and not second
    assert "disruption budget" in why
    wait_for(lambda: "redis-sample-0" not in pods(kubectl, ns), what="redis-sample-0 evicted")
    assert "redis-sample-1" in pods(kubectl, ns)
    reconciler.converge(ns, settle=lambda: settled(kubectl, ns))  # and it comes back
    assert sorted(pods(kubectl, ns)) == ["redis-sample-0", "redis-sample-1", "redis-sample-2"]


def test_a_crash_looping_pod_never_blocks_a_drain(
    kubectl: Kubectl, reconciler: Reconciler, ns: str
):
    converged(kubectl, reconciler, ns, 3)
    kubelet.crash_loop(kubectl, ns, "redis-sample-0")
    wait_for(lambda: allowed(kubectl, ns) == 0, what="the budget to see the crash")
    healthy, _ = evict(kubectl, ns, "redis-sample-1")
    crashing, why = evict(kubectl, ns, "redis-sample-0")
    assert not healthy  # the other two serve: one of them may not go
    assert crashing, why  # AlwaysAllow: a pod that serves nothing may


def test_a_refused_eviction_holds_the_rollout_and_says_which_budget(
    kubectl: Kubectl, reconciler: Reconciler, ns: str
):
    """One pod, so no budget of ours; theirs wants it always up. The rolling
    update's eviction is refused, named in the status and a Warning event,
    asked again each pass with no other write, and goes through once their
    budget goes."""
    converged(kubectl, reconciler, ns, 1)
    their_budget(kubectl, ns, minAvailable=1)
    wait_for(lambda: allowed(kubectl, ns, "theirs") == 0, what="their budget's status")
    set_image(kubectl, ns, "redis:6-alpine")
    held = reconciler.sync(ns)
    assert held.summary["actions"]["Pod/evict/refused"] == 1
    assert held.summary["errors"] == [] and held.code == 0
    st = status(kubectl, ns)
    assert st["evictionRefused"]["pod"] == "redis-sample-0"
    assert (
        "The disruption budget theirs needs 1 healthy pods and has 1 currently" in (st["message"])
    )
    assert st.get("backoff") is None
    assert columns(kubectl, ns)["STATUS"] == "RollingUpdate"
    (said,) = events(kubectl, ns, "EvictionRefused")
    assert said.startswith("Eviction of pod redis-sample-0 refused: Cannot evict pod")

    again = reconciler.sync(ns)
    assert again.summary["actions"] == {"Pod/evict/refused": 1}
    assert again.writes == 1  # the eviction asked again, and nothing else

    kubectl.run("delete", "pdb", "theirs", "-n", ns)
    reconciler.converge(ns, settle=lambda: settled(kubectl, ns))
    wait_for(lambda: settled(kubectl, ns), what="pods Ready")
    reconciler.converge(ns)
    st = status(kubectl, ns)
    assert "evictionRefused" not in st and st["state"] == "Ready"
    assert pods(kubectl, ns)["redis-sample-0"]["spec"]["containers"][0]["image"] == "redis:6-alpine"


def test_a_pod_two_budgets_select_is_said_and_left(
    kubectl: Kubectl, reconciler: Reconciler, ns: str
):
    converged(kubectl, reconciler, ns, 3)
    their_budget(kubectl, ns, maxUnavailable=1)
    set_image(kubectl, ns, "redis:6-alpine")
    held = reconciler.sync(ns)
    assert held.summary["actions"]["Pod/evict/refused"] == 1
    assert "more than one PodDisruptionBudget" in status(kubectl, ns)["message"]
    assert len(pods(kubectl, ns)) == 3


def test_scaled_below_two_pods_the_budget_goes(kubectl: Kubectl, reconciler: Reconciler, ns: str):
    converged(kubectl, reconciler, ns, 2)
    assert budget(kubectl, ns)["spec"]["minAvailable"] == 1
    kubectl.apply(redis_yaml(ns, num=1))
    reconciler.converge(ns, settle=lambda: settled(kubectl, ns))
    gone = kubectl.run("get", "pdb", "redis-sample", "-n", ns, check=False)
    assert gone.returncode != 0 and "NotFound" in gone.stderr


def rescaled(
    kubectl: Kubectl, reconciler: Reconciler, ns: str, before: int, after: int
) -> list[dict[str, int]]:
    """Converged at ``before`` pods with the budget counted, then ``after``:
    the action counts of each pass until the cluster converges again."""
    converged(kubectl, reconciler, ns, before)
    wait_for(lambda: allowed(kubectl, ns) == 1, what="the budget to allow one disruption")
    kubectl.apply(redis_yaml(ns, num=after))
    results = reconciler.converge(ns, settle=lambda: settled(kubectl, ns))
    return [dict(r.summary["actions"]) for r in results]


def of_our_making(done: list[dict[str, int]]) -> list[str]:
    return [k for d in done for k in d if k.endswith(("/refused", "/conflict"))]


def test_a_change_of_num_resizes_the_budget(kubectl: Kubectl, reconciler: Reconciler, ns: str):
    """In the pass after the creates: the disruption controller writes the
    budget's status as soon as it sees the new pod, so a resize in the same
    pass met a 409 of our own making."""
    done = rescaled(kubectl, reconciler, ns, 3, 4)
    assert done[0].get("Pod/create/ok") == 1, done
    assert not of_our_making(done), done
    assert budget(kubectl, ns)["spec"]["minAvailable"] == 3
    wait_for(lambda: allowed(kubectl, ns) == 1, what="the budget counted over four pods")


def test_a_scale_down_resizes_the_budget_without_a_conflict_of_its_own(
    kubectl: Kubectl, reconciler: Reconciler, ns: str
):
    """The eviction writes the budget's status: a resize in the same pass,
    guarded by the resourceVersion the pass listed, met a 409 every time."""
    done = rescaled(kubectl, reconciler, ns, 3, 2)
    assert done[0].get("Pod/evict/ok") == 1, done
    assert not of_our_making(done), done
    assert sum(d.get("PodDisruptionBudget/patch/ok", 0) for d in done) == 1, done
    assert budget(kubectl, ns)["spec"]["minAvailable"] == 1


def test_a_scale_down_by_two_asks_no_eviction_our_budget_would_refuse(
    kubectl: Kubectl, reconciler: Reconciler, ns: str
):
    """Five pods, a budget that lets one go: the pass evicts one, and the
    next evicts the other once the budget allows it, with no refusal and no
    Warning of our own making."""
    done = rescaled(kubectl, reconciler, ns, 5, 3)
    assert done[0].get("Pod/evict/ok") == 1, done
    assert sum(d.get("Pod/evict/ok", 0) for d in done) == 2, done
    assert not of_our_making(done), done
    assert events(kubectl, ns, "EvictionRefused") == []
    assert sorted(pods(kubectl, ns)) == [f"redis-sample-{i}" for i in range(3)]
    assert budget(kubectl, ns)["spec"]["minAvailable"] == 2
