"""The status and its conditions (kinds/redis/status.py), the progress
deadline, and what a real cluster's pods say."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from reconciler.actions import (
    CreatePod,
)
from reconciler.backoff import STATUS_FIELD, Failure, to_status
from reconciler.kinds.base import settings_of
from reconciler.kinds.redis.kind import KIND
from reconciler.kinds.redis.settings import DEFAULTS
from reconciler.kinds.redis.status import DEADLINE_EXCEEDED, NAMED_MAX
from reconciler.model import ContainerState, PodCondition, rfc3339
from tests.unit.builders import CONFIG, NOW, current_hash, plan_redis, pod, redis
from tests.unit.kinds.redis.helpers import (
    PAST_DEADLINE,
    cond,
    conds,
    held,
    image_pull_backoff,
    kinds,
    status_of,
    stored,
)


def test_every_condition_carries_the_observed_generation():
    r = redis(generation=7)
    for pods in ([], [pod(r, i) for i in range(3)]):
        st = status_of(plan_redis(r, pods, CONFIG, NOW)).status
        assert [c["observedGeneration"] for c in st["conditions"]] == [7, 7, 7]
    st = status_of(plan_redis(redis(generation=7, spec={"port": 1}), [], CONFIG, NOW)).status
    assert [c["observedGeneration"] for c in st["conditions"]] == [7, 7, 7]
    assert st["observedGeneration"] == 7


def test_invalid_spec_conditions_in_full():
    st = status_of(plan_redis(redis(spec={"port": 1, "num": 1}), [], CONFIG, NOW)).status
    assert conds(st) == {
        "Ready": ("False", "InvalidSpec"),
        "Progressing": ("False", "InvalidSpec"),
        "Degraded": ("True", "InvalidSpec"),
    }
    assert (st["replicas"], st["readyReplicas"]) == (0, 0)
    assert "updatedReplicas" not in st


def test_invalid_spec_counts_the_live_pods_it_leaves_alone():
    r = redis(spec={"port": 1, "num": 3})
    pods = [pod(r, 0), pod(r, 1, ready=False), pod(r, 2, terminating=True)]
    st = status_of(plan_redis(r, pods, CONFIG, NOW)).status
    assert (st["replicas"], st["readyReplicas"]) == (2, 1)


def test_degraded_is_true_after_a_failure_and_while_backing_off():
    r = redis()
    pods = [pod(r, i) for i in range(3)]
    fail = Failure(1, "500 InternalError: etcd", "ReconcileError", 0.0)
    st = status_of(held(r, fail, pods)).status
    assert conds(st)["Degraded"] == ("True", "ReconcileError")
    assert cond(st, "Degraded")["message"] == "500 InternalError: etcd"
    third = Failure(3, "500 InternalError: etcd", "ReconcileError", NOW.timestamp() + 60)
    st = status_of(plan_redis(r, pods, CONFIG, NOW, third)).status
    assert conds(st)["Degraded"] == ("True", "BackingOff")
    assert cond(st, "Degraded")["message"] == (
        "backing off until 2026-11-22T12:01:00Z after 3 consecutive failures: "
        "500 InternalError: etcd"
    )
    # Past the retry time the pods are written again, planned as they will land.
    later = NOW + timedelta(minutes=2)
    actions = plan_redis(r, [], CONFIG, later, third)
    assert conds(status_of(actions).status)["Degraded"] == ("False", "AsExpected")
    assert len([a for a in actions if isinstance(a, CreatePod)]) == 3


def test_backing_off_still_writes_status_but_no_pods():
    r = redis()
    held = Failure(3, "boom", "ReconcileError", NOW.timestamp() + 60)
    actions = plan_redis(r, [], CONFIG, NOW, held)
    assert kinds(actions) == ["PatchStatus"]
    (event,) = actions[0].events
    assert (event.type, event.reason) == ("Warning", "BackingOff")


def test_a_conflict_outranks_a_failure_in_degraded():
    r = redis(num=2)
    fail = Failure(1, "boom", "ReconcileError", 0.0)
    pods = [pod(r, 0), pod(r, 1, owner_uid="someone-else")]
    st = status_of(held(r, fail, pods)).status
    assert conds(st)["Degraded"] == ("True", "PodConflict")


@pytest.mark.parametrize("holder", ["terminating", "foreign"])
def test_a_held_name_means_scaling_up(holder):
    r = redis(num=2)
    second = pod(r, 1, terminating=True) if holder == "terminating" else pod(r, 1, owner_uid="x")
    st = status_of(plan_redis(r, [pod(r, 0), second], CONFIG, NOW)).status
    assert conds(st)["Progressing"] == ("True", "ScalingUp")
    assert cond(st, "Progressing")["message"] == "1/2 pods exist"
    assert conds(st)["Ready"] == ("False", "ReplicasNotReady")


def test_progressing_reasons_and_messages():
    r = redis(num=2)
    table = [
        ([pod(r, 0), pod(r, 1)], ("False", "Complete"), "all 2 replicas updated and ready"),
        (
            [pod(r, 0), pod(r, 1, ready=False)],
            ("True", "WaitingForReady"),
            "waiting for 1 of 2 pods to be Ready",
        ),
        ([pod(r, 0), pod(r, 1), pod(r, 2)], ("True", "ScalingDown"), "removing pods beyond 2"),
        (
            [pod(r, 0), pod(r, 1), pod(r, 2, terminating=True)],
            ("True", "ScalingDown"),
            "removing pods beyond 2",
        ),
        (
            [pod(r, 0, image="redis:4"), pod(r, 1)],
            ("True", "RollingUpdate"),
            "1/2 pods updated to the current spec",
        ),
    ]
    for pods, expected, message in table:
        st = status_of(plan_redis(r, pods, CONFIG, NOW)).status
        assert conds(st)["Progressing"] == expected, pods
        assert cond(st, "Progressing")["message"] == message


def test_the_status_column_names_the_step_in_progress_even_when_ready():
    """`kubectl get redis` shows `state`: while surplus pods go, the desired
    ones are Ready, yet the column says ScalingDown, not Ready."""
    r = redis(num=2)
    table = [
        ([pod(r, 0), pod(r, 1)], "Ready", "True"),
        ([pod(r, 0), pod(r, 1), pod(r, 2)], "ScalingDown", "True"),
        ([pod(r, 0), pod(r, 1), pod(r, 2, terminating=True)], "ScalingDown", "True"),
        ([pod(r, 0), pod(r, 1, ready=False)], "WaitingForReady", "False"),
    ]
    for pods, state, ready in table:
        st = status_of(plan_redis(r, pods, CONFIG, NOW)).status
        assert (st["state"], conds(st)["Ready"][0]) == (state, ready), pods
        assert st["message"] == cond(st, "Progressing" if state != "Ready" else "Ready")["message"]


def test_a_rollout_in_progress_stays_a_rollout_until_every_pod_is_updated():
    rolling = {
        "replicas": 2,
        "conditions": [{"type": "Progressing", "status": "True", "reason": "RollingUpdate"}],
    }
    r = redis(num=2, status=rolling)
    # r-0 is being replaced (terminating), r-1 is current: one of two is updated.
    pods = [pod(r, 0, terminating=True, image="redis:4"), pod(r, 1)]
    st = status_of(plan_redis(r, pods, CONFIG, NOW)).status
    assert conds(st)["Progressing"] == ("True", "RollingUpdate")
    assert cond(st, "Progressing")["message"] == "1/2 pods updated to the current spec"
    assert (st["replicas"], st["updatedReplicas"]) == (1, 1)
    # Without the memory of a rollout, the same pods read as scaling up.
    st = status_of(plan_redis(redis(num=2), pods, CONFIG, NOW)).status
    assert conds(st)["Progressing"] == ("True", "ScalingUp")


def test_ready_needs_every_pod_ready_updated_and_present():
    r = redis(num=2)
    table = [
        ([pod(r, 0), pod(r, 1)], ("True", "AllReplicasReady")),
        ([pod(r, 0), pod(r, 1, ready=False)], ("False", "ReplicasNotReady")),
        ([pod(r, 0)], ("False", "ReplicasNotReady")),
        ([pod(r, 0), pod(r, 1, image="redis:4")], ("False", "ReplicasNotReady")),
    ]
    for pods, expected in table:
        st = status_of(plan_redis(r, pods, CONFIG, NOW)).status
        assert conds(st)["Ready"] == expected, pods
    st = status_of(plan_redis(r, [pod(r, 0)], CONFIG, NOW)).status
    assert cond(st, "Ready")["message"] == "1/2 replicas ready"


def test_counts_while_a_stale_pod_is_replaced():
    r = redis(num=3, port=6380)
    old = current_hash(6379)
    pods = [pod(r, 0, hash_=old), pod(r, 1), pod(r, 2, ready=False, port=6380)]
    pods = [pod(r, 0, hash_=old), pod(r, 1, port=6380), pods[2]]
    st = status_of(plan_redis(r, pods, CONFIG, NOW)).status
    # r-2 is not Ready, so r-0 is not replaced yet.
    assert (st["replicas"], st["readyReplicas"], st["updatedReplicas"]) == (3, 2, 2)


def test_degraded_warning_only_when_it_changes():
    r = redis(num=2)
    pods = [pod(r, 0), pod(r, 1, owner_uid="x")]
    first = status_of(plan_redis(r, pods, CONFIG, NOW))
    assert [e.reason for e in first.events] == ["PodConflict"]
    # Same reason, new message (another name held): warned again.
    r3 = dataclasses.replace(redis(num=3, status=first.status))
    pods3 = [*pods, pod(r3, 2, owner_uid="x")]
    again = status_of(plan_redis(r3, pods3, CONFIG, NOW))
    assert [e.message for e in again.events] == [
        "pods not owned by this Redis hold desired names: r-1, r-2"
    ]


def test_a_pod_stuck_terminating_is_named_with_what_holds_it():
    r = redis(num=2)
    stuck = dataclasses.replace(pod(r, 0, terminating=True), finalizers=("example.com/hold",))
    pods = [stuck, pod(r, 1)]
    # Within its grace period and the margin: nothing named yet.
    st = status_of(plan_redis(r, pods, CONFIG, NOW)).status
    assert st["message"] == "1/2 pods exist"
    later = NOW + timedelta(minutes=3)
    st = status_of(plan_redis(r, pods, CONFIG, later)).status
    message = "1/2 pods exist; r-0 terminating for 3m: held by finalizer example.com/hold"
    assert st["message"] == message
    assert cond(st, "Progressing")["message"] == message


def test_a_rollout_that_cannot_finish_names_its_pods_and_why():
    r = redis(num=2)
    unschedulable = dataclasses.replace(
        pod(r, 1, ready=False),
        conditions=(
            PodCondition(
                "PodScheduled",
                "False",
                "Unschedulable",
                "0/2 nodes are available: 2 Insufficient cpu.",
            ),
        ),
    )
    pods = [image_pull_backoff(pod(r, 0, ready=False)), unschedulable]
    st = status_of(plan_redis(r, pods, CONFIG, NOW)).status
    assert st["message"] == (
        "waiting for 2 of 2 pods to be Ready; "
        'r-0 not Ready: ImagePullBackOff: Back-off pulling image "redis:does-not-exist"; '
        "r-1 not Ready: Unschedulable: 0/2 nodes are available: 2 Insufficient cpu."
    )
    # A pod merely starting is not named.
    starting = ContainerState("redis", True, "ContainerCreating", "")
    pods = [dataclasses.replace(pod(r, 0, ready=False), container_states=(starting,)), pod(r, 1)]
    st = status_of(plan_redis(r, pods, CONFIG, NOW)).status
    assert st["message"] == "waiting for 1 of 2 pods to be Ready"


def test_progress_deadline_flags_a_rollout_with_no_progress_and_only_then():
    r = redis(num=2)
    pods = [pod(r, 0), image_pull_backoff(pod(r, 1, ready=False))]
    seen = stored(r, pods, NOW)
    assert seen.status["lastProgressTime"] == rfc3339(NOW)
    deadline = timedelta(seconds=settings_of(CONFIG, DEFAULTS).progress_deadline)
    # Nothing moves: no write until the deadline passes.
    assert plan_redis(seen, pods, CONFIG, NOW + deadline) == []
    actions = plan_redis(seen, pods, CONFIG, NOW + deadline + timedelta(seconds=1))
    patch = status_of(actions)
    st = patch.status
    assert conds(st)["Progressing"] == ("False", "ProgressDeadlineExceeded")
    assert conds(st)["Degraded"] == ("True", "ProgressDeadlineExceeded")
    assert st["state"] == "ProgressDeadlineExceeded"
    assert st["message"].startswith("no progress for 10m: waiting for 1 of 2 pods to be Ready; r-1")
    assert st["lastProgressTime"] == rfc3339(NOW)
    assert [(e.type, e.reason) for e in patch.events] == [("Warning", "ProgressDeadlineExceeded")]
    # It stays flagged, with no further write, until a pod moves.
    stuck = dataclasses.replace(seen, status={**seen.status, **st})
    assert plan_redis(stuck, pods, CONFIG, NOW + 2 * deadline) == []
    later = NOW + 3 * deadline
    st = status_of(plan_redis(stuck, [pod(r, 0), pod(r, 1)], CONFIG, later)).status
    assert conds(st)["Progressing"] == ("False", "Complete")
    assert st["state"] == "Ready" and st["lastProgressTime"] == rfc3339(later)


def test_a_new_generation_restarts_the_deadline():
    r = redis(num=2)
    pods = [pod(r, 0), image_pull_backoff(pod(r, 1, ready=False))]
    seen = stored(r, pods, NOW)
    later = NOW + timedelta(hours=1)
    st = status_of(plan_redis(dataclasses.replace(seen, generation=2), pods, CONFIG, later)).status
    assert conds(st)["Progressing"] == ("True", "WaitingForReady")
    assert st["lastProgressTime"] == rfc3339(later)


def test_the_log_names_the_fields_a_status_patch_changes():
    """A pod turned Ready: the log and `plan` name what changed, not every
    field the kind sets; the patch still carries them all."""
    r = redis(num=2)
    waiting = status_of(plan_redis(r, [pod(r, 0), pod(r, 1, ready=False)], CONFIG, NOW))
    r = dataclasses.replace(r, status=waiting.status)
    ready = status_of(plan_redis(r, [pod(r, 0), pod(r, 1)], CONFIG, NOW))
    assert ready.changed == ("conditions", "message", "readyReplicas", "state")
    assert ready.describe() == (
        "patch redis default/r status (conditions, message, readyReplicas, state)"
    )
    assert {"replicas", "observedGeneration"} <= set(ready.status)


# ------------------------------------------- Degraded past the deadline


def _conflicting(r):
    """r-1 is held by another's pod: Degraded=True/PodConflict, and scaling
    up can make no progress."""
    return [pod(r, 0), pod(r, 1, owner_uid="someone-else")]


def _failed_write(r):
    """r-1 is not Ready and a write of this pass just failed."""
    return [pod(r, 0), pod(r, 1, ready=False)]


@pytest.mark.parametrize(
    ("pods_of", "plan", "reason", "message"),
    [
        (
            _conflicting,
            lambda r, pods, at: plan_redis(r, pods, CONFIG, at),
            "PodConflict",
            "pods not owned by this Redis hold desired names: r-1",
        ),
        (
            _failed_write,
            lambda r, pods, at: held(r, Failure(1, "boom", "ReconcileError", 0.0), pods, at),
            "ReconcileError",
            "boom",
        ),
    ],
)
def test_past_the_deadline_a_degraded_reason_already_there_wins(pods_of, plan, reason, message):
    """Progressing says the deadline passed; Degraded keeps the worse reason
    it already had, and so do the state and the message."""
    r = redis(num=2)
    pods = pods_of(r)
    seen = stored(r, pods, NOW)
    before = conds(seen.status)["Progressing"]
    assert before[0] == "True"
    actions = plan(seen, pods, NOW + PAST_DEADLINE)
    st = status_of(actions).status
    assert conds(st)["Progressing"] == ("False", DEADLINE_EXCEEDED)
    assert cond(st, "Progressing")["message"].startswith("no progress for 10m: ")
    assert conds(st)["Degraded"] == ("True", reason)
    assert cond(st, "Degraded")["message"] == message
    assert (st["state"], st["message"]) == (reason, message)
    # Still counted as stuck (the ReconcilerRolloutStuck alert).
    assert KIND.health(seen, actions).stalled


def test_past_the_deadline_a_redis_not_degraded_becomes_degraded_by_it():
    r = redis(num=2)
    pods = [pod(r, 0), pod(r, 1, ready=False)]
    st = status_of(plan_redis(stored(r, pods, NOW), pods, CONFIG, NOW + PAST_DEADLINE)).status
    assert conds(st)["Degraded"] == ("True", DEADLINE_EXCEEDED)
    assert cond(st, "Degraded")["message"] == cond(st, "Progressing")["message"]


# ------------------------------------------------------ status.backoff


def test_no_backoff_field_is_written_when_nothing_failed():
    r = redis()
    for pods in ([], [pod(r, i) for i in range(3)], [pod(r, 0, ready=False)]):
        st = status_of(plan_redis(r, pods, CONFIG, NOW)).status
        assert STATUS_FIELD not in st


def test_the_backoff_field_is_written_after_a_failed_write_and_while_backing_off():
    r = redis()
    pods = [pod(r, i) for i in range(3)]
    first = Failure(1, "500 InternalError: etcd", "ReconcileError", 0.0)
    assert status_of(held(r, first, pods)).status[STATUS_FIELD] == to_status(first)
    third = Failure(3, "500 InternalError: etcd", "ReconcileError", NOW.timestamp() + 60)
    st = status_of(plan_redis(r, pods, CONFIG, NOW, third)).status
    assert st[STATUS_FIELD] == to_status(third)
    assert st[STATUS_FIELD]["retryAfter"] == "2026-11-22T12:01:00Z"


def test_a_stored_backoff_is_cleared_once_writes_are_planned_again():
    """Past its retry time (or below the threshold) the record is removed
    by a null in the merge patch, not left as it was."""
    r = redis()
    pods = [pod(r, i) for i in range(3)]
    third = Failure(3, "boom", "ReconcileError", NOW.timestamp() + 60)
    st = status_of(plan_redis(r, pods, CONFIG, NOW + timedelta(minutes=2), third)).status
    assert STATUS_FIELD in st and st[STATUS_FIELD] is None
    once = Failure(1, "boom", "ReconcileError", 0.0)
    st = status_of(plan_redis(r, pods, CONFIG, NOW, once)).status
    assert STATUS_FIELD in st and st[STATUS_FIELD] is None


# -------------------------------------------------------- "and N more"


def _pulling(r, n):
    return [image_pull_backoff(pod(r, i, ready=False)) for i in range(n)]


def _note(i):
    return f'r-{i} not Ready: ImagePullBackOff: Back-off pulling image "redis:does-not-exist"'


@pytest.mark.parametrize("over", [-1, 0, 1, 2])
def test_the_message_names_at_most_the_limit_and_counts_the_rest(over):
    n = NAMED_MAX + over
    r = redis(num=n)
    message = status_of(plan_redis(r, _pulling(r, n), CONFIG, NOW)).status["message"]
    named = [_note(i) for i in range(min(n, NAMED_MAX))]
    more = [f"and {over} more"] if over > 0 else []
    assert message == "; ".join([f"waiting for {n} of {n} pods to be Ready", *named, *more])


# ------------------------------------------------------------- ages


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(60, "60s"), (119, "119s"), (120, "2m"), (121, "2m"), (7199, "119m"), (7200, "2h")],
)
def test_an_age_is_in_seconds_under_two_minutes_then_minutes_then_hours(seconds, shown):
    """A pod terminating since ``seconds`` (its deletion, with 30 s of grace,
    was 10 s before NOW); it is named from 60 s on (grace and margin)."""
    r = redis(num=2)
    stuck = dataclasses.replace(pod(r, 0, terminating=True), finalizers=("example.com/hold",))
    at = NOW + timedelta(seconds=seconds - 10)
    st = status_of(plan_redis(r, [stuck, pod(r, 1)], CONFIG, at)).status
    assert st["message"] == (
        f"1/2 pods exist; r-0 terminating for {shown}: held by finalizer example.com/hold"
    )
