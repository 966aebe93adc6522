"""The pod writes of a pass (kinds/redis/changes.py, removal.py): missing pods,
scale down, foreign pods, ended pods."""

from __future__ import annotations

import dataclasses

import pytest

from reconciler.actions import (
    CreatePod,
    DeletePod,
    EvictPod,
    PatchFinalizers,
)
from reconciler.backoff import WriteError
from reconciler.engine.plan import plan_pass
from reconciler.kinds.redis.changes import why_ended
from reconciler.model import ContainerState
from tests.unit.builders import CONFIG, NOW, plan_redis, pod, redis, removed, snap
from tests.unit.kinds.redis.helpers import (
    cond,
    conds,
    converged,
    ended,
    status_of,
)


@pytest.mark.parametrize(
    ("recorded", "why"),
    [
        ({}, "scale up"),
        ({"replicas": 3}, "deleted by hand"),
        (
            {
                "replicas": 3,
                "conditions": [
                    {"type": "Progressing", "status": "True", "reason": "RollingUpdate"}
                ],
            },
            "spec changed",
        ),
    ],
)
def test_missing_pod_is_recreated_with_a_reason(recorded, why):
    r = redis(status=recorded)
    pods = [pod(r, 0), pod(r, 2)]
    creates = [a for a in plan_redis(r, pods, CONFIG, NOW) if isinstance(a, CreatePod)]
    assert [c.target.name for c in creates] == ["r-1"]
    assert creates[0].event.message == f"Created pod r-1: {why}"


def test_terminating_pod_blocks_recreation_of_its_name():
    r = redis()
    pods = [pod(r, 0), pod(r, 1, terminating=True), pod(r, 2)]
    actions = plan_redis(r, pods, CONFIG, NOW)
    assert not [a for a in actions if isinstance(a, CreatePod | DeletePod)]
    assert status_of(actions).status["replicas"] == 2


def test_scale_down_evicts_highest_indexes():
    """A Ready pod goes through the Eviction API, so its budgets are honoured."""
    r = redis(num=2, status={"replicas": 3})
    pods = [pod(r, i) for i in range(3)]
    actions = plan_redis(r, pods, CONFIG, NOW)
    deletes = [a for a in actions if isinstance(a, DeletePod | EvictPod)]
    assert [(d.name, d.why, d.uid) for d in deletes] == [("r-2", "scale down", pods[2].uid)]
    assert isinstance(deletes[0], EvictPod)
    assert deletes[0].event.reason == "EvictPod"
    assert "scale down" in deletes[0].event.message
    assert status_of(actions).status["replicas"] == 2


def test_scale_to_zero_keeps_finalizer_and_deletes_all():
    r = redis(num=0)
    pods = [pod(r, i) for i in range(2)]
    actions = plan_redis(r, pods, CONFIG, NOW)
    assert sorted(a.name for a in actions if isinstance(a, DeletePod | EvictPod)) == ["r-0", "r-1"]
    assert not [a for a in actions if isinstance(a, PatchFinalizers)]


def test_owned_pod_with_unexpected_name_is_deleted():
    r = redis(num=1)
    pods = [pod(r, 0), pod(r, 0, name="r-extra")]
    deletes = [a for a in removed(plan_redis(r, pods, CONFIG, NOW))]
    assert [d.name for d in deletes] == ["r-extra"]


def test_pod_owned_by_someone_else_is_never_touched():
    r = redis(num=2)
    foreign = pod(r, 1, owner_uid="someone-else")
    actions = plan_redis(r, [pod(r, 0), foreign], CONFIG, NOW)
    touched = [a for a in actions if isinstance(a, CreatePod | DeletePod)]
    assert touched == []
    patch = status_of(actions)
    degraded = cond(patch.status, "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "PodConflict")
    assert "r-1" in degraded["message"]
    (event,) = patch.events
    assert (event.type, event.reason) == ("Warning", "PodConflict") and "r-1" in event.message


def test_conflict_warning_is_not_repeated_once_recorded():
    r = redis(num=2)
    pods = [pod(r, 0), pod(r, 1, owner_uid="someone-else")]
    settled = converged(r, pods)
    assert plan_redis(settled, pods, CONFIG, NOW) == []


def test_ended_pods_are_named_one_by_one_in_the_status_message():
    r = redis(num=3)
    pods = [pod(r, 0), ended(pod(r, 1)), ended(pod(r, 2))]
    actions = plan_redis(converged(r, [pod(r, i) for i in range(3)]), pods, CONFIG, NOW)
    assert status_of(actions).status["message"] == "replacing ended pods: r-1, r-2"


def test_an_evicted_pod_is_deleted_with_its_own_reason_and_counts_for_nothing():
    r = redis(num=2)
    pods = [pod(r, 0), ended(pod(r, 1))]
    actions = plan_redis(converged(r, [pod(r, 0), pod(r, 1)]), pods, CONFIG, NOW)
    (delete,) = [a for a in actions if isinstance(a, DeletePod | EvictPod)]
    assert delete.name == "r-1" and delete.uid == pods[1].uid
    assert delete.event is not None
    assert delete.event.message == (
        "Deleted pod r-1: Evicted: The node was low on resource: memory."
    )
    st = status_of(actions).status
    assert (st["replicas"], st["readyReplicas"], st["updatedReplicas"]) == (1, 1, 1)
    assert conds(st)["Progressing"] == ("True", "ReplacingEndedPods")
    assert st["message"] == "replacing ended pods: r-1"
    # Once it is gone, its name is created anew.
    creates = [a for a in plan_redis(r, [pod(r, 0)], CONFIG, NOW) if isinstance(a, CreatePod)]
    assert [c.target.name for c in creates] == ["r-1"]


@pytest.mark.parametrize(
    ("phase", "reason", "message", "states", "said"),
    [
        ("Failed", "Evicted", "low on memory", (), "Evicted: low on memory"),
        ("Failed", "Evicted", "", (), "Evicted"),
        (
            "Succeeded",
            "",
            "",
            (ContainerState("redis", False, "Completed", ""),),
            "Succeeded (Completed)",
        ),
        ("Failed", "", "", (ContainerState("redis", True, "CrashLoopBackOff", ""),), "Failed"),
        ("Failed", "", "", (), "Failed"),  # no container's account: the phase alone
    ],
)
def test_an_ended_pod_is_said_in_its_own_words_else_its_container_s(
    phase, reason, message, states, said
):
    p = ended(pod(redis(), 0), phase=phase, reason=reason, message=message)
    assert why_ended(dataclasses.replace(p, container_states=states)) == said


def test_an_ended_pod_deleted_before_a_write_failed_is_counted_gone():
    """The status written after the failed create counts what landed before
    it: the ended pod's delete did, so it is no replica any more."""
    r = redis(num=3)
    the_plan = plan_pass(snap((r,), (), (pod(r, 0), ended(pod(r, 1)))), CONFIG, NOW)
    (delete,) = [a for a in the_plan.actions if isinstance(a, DeletePod)]
    assert delete.name == "r-1"
    rule = the_plan.owners[r.key].status_after
    assert rule is not None
    (after,) = rule(WriteError("403 Forbidden: no create", "Forbidden"), [delete])
    assert after.status["replicas"] == 1  # r-0; r-1 gone, r-2 not made
    assert conds(after.status)["Progressing"] == ("True", "ReplacingEndedPods")
