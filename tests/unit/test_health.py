"""Health: the state column, `reconciler plan`'s "Not Ready yet" list, the
object gauges. Each is read from the status the planner writes."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from reconciler.actions import Plan
from reconciler.backoff import Failure, WriteError
from reconciler.cli.render import plan_json, plan_text
from reconciler.engine.apply import ApplyReport
from reconciler.engine.plan import plan_pass
from reconciler.health import READY, Health
from reconciler.kinds import xca as xca_kind
from reconciler.kinds.base import settings_of
from reconciler.kinds.redis import kind as redis_kind
from reconciler.kinds.redis.kind import PODS_UNKNOWN
from reconciler.kinds.redis.settings import DEFAULTS
from reconciler.model import ObjKey
from reconciler.result import PassResult, plural
from reconciler.run.metrics import Metrics

from .builders import CONFIG, NOW, failing, plan_redis, pod, redis, snap, xca

RETRY = NOW.timestamp() + 60


def converged(r, pods):
    (patch,) = [a for a in plan_redis(r, pods) if a.verb == "patch-status"]
    return dataclasses.replace(r, status=patch.status)


def foreign(r, i):
    return pod(r, i, owner_uid="someone-else")


@pytest.mark.parametrize(
    ("setup", "state", "message"),
    [
        (lambda r: (r, [pod(r, i) for i in range(3)]), READY, "3/3 replicas ready"),
        (
            lambda r: (r, [pod(r, 0), pod(r, 1), pod(r, 2, ready=False)]),
            "WaitingForReady",
            "waiting for 1 of 3 pods to be Ready",
        ),
        (
            lambda r: (r, [pod(r, 0, image="redis:4"), pod(r, 1), pod(r, 2)]),
            "RollingUpdate",
            "2/3 pods updated to the current spec",
        ),
        (
            lambda r: (r, [pod(r, 0), pod(r, 1), foreign(r, 2)]),
            "PodConflict",
            "pods not owned by this Redis hold desired names: r-2",
        ),
        (
            lambda r: (dataclasses.replace(r, spec={"num": 3, "port": 1}), []),
            "InvalidSpec",
            "invalid spec: spec.port: must be between 6370 and 6380, got 1",
        ),
        (
            lambda r: (failing(r, Failure(3, "403 Forbidden: quota", "QuotaExceeded", RETRY)), []),
            "BackingOff",
            "backing off until 2026-11-22T12:01:00Z after 3 consecutive failures: "
            "403 Forbidden: quota",
        ),
    ],
)
def test_the_state_and_message_say_why_an_object_is_not_ready(setup, state, message):
    r, pods = setup(redis())
    result = plan_pass(snap((r,), (), pods), CONFIG, NOW)
    health = result.health[r.key]
    assert (health.state, health.message) == (state, message)
    (patch,) = [a for a in result.actions if a.verb == "patch-status"]
    assert (patch.status["state"], patch.status["message"]) == (state, message)
    if state == READY:
        assert result.pending == {} and "Not Ready yet" not in plan_text(result)
    else:
        assert f"  Redis default/r: {state}: {message}" in plan_text(result).splitlines()


def test_a_converged_object_with_pods_not_ready_plans_nothing_and_says_why():
    r = redis()
    pods = [pod(r, 0), pod(r, 1), pod(r, 2, ready=False)]
    result = plan_pass(snap((converged(r, pods),), (), pods), CONFIG, NOW)
    assert result.actions == ()
    assert plan_text(result).splitlines() == [
        "No changes to make now.",
        "",
        "Not Ready yet:",
        "  Redis default/r: WaitingForReady: waiting for 1 of 3 pods to be Ready",
    ]
    assert '"state": "WaitingForReady"' in plan_json(result)


def test_a_fully_converged_cluster_says_so():
    r = redis()
    pods = [pod(r, i) for i in range(3)]
    x = dataclasses.replace(xca(active=True))
    result = plan_pass(snap((converged(r, pods),), (x,), pods), CONFIG, NOW)
    assert result.actions == () and set(result.health) == {r.key, x.key}
    assert plan_text(result) == "No changes. The cluster matches the desired state."


def test_a_redis_being_deleted_and_an_xca_not_yet_active():
    r = redis(deleting=True)
    x = xca(active=None)
    result = plan_pass(snap((r,), (x,), [pod(r, 0)]), CONFIG, NOW)
    assert result.health[r.key] == Health(
        "Deleting", "deleting its pods, then releasing the finalizer", False, True
    )
    # The Xca's health is as its plan leaves it: active.
    assert result.health[x.key].ready
    assert xca_kind.health(x, []) == Health("Activating", "not active yet", False, True)


def test_health_reads_the_status_a_failure_wrote_not_the_plan():
    r = redis()
    assert plan_pass(snap((r,), (), []), CONFIG, NOW).health[r.key].state == "WaitingForReady"
    after = plan_pass(snap((r,), (), []), CONFIG, NOW).owners[r.key].status_after
    assert after is not None
    written = after(WriteError("403 Forbidden: quota", "QuotaExceeded"), [])
    health = redis_kind.health(r, written)
    assert (health.state, health.message, health.degraded) == (
        "QuotaExceeded",
        "403 Forbidden: quota",
        True,
    )


def test_with_its_pods_unseen_a_failed_write_plans_no_status_counted_from_nothing():
    """The pod LIST failed, so the status that follows a failed write would
    count no pods at all: none is planned, and the PodsUnknown one stands."""
    r = redis()
    blind = dataclasses.replace(snap((r,), (), None), pods_error="LIST Pod: 403")
    (written,) = plan_pass(blind, CONFIG, NOW).actions
    assert plan_pass(blind, CONFIG, NOW).health[r.key].state == PODS_UNKNOWN
    assert plan_pass(blind, CONFIG, NOW).owners[r.key].status_after is None
    assert written.status["state"] == PODS_UNKNOWN


def test_gauges_count_conditions_and_backoff_by_kind_and_clear():
    family = Metrics()
    metrics = family.cluster("", interval=30, stale_after=90)
    rk, xk = ObjKey("Redis", "ns", "a"), ObjKey("Xca", "ns", "x")
    health = {
        rk: Health("PodConflict", "m", degraded=True),
        ObjKey("Redis", "ns", "b"): Health("WaitingForReady", "m", progressing=True),
        ObjKey("Redis", "ns", "c"): Health(READY, "m"),
        ObjKey("Redis", "ns", "d"): Health(
            "ProgressDeadlineExceeded", "m", degraded=True, stalled=True
        ),
        xk: Health(READY, "active"),
    }
    observed = {"Pod": 3, "Redis": 4, "Xca": 1}
    result = PassResult("p", Plan(backing_off=frozenset({rk})), ApplyReport(), observed=observed)
    metrics.record_health(dataclasses.replace(result, health=health))

    def value(name, **labels):
        return family.registry.get_sample_value(name, labels)

    assert value("reconciler_objects", kind="Redis", condition="Degraded") == 2
    assert value("reconciler_objects_progress_deadline_exceeded", kind="Redis") == 1
    assert value("reconciler_objects", kind="Redis", condition="Progressing") == 1
    assert value("reconciler_objects", kind="Redis", condition="Ready") == 1
    assert value("reconciler_objects", kind="Xca", condition="Degraded") == 0
    assert value("reconciler_objects_backing_off", kind="Redis") == 1
    assert value("reconciler_objects", kind="Pod", condition="Ready") is None
    # Fixed: the gauges go back to zero. A kind whose LIST failed keeps its values.
    metrics.record_health(dataclasses.replace(result, observed={"Redis": 0}, plan=Plan()))
    assert value("reconciler_objects", kind="Redis", condition="Degraded") == 0
    assert value("reconciler_objects_backing_off", kind="Redis") == 0
    assert value("reconciler_objects_progress_deadline_exceeded", kind="Redis") == 0
    assert value("reconciler_objects", kind="Xca", condition="Ready") == 1


def test_a_rollout_past_its_deadline_is_stalled_in_its_health():
    r = redis(num=1)
    waiting = dataclasses.replace(pod(r, 0, ready=False), generation=1)
    seen = converged(r, [waiting])
    late = NOW + timedelta(seconds=2 * settings_of(CONFIG, DEFAULTS).progress_deadline)
    actions = plan_redis(seen, [waiting], CONFIG, late)
    health = redis_kind.health(seen, actions)
    assert (health.state, health.degraded, health.progressing, health.stalled) == (
        "ProgressDeadlineExceeded",
        True,
        False,
        True,
    )
    assert "ProgressDeadlineExceeded" in plan_text(
        plan_pass(snap([seen], [], [waiting]), CONFIG, late)
    )


def test_plural():
    assert [plural(n, "action") for n in (0, 1, 2)] == ["0 actions", "1 action", "2 actions"]
    assert plural(2, "pass", "passes") == "2 passes" and plural(1, "pass", "passes") == "1 pass"
