"""Disruptions within a budget: the Redis's PodDisruptionBudget, evictions
of serving pods, and a refusal said in the status without a failure."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from reconciler.actions import (
    CreateChild,
    CreatePod,
    DeleteChild,
    DeletePod,
    EvictPod,
    PatchChild,
    PatchStatus,
)
from reconciler.backoff import EVICTION_REFUSED, WriteError
from reconciler.client.errors import EvictionRefused
from reconciler.engine.plan import plan_pass
from reconciler.kinds.owned import DRIFT
from reconciler.kinds.redis import disruption
from reconciler.kinds.redis.disruption import REFUSED, REFUSED_FIELD
from reconciler.kinds.redis.identity import COMPONENT, owner_of, ref
from reconciler.kinds.redis.kind import KIND
from reconciler.kinds.redis.settings import DEFAULTS
from reconciler.result import Result
from tests.unit.builders import CONFIG, NOW, budget_of, pod, redis, snap
from tests.unit.engine.executing import executor
from tests.unit.kinds.redis.helpers import PAST_DEADLINE
from tests.unit.stored import holding

BUDGET_WHY = "The disruption budget r needs 2 healthy pods and has 2 currently"
REFUSAL = f"Cannot evict pod as it would violate the pod's disruption budget.; {BUDGET_WHY}"


def planned(r, pods, budgets=()):
    return plan_pass(snap((r,), (), tuple(pods), (), tuple(budgets)), CONFIG, NOW).actions


def of(actions, kind):
    return [a for a in actions if isinstance(a, kind)]


def test_a_redis_of_two_pods_or_more_gets_a_budget_of_one():
    """minAvailable as an integer: the disruption controller counts it from
    the pods alone, with no GET of the Redis's scale at each count."""
    r = redis(num=3)
    (create,) = [a for a in of(planned(r, []), CreateChild) if a.kind == "PodDisruptionBudget"]
    assert create.manifest["spec"] == {
        "minAvailable": 2,
        "selector": {
            "matchLabels": {"app.kubernetes.io/name": "redis", "app.kubernetes.io/instance": "r"}
        },
        "unhealthyPodEvictionPolicy": "AlwaysAllow",
    }
    assert create.manifest["metadata"]["ownerReferences"][0]["uid"] == r.uid


def test_a_redis_of_one_pod_gets_none_and_loses_ours():
    """A budget over one pod would block every drain of its node."""
    r = redis(num=1)
    assert not [a for a in of(planned(r, []), CreateChild) if a.kind == "PodDisruptionBudget"]
    (delete,) = of(planned(r, [pod(r, 0)], [budget_of(r)]), DeleteChild)
    assert (delete.target.name, delete.uid) == ("r", budget_of(r).uid)
    assert delete.why == "fewer than 2 pods: a budget would block every drain"


