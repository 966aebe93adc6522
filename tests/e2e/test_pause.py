"""spec.paused on a real apiserver: a rollout held halfway, pods deleted by
hand not replaced, the state shown by kubectl and reconciler plan, and a
paused Redis that is deleted."""

from __future__ import annotations

import json

import pytest

from .conftest import Kubectl, Reconciler, wait_for
from .test_real_clusters import columns, rolled_to, set_image, status, stays_converged, uids
from .test_redis import _release, pods, redis_yaml, settled

pytestmark = pytest.mark.e2e


def pause(kubectl: Kubectl, ns: str, paused: bool) -> None:
    patch = json.dumps({"spec": {"paused": paused}})
    kubectl.run("patch", "redis", "redis-sample", "-n", ns, "--type=merge", "-p", patch)


def test_a_pause_holds_a_rollout_halfway_and_unpausing_finishes_it(
    kubectl: Kubectl, reconciler: Reconciler, ns: str
):
    kubectl.apply(redis_yaml(ns, num=3))
    reconciler.converge(ns, settle=lambda: settled(kubectl, ns))
    set_image(kubectl, ns, "redis:6-alpine")
    reconciler.sync(ns)  # the first stale pod goes
    wait_for(lambda: "redis-sample-0" not in pods(kubectl, ns), what="redis-sample-0 gone")
    reconciler.sync(ns)  # and comes back on the new image
    wait_for(lambda: settled(kubectl, ns), what="pods Ready")

    pause(kubectl, ns, True)
    kubectl.run("delete", "pod", "redis-sample-2", "-n", ns)
    paused = reconciler.sync(ns)
    assert not any(k.startswith("Pod/") for k in paused.summary["actions"]), paused.summary
    shown = columns(kubectl, ns)
    assert (shown["READY"], shown["UP-TO-DATE"], shown["STATUS"]) == ("2", "1", "Paused")
    assert status(kubectl, ns)["message"] == (
        "paused (spec.paused): no pod is created, deleted or replaced; "
        "2/3 pods exist, 1/3 updated to the current spec, 2/3 ready"
    )
    plan = reconciler.cli("plan", "-n", ns)
    assert "No changes to make now." in plan.stdout
    assert "Paused (spec.paused: their pods are left as they are):" in plan.stdout
    assert f"  Redis {ns}/redis-sample: paused (spec.paused)" in plan.stdout
    stays_converged(kubectl, reconciler, ns)
    assert sorted(uids(kubectl, ns)) == ["redis-sample-0", "redis-sample-1"]

    pause(kubectl, ns, False)
    rolled_to(kubectl, reconciler, ns, "redis:6-alpine")


def test_deleting_a_paused_redis_deletes_its_pods(
    kubectl: Kubectl, reconciler: Reconciler, ns: str
):
    kubectl.apply(redis_yaml(ns, num=2))
    reconciler.converge(ns, settle=lambda: settled(kubectl, ns))
    pause(kubectl, ns, True)
    reconciler.sync(ns)
    assert columns(kubectl, ns)["STATUS"] == "Paused"
    kubectl.run("delete", "redis", "redis-sample", "-n", ns, "--wait=false")
    _release(kubectl, reconciler, ns)
