"""network.py's rules that a sampled mutation run found unpinned (issue 69,
point 6): the CRD's bound on peers, the whole selector a drift puts back,
and what a repair or a delete of our policy says."""

from __future__ import annotations

import dataclasses

from reconciler.actions import DeleteChild, PatchChild
from reconciler.kinds.owned import DRIFT
from reconciler.kinds.redis import network
from reconciler.kinds.redis.spec import validate_spec
from tests.unit.builders import redis
from tests.unit.kinds.redis.test_network import CLIENTS, SCRAPERS, made, plan, with_policy, writes

OURS = {"app.kubernetes.io/name": "redis", "app.kubernetes.io/instance": "r"}


def _errors(peers):
    policy = {"allowFrom": peers}
    return [str(e) for e in validate_spec({"num": 1, "networkPolicy": policy}, "redis:5").errors]


def test_peers_up_to_the_crd_s_max_items_are_taken_and_one_more_is_not():
    """The CRD's maxItems (PEERS_MAX) is a bound the planner checks alike."""
    assert _errors(CLIENTS * network.PEERS_MAX) == []
    over = network.PEERS_MAX + 1
    assert _errors(CLIENTS * over) == [
        f"spec.networkPolicy.allowFrom: must have at most {network.PEERS_MAX} peers, got {over}"
    ]


def test_a_selector_changed_by_hand_is_put_back_whole():
    """Our labels, a null for each label added and for matchExpressions (a
    merge patch merges a map key by key, so what we did not set would stay)."""
    r = with_policy(networkPolicy={"allowFrom": CLIENTS})
    found = made(r)
    changed = {
        "matchLabels": {**OURS, "app.kubernetes.io/instance": "other", "extra": "x"},
        "matchExpressions": [{"key": "tier", "operator": "Exists"}],
    }
    (patch,) = writes(
        plan(r, [dataclasses.replace(found, spec={**found.spec, "podSelector": changed})])
    )
    assert patch.body["spec"] == {
        "podSelector": {"matchLabels": {**OURS, "extra": None}, "matchExpressions": None}
    }


def test_a_repair_says_what_drifted_in_a_normal_event():
    before = with_policy(networkPolicy={"allowFrom": CLIENTS})
    after = with_policy(networkPolicy={"allowFrom": SCRAPERS})
    (patch,) = writes(plan(after, [made(before)]))
    assert isinstance(patch, PatchChild)
    assert patch.why == "ingress differ from spec.networkPolicy"
    assert patch.event is not None
    assert (patch.event.type, patch.event.reason) == ("Normal", DRIFT)
    assert patch.event.message == "Updated network policy r: ingress differ from spec.networkPolicy"


def test_unsetting_it_deletes_ours_saying_why():
    before = with_policy(networkPolicy={"allowFrom": CLIENTS})
    after = dataclasses.replace(redis(num=1), status={network.FIELD: "r"})
    (delete,) = writes(plan(after, [made(before)]))
    assert isinstance(delete, DeleteChild)
    assert delete.why == "spec.networkPolicy removed"