def test_a_budget_changed_by_hand_is_put_back_whole():
    r = redis(num=3)
    made = budget_of(r)
    labels = {**made.spec["selector"]["matchLabels"], "extra": "x"}
    edited = dataclasses.replace(
        made,
        spec={
            "maxUnavailable": 2,
            "selector": {"matchLabels": labels},
            "unhealthyPodEvictionPolicy": "IfHealthyBudget",
        },
    )
    pods = [pod(r, i) for i in range(3)]
    (patch,) = of(planned(r, pods, [edited]), PatchChild)
    assert patch.body["spec"]["maxUnavailable"] is None
    assert patch.body["spec"]["minAvailable"] == 2
    assert patch.body["spec"]["selector"]["matchLabels"]["extra"] is None
    assert patch.body["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"


def test_another_s_budget_of_that_name_is_left_alone():
    r = redis(num=3)
    theirs = dataclasses.replace(budget_of(r), controller_uid="someone")
    actions = planned(r, [pod(r, i) for i in range(3)], [theirs])
    assert not of(actions, PatchChild) and not of(actions, DeleteChild)


def test_serving_pods_are_evicted_and_the_others_deleted():
    """Ready stale r-0 is evicted; in a second Redis, the crashing stale pod
    is deleted (no budget counts it) and so is the ended one."""
    r = redis(num=3, image="redis:6")
    pods = [pod(r, i, image="redis:5-alpine") for i in range(3)]
    (evict,) = of(planned(r, pods), EvictPod)
    assert evict.name == "r-0" and evict.event.message == "Evicted pod r-0: spec changed"
    broken = [pod(r, 0, image="redis:5-alpine", ready=False), pod(r, 1), pod(r, 2)]
    broken[1] = dataclasses.replace(broken[1], phase="Failed")
    actions = planned(r, broken)
    assert sorted(d.name for d in of(actions, DeletePod)) == ["r-0", "r-1"]
    assert not of(actions, EvictPod)


def refused_status(r, pods):
    """The status the executor writes right after the eviction of r-0 was refused."""
    owner = plan_pass(snap((r,), (), tuple(pods)), CONFIG, NOW).owners[r.key]
    assert owner.status_after is not None
    (patch,) = owner.status_after(WriteError(REFUSAL, EVICTION_REFUSED, "r-0"), [])
    return patch


def test_a_refusal_is_said_in_the_status_without_a_failure():
    r = redis(num=3, image="redis:6")
    pods = [pod(r, i, image="redis:5-alpine") for i in range(3)]
    patch = refused_status(r, pods)
    st = patch.status
    assert st[REFUSED_FIELD] == {"pod": "r-0", "message": REFUSAL}
    assert st["replicas"] == 3 and st["updatedReplicas"] == 0  # r-0 stays
    assert f"eviction of r-0 refused: {REFUSAL}" in st["message"]
    assert st["state"] == "RollingUpdate"
    assert "backoff" not in st or st["backoff"] is None
    (event,) = patch.events
    assert (event.type, event.reason, event.component) == ("Warning", REFUSED, COMPONENT)
    assert event.message == f"Eviction of pod r-0 refused: {REFUSAL}"


def test_a_held_rollout_asks_again_and_writes_no_status():
    """The next pass evicts r-0 again, expecting the same refusal: one
    request a pass, and no status write while nothing changes."""
    r = redis(num=3, image="redis:6")
    pods = [pod(r, i, image="redis:5-alpine") for i in range(3)]
    r = dataclasses.replace(r, status=refused_status(r, pods).status)
    actions = plan_pass(snap((r,), (), tuple(pods)), CONFIG, NOW).actions
    assert [type(a).__name__ for a in actions] == ["EvictPod"]


def test_the_note_goes_once_the_pod_is_no_longer_evicted():
    r = redis(num=3, image="redis:6")
    pods = [pod(r, i, image="redis:5-alpine") for i in range(3)]
    r = dataclasses.replace(r, status=refused_status(r, pods).status)
    pods[0] = pod(r, 0, image="redis:5-alpine", terminating=True)  # evicted by someone else
    (patch,) = of(plan_pass(snap((r,), (), tuple(pods)), CONFIG, NOW).actions, PatchStatus)
    assert patch.status[REFUSED_FIELD] is None


def test_the_executor_takes_a_refusal_for_the_next_pass_and_writes_the_status():
    r = redis(num=3, image="redis:6")
    pods = [pod(r, i, image="redis:5-alpine") for i in range(3)]
    snapshot = snap((r,), (), tuple(pods))
    the_plan = plan_pass(snapshot, CONFIG, NOW)
    kube = holding(r, *pods)
    refusal = EvictionRefused(429, "TooManyRequests", REFUSAL.split("; ")[0], None, (BUDGET_WHY,))
    kube.scripted_errors[("EVICT", "r-0")] = refusal
    report = executor(kube).run(the_plan)
    outcomes = [(o.action.verb, o.result) for o in report.outcomes]
    assert outcomes[0] == ("evict", Result.REFUSED)
    assert report.failed() == []
    (status_write,) = [p for p in kube.patches if p[3] == "status"][-1:]
    assert status_write[2]["status"][REFUSED_FIELD] == {"pod": "r-0", "message": REFUSAL}


def test_a_policy_the_apiserver_does_not_keep_is_not_asked_for_again():
    """An apiserver without unhealthyPodEvictionPolicy (before 1.27, or the
    gate off) drops the field from our create: that is what admission made
    of it, and patching it back every pass would fight the server. A policy
    changed by hand is still put back."""
    r = redis(num=3)
    made = budget_of(r)
    dropped = dataclasses.replace(
        made, spec={k: v for k, v in made.spec.items() if k != "unhealthyPodEvictionPolicy"}
    )
    pods = [pod(r, i) for i in range(3)]
    assert not of(planned(r, pods, [dropped]), PatchChild)
    edited = dataclasses.replace(
        made, spec={**made.spec, "unhealthyPodEvictionPolicy": "IfHealthyBudget"}
    )
    (patch,) = of(planned(r, pods, [edited]), PatchChild)
    assert patch.body["spec"] == {"unhealthyPodEvictionPolicy": "AlwaysAllow"}


# ------------------------------------------- evictions our budget would refuse

COUNTED_NONE = {
    "observedGeneration": 0,
    "disruptionsAllowed": 0,
    "currentHealthy": 2,
    "desiredHealthy": 2,
}


def stale_rollout():
    r = redis(num=3, image="redis:6")
    return r, [pod(r, i, image="redis:5-alpine") for i in range(3)]


def test_an_eviction_our_budget_allows_is_asked():
    r, pods = stale_rollout()
    (evict,) = of(planned(r, pods, [budget_of(r)]), EvictPod)
    assert evict.name == "r-0"


def test_an_eviction_our_budget_would_refuse_is_not_asked_and_no_refusal_is_said():
    """The disruption controller has not counted the pod that just turned
    Ready (three Ready, two counted): the Eviction API would refuse, from
    the same status. Nothing was refused: no refusal, no Warning, and the
    message names no wait that will be over at the next count."""
    r, pods = stale_rollout()
    actions = planned(r, pods, [budget_of(r, status=COUNTED_NONE)])
    assert not of(actions, EvictPod)
    (patch,) = of(actions, PatchStatus)
    assert patch.status[REFUSED_FIELD] is None and not patch.events
    assert patch.status["message"] == "0/3 pods updated to the current spec"
    assert patch.status["state"] == "RollingUpdate"


def test_a_budget_not_yet_counted_for_its_generation_holds_the_eviction():
    r, pods = stale_rollout()
    uncounted = budget_of(r, generation=2, status={**COUNTED_NONE, "disruptionsAllowed": 1})
    actions = planned(r, pods, [uncounted])
    assert not of(actions, EvictPod)
    (patch,) = of(actions, PatchStatus)
    assert patch.status[REFUSED_FIELD] is None and not patch.events


def test_a_refusal_said_in_the_apiserver_s_words_stays_while_the_budget_holds():
    """No status write and no event between a pass that asked and one that did not."""
    r, pods = stale_rollout()
    r = dataclasses.replace(r, status=refused_status(r, pods).status)
    actions = planned(r, pods, [budget_of(r, status=COUNTED_NONE)])
    assert not of(actions, EvictPod)
    for patch in of(actions, PatchStatus):  # the Service's name, listed now, is added
        assert patch.status[REFUSED_FIELD] == {"pod": "r-0", "message": REFUSAL}
        assert not patch.events


def test_another_s_budget_is_left_to_the_eviction_api_to_judge():
    r, pods = stale_rollout()
    theirs = budget_of(r, controller_uid="someone", status=COUNTED_NONE)
    (evict,) = of(planned(r, pods, [theirs]), EvictPod)
    assert evict.name == "r-0"


def test_an_eviction_asked_again_after_a_refusal_waits_and_brings_no_pass_forward():
    """Refused by a budget we cannot read (theirs, which may hold it for
    hours): asked again each pass, but no pass hurries it."""
    r, pods = stale_rollout()
    r = dataclasses.replace(r, status=refused_status(r, pods).status)
    actions = planned(r, pods, [budget_of(r)])
    assert of(actions, EvictPod)
    held = KIND.health(r, actions)
    assert held.progressing and held.waiting


def test_an_eviction_our_budget_holds_is_progress_the_disruption_controller_brings():
    r, pods = stale_rollout()
    for budget in (budget_of(r, status=COUNTED_NONE), budget_of(r)):
        moving = KIND.health(r, planned(r, pods, [budget]))
        assert moving.progressing and not moving.waiting


def test_a_change_of_num_resizes_the_budget_and_is_no_drift():
    """minAvailable follows spec.num; a resize is ours, so no drift event.
    It comes in the pass after the creates: the disruption controller writes
    the budget's status as soon as it sees the new pods, so a resize in the
    same pass would meet a 409 of our own making."""
    r = redis(num=5)
    creating = planned(r, [pod(r, i) for i in range(3)], [budget_of(redis(num=3))])
    assert len(of(creating, CreatePod)) == 2 and not of(creating, PatchChild)
    (patch,) = of(planned(r, [pod(r, i) for i in range(5)], [budget_of(redis(num=3))]), PatchChild)
    assert patch.body == {"spec": {"minAvailable": 4}}
    assert patch.why == "sized for 5 pods: minAvailable 4" and patch.event is None


def test_a_budget_of_maxunavailable_from_a_release_before_becomes_minavailable():
    r = redis(num=3)
    made = budget_of(r)
    older = dataclasses.replace(made, spec={**made.spec, "maxUnavailable": 1})
    del older.spec["minAvailable"]
    (patch,) = of(planned(r, [pod(r, i) for i in range(3)], [older]), PatchChild)
    assert patch.body == {"spec": {"minAvailable": 2, "maxUnavailable": None}}
    assert patch.event is None


def test_a_pass_that_evicts_resizes_the_budget_in_the_next_one():
    """The eviction writes the budget's status, so a resize in the same pass
    would only meet a 409 (a scale-down reported a conflict of its own
    making); the next pass, which evicts nothing, makes it."""
    r = redis(num=2)
    budget = budget_of(redis(num=3))
    evicting = planned(r, [pod(r, i) for i in range(3)], [budget])
    assert [a.name for a in of(evicting, EvictPod)] == ["r-2"]
    assert not of(evicting, PatchChild)
    after = [pod(r, 0), pod(r, 1), pod(r, 2, terminating=True)]
    (patch,) = of(planned(r, after, [budget]), PatchChild)
    assert patch.body == {"spec": {"minAvailable": 1}}


def test_the_budget_comes_after_the_status():
    """A 409 on the budget skips what follows it: the status goes first."""
    r = redis(num=3)
    actions = planned(r, [pod(r, i) for i in range(3)], [])
    order = [type(a).__name__ for a in actions if isinstance(a, PatchStatus | CreateChild)]
    assert order[-2:] == ["PatchStatus", "CreateChild"]


def test_a_pass_asks_no_more_evictions_than_our_budget_allows():
    """A scale-down by two under a budget that lets one go: the second
    eviction would be refused, with a Warning of our own making."""
    r = redis(num=3)
    pods = [pod(r, i) for i in range(5)]
    lets = {"observedGeneration": 0, "currentHealthy": 5, "desiredHealthy": 4}
    one = planned(r, pods, [budget_of(redis(num=5), status={**lets, "disruptionsAllowed": 1})])
    assert [a.name for a in of(one, EvictPod)] == ["r-3"]
    (status,) = of(one, PatchStatus)
    assert not status.events and status.status.get(REFUSED_FIELD) is None
    two = planned(r, pods, [budget_of(redis(num=5), status={**lets, "disruptionsAllowed": 2})])
    assert [a.name for a in of(two, EvictPod)] == ["r-3", "r-4"]


def test_a_wait_on_our_budget_past_the_progress_deadline_names_the_budget():
    """Quiet while short; once the rollout is past its deadline (a budget the
    disruption controller never counts), the message says what holds it."""
    r, pods = stale_rollout()
    uncounted = budget_of(r, generation=2, status={**COUNTED_NONE, "disruptionsAllowed": 1})
    (first,) = of(planned(r, pods, [uncounted]), PatchStatus)
    r = dataclasses.replace(r, status=first.status)
    later = NOW + timedelta(seconds=DEFAULTS.progress_deadline + 1)
    actions = plan_pass(snap((r,), (), tuple(pods), (), (uncounted,)), CONFIG, later).actions
    (stuck,) = of(actions, PatchStatus)
    assert not of(actions, EvictPod) and stuck.status[REFUSED_FIELD] is None
    assert stuck.status["message"] == (
        "no progress for 10m: 0/3 pods updated to the current spec; eviction of r-0 waits: "
        "budget r is not yet counted by the disruption controller"
    )


OURS = {"app.kubernetes.io/name": "redis", "app.kubernetes.io/instance": "r"}


def _selector_patch(selector):
    """The selector part of the patch that repairs our budget left with it."""
    r = redis(num=3)
    made = budget_of(r)
    edited = dataclasses.replace(made, spec={**made.spec, "selector": selector})
    return disruption.drift(owner_of(r), edited, 3)["spec"]["selector"]


def test_match_expressions_set_by_hand_are_nulled_and_our_labels_kept():
    """A merge patch merges the selector key by key: a matchExpressions we
    did not set is removed by a null, or it would narrow the budget."""
    expressions = [{"key": "tier", "operator": "In", "values": ["cache"]}]
    patch = _selector_patch({"matchLabels": OURS, "matchExpressions": expressions})
    assert patch == {"matchExpressions": None, "matchLabels": OURS}


@pytest.mark.parametrize("junk", ["app=redis", ["app", "redis"], None, 3])
def test_a_selector_that_is_no_map_is_replaced_by_ours(junk):
    assert _selector_patch(junk) == {"matchLabels": OURS}


@pytest.mark.parametrize("junk", ["app=redis", ["extra"], None])
def test_match_labels_that_are_no_map_are_replaced_by_ours(junk):
    """Nothing of them is kept, nor taken for label names to null."""
    assert _selector_patch({"matchLabels": junk}) == {"matchLabels": OURS}


def test_a_budget_repaired_from_a_hand_edit_says_so_in_a_normal_event():
    """Unlike a resize for spec.num, which is ours and says nothing."""
    r = redis(num=3)
    made = budget_of(r)
    edited = dataclasses.replace(made, spec={**made.spec, "unhealthyPodEvictionPolicy": "X"})
    (patch,) = disruption.plan_budget(owner_of(r), edited, 3)
    assert patch.why == "drift: unhealthyPodEvictionPolicy changed by hand"
    assert patch.event is not None
    assert (patch.event.involved, patch.event.type, patch.event.reason) == (
        ref(r),
        "Normal",
        DRIFT,
    )
    assert patch.event.message == (
        "Restored poddisruptionbudget r: drift: unhealthyPodEvictionPolicy changed by hand"
    )
    (resize,) = disruption.plan_budget(owner_of(r), made, 4)
    assert (resize.why, resize.event) == ("sized for 4 pods: minAvailable 3", None)


# --------------------------------- statuses someone else wrote, mistyped


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
    budget = dataclasses.replace(disruption.CHILD.decode(manifest), uid="pdb")
    assert budget.status == {}
    assert not [a for a in _planned(r, pods, [budget]) if isinstance(a, EvictPod)]


@pytest.mark.parametrize(
    ("status", "why"),
    [
        (
            {"observedGeneration": 0, "disruptionsAllowed": 0},
            "budget r allows no more disruptions now (3 healthy, 2 needed)",  # well typed
        ),
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
def test_past_the_deadline_the_budget_is_named_with_its_counts_when_well_typed(status, why):
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
