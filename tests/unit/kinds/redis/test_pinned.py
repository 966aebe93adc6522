"""Rules of kinds/redis/ that a sampled mutation run found unpinned (issue 69,
point 6): the Degraded reason past the progress deadline, status.backoff,
which stale pod rolls first, "and N more", ages under two minutes, and a
budget or a stored refusal whose status someone else wrote with the wrong
types."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from reconciler.actions import EvictPod, PatchStatus
from reconciler.backoff import STATUS_FIELD, Failure, to_status
from reconciler.children import child_from_api
from reconciler.engine.plan import plan_pass
from reconciler.kinds.redis import disruption
from reconciler.kinds.redis.disruption import REFUSED, REFUSED_FIELD
from reconciler.kinds.redis.identity import owner_of
from reconciler.kinds.redis.kind import KIND
from reconciler.kinds.redis.settings import DEFAULTS
from reconciler.kinds.redis.status import DEADLINE_EXCEEDED, NAMED_MAX
from tests.unit.builders import CONFIG, NOW, budget_of, plan_redis, pod, redis, removed, snap
from tests.unit.kinds.redis.helpers import cond, conds, held, image_pull_backoff, status_of, stored

PAST_DEADLINE = timedelta(seconds=DEFAULTS.progress_deadline + 1)


# ------------------------------------------- 1. Degraded past the deadline


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


# ------------------------------------------------------ 2. status.backoff


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


# ------------------------------------------------ 3. which stale pod rolls


@pytest.mark.parametrize(
    ("num", "stale", "first"),
    [(3, (2, 1, 0), "r-0"), (3, (2, 1), "r-1"), (11, (10, 2), "r-2")],
)
def test_of_several_ready_stale_pods_the_lowest_index_rolls_first(num, stale, first):
    """Listed in any order (the apiserver's is by name: r-10 before r-2)."""
    r = redis(num=num, image="redis:6")
    fresh = [pod(r, i, image="redis:6") for i in range(num) if i not in stale]
    pods = [pod(r, i, image="redis:5-alpine") for i in stale] + fresh
    assert [a.name for a in removed(plan_redis(r, pods, CONFIG, NOW))] == [first]


# -------------------------------------------------------- 4. "and N more"


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


# ------------------------------------------------------------- 5. ages


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


# --------------------------------- 6. statuses someone else wrote, mistyped


def _stale_rollout():
    r = redis(num=3, image="redis:6")
    return r, [pod(r, i, image="redis:5-alpine") for i in range(3)]


def _planned(r, pods, budgets=(), at=NOW):
    return plan_pass(snap((r,), (), tuple(pods), (), tuple(budgets)), CONFIG, at).actions


COUNTED = {"observedGeneration": 0, "disruptionsAllowed": 1}


@pytest.mark.parametrize(
    "status",
    [
        {**COUNTED, "observedGeneration": "0"},
        {**COUNTED, "observedGeneration": None},
        {**COUNTED, "observedGeneration": [0]},
        {**COUNTED, "disruptionsAllowed": "1"},
        {**COUNTED, "disruptionsAllowed": None},
        {**COUNTED, "disruptionsAllowed": {"value": 1}},
        {**COUNTED, "disruptionsAllowed": True},  # JSON true is no count
        {**COUNTED, "observedGeneration": True},
        {},
    ],
)
def test_a_budget_status_of_the_wrong_types_lets_no_pod_go(status):
    """Not trusted: our budget is taken as not counted, so no eviction is
    asked; and nothing was refused, so no refusal and no Warning."""
    r, pods = _stale_rollout()
    actions = _planned(r, pods, [budget_of(r, status=status)])
    assert not [a for a in actions if isinstance(a, EvictPod)]
    (patch,) = [a for a in actions if isinstance(a, PatchStatus)]
    assert patch.status[REFUSED_FIELD] is None and not patch.events
    assert patch.status["state"] == "RollingUpdate"


def test_a_budget_whose_whole_status_is_a_list_is_read_as_none():
    r, pods = _stale_rollout()
    manifest = {**disruption.manifest(owner_of(r), 3), "status": [COUNTED]}
    budget = dataclasses.replace(child_from_api("PodDisruptionBudget", manifest), uid="pdb")
    assert budget.status == {}
    assert not [a for a in _planned(r, pods, [budget]) if isinstance(a, EvictPod)]


@pytest.mark.parametrize(
    ("status", "why"),
    [
        (
            {"observedGeneration": "0", "disruptionsAllowed": 0},
            "budget r is not yet counted by the disruption controller",
        ),
        (
            {"observedGeneration": 0, "disruptionsAllowed": 0, "currentHealthy": "2"},
            "budget r allows no more disruptions now",
        ),
        (
            {"observedGeneration": 0, "disruptionsAllowed": 0, "desiredHealthy": None},
            "budget r allows no more disruptions now",
        ),
    ],
)
def test_past_the_deadline_a_mistyped_budget_is_named_without_its_counts(status, why):
    r, pods = _stale_rollout()
    budget = budget_of(r, status={"currentHealthy": 3, "desiredHealthy": 2, **status})
    (first,) = [a for a in _planned(r, pods, [budget]) if isinstance(a, PatchStatus)]
    r = dataclasses.replace(r, status=first.status)
    actions = _planned(r, pods, [budget], NOW + PAST_DEADLINE)
    (stuck,) = [a for a in actions if isinstance(a, PatchStatus)]
    assert not [a for a in actions if isinstance(a, EvictPod)]
    assert stuck.status["message"] == (
        f"no progress for 10m: 0/3 pods updated to the current spec; eviction of r-0 waits: {why}"
    )


@pytest.mark.parametrize(
    "junk",
    [
        "r-0",
        ["r-0", "Cannot evict pod"],
        None,
        {"pod": 0, "message": "Cannot evict pod"},
        {"pod": "r-0", "message": 5},
        {"pod": "r-0"},
        {"message": "Cannot evict pod"},
    ],
)
def test_a_stored_refusal_of_the_wrong_types_is_no_refusal(junk):
    """The eviction is asked, the status says no refusal (a null replaces
    the junk), no Warning is posted, and no pass is held back for it."""
    r, pods = _stale_rollout()
    r = dataclasses.replace(r, status={REFUSED_FIELD: junk})
    assert disruption.refusal_of(r.status) is None
    actions = _planned(r, pods)
    assert [a.name for a in actions if isinstance(a, EvictPod)] == ["r-0"]
    (patch,) = [a for a in actions if isinstance(a, PatchStatus)]
    assert REFUSED_FIELD in patch.status and patch.status[REFUSED_FIELD] is None
    assert REFUSED not in [e.reason for e in patch.events]
    assert "refused" not in patch.status["message"]
    assert not KIND.health(r, actions).waiting
