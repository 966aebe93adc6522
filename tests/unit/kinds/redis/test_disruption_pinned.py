"""disruption.py's rules that a sampled mutation run found unpinned (issue 69,
point 6): the selector of a budget changed by hand is put back by a merge
patch that nulls what we did not set, whatever shape it was left in; and
that repair, unlike a resize, is said in an event."""

from __future__ import annotations

import dataclasses

import pytest

from reconciler.kinds.owned import DRIFT
from reconciler.kinds.redis import disruption
from reconciler.kinds.redis.identity import owner_of, ref
from tests.unit.builders import budget_of, redis

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
