"""A Redis's NetworkPolicy, pass by pass: made while spec.networkPolicy is
set, put back when it drifts, deleted when unset, never another's, and
named in the status."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from reconciler.actions import CreateChild, DeleteChild, PatchChild, PatchStatus
from reconciler.backoff import gate
from reconciler.kinds.base import PlanInput
from reconciler.kinds.owned import DRIFT
from reconciler.kinds.redis import kind as redis_kind
from reconciler.kinds.redis import network
from reconciler.kinds.redis.identity import COMPONENT, owner_of
from reconciler.kinds.redis.spec import validate, validate_spec
from reconciler.model import PodIndex
from tests.unit.builders import CONFIG, NOW, redis, redis_writes
from tests.unit.kinds.redis.helpers import cond, status_of

CLIENTS = [{"podSelector": {"matchLabels": {"app": "shop"}}}]
SCRAPERS = [{"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}]


def with_policy(num: int = 1, **fields: Any) -> Any:
    return redis(spec={"port": 6379, "num": num, **fields})


def plan(r, policies=(), listed=True):
    index = PodIndex((), policies)
    children = frozenset({network.KIND}) if listed else frozenset()
    inp = PlanInput(index, CONFIG, NOW, gate(None, CONFIG.backoff, NOW), children=children)
    return redis_writes(r, inp)


def made(r, **changes) -> Any:
    """The policy a pass made for ``r``, as the apiserver stores it."""
    (create,) = [a for a in plan(r) if isinstance(a, CreateChild)]
    found = network.CHILD.decode(create.manifest)
    return dataclasses.replace(found, uid="np-1", resource_version="3", **changes)


def writes(actions):
    return [a for a in actions if isinstance(a, CreateChild | PatchChild | DeleteChild)]


def test_allow_from_makes_a_policy_that_lets_only_those_peers_reach_the_port():
    r = with_policy(networkPolicy={"allowFrom": CLIENTS})
    actions = plan(r)
    (create,) = writes(actions)
    assert create.manifest["metadata"]["ownerReferences"][0]["uid"] == r.uid
    assert create.manifest["spec"] == {
        "podSelector": {
            "matchLabels": {"app.kubernetes.io/name": "redis", "app.kubernetes.io/instance": "r"}
        },
        "policyTypes": ["Ingress"],
        "ingress": [{"from": CLIENTS, "ports": [{"protocol": "TCP", "port": 6379}]}],
    }
    assert status_of(actions).status[network.FIELD] == "r"
    assert redis_kind.child_names(r)[-1] == (network.KIND, "r")


def test_the_exporters_port_is_open_only_to_metrics_from():
    r = with_policy(networkPolicy={"allowFrom": CLIENTS, "metricsFrom": SCRAPERS}, exporter={})
    (create,) = writes(plan(r))
    rules = create.manifest["spec"]["ingress"]
    assert rules[1] == {"from": SCRAPERS, "ports": [{"protocol": "TCP", "port": 9121}]}


def test_a_policy_as_made_is_left_alone_and_the_plan_is_empty():
    r = with_policy(networkPolicy={"allowFrom": CLIENTS})
    settled = dataclasses.replace(r, status=status_of(plan(r, [made(r)])).status)
    assert writes(plan(settled, [made(r)])) == []
    assert not [a for a in plan(settled, [made(r)]) if isinstance(a, PatchStatus)]


def test_a_changed_allow_from_patches_the_ingress_whole():
    before = with_policy(networkPolicy={"allowFrom": CLIENTS})
    after = with_policy(networkPolicy={"allowFrom": SCRAPERS})
    (patch,) = writes(plan(after, [made(before)]))
    assert isinstance(patch, PatchChild)
    assert patch.resource_version == "3"
    assert patch.body["spec"]["ingress"][0]["from"] == SCRAPERS
    assert "podSelector" not in patch.body["spec"]


def test_a_selector_widened_by_hand_is_put_back_and_the_extra_label_removed():
    r = with_policy(networkPolicy={"allowFrom": CLIENTS})
    found = made(r)
    widened = {**found.spec, "podSelector": {"matchLabels": {"app.kubernetes.io/name": "redis"}}}
    (patch,) = writes(plan(r, [dataclasses.replace(found, spec=widened)]))
    assert patch.body["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/instance"] == "r"


def test_unsetting_it_deletes_ours_by_uid_and_the_status_forgets_it():
    before = with_policy(networkPolicy={"allowFrom": CLIENTS})
    after = dataclasses.replace(with_policy(), status={network.FIELD: "r"})
    assert redis_kind.child_names(after)[-1] == (network.KIND, "r")
    actions = plan(after, [made(before)])
    (delete,) = writes(actions)
    assert isinstance(delete, DeleteChild)
    assert delete.uid == "np-1"
    assert status_of(actions).status.get(network.FIELD) is None
    gone = dataclasses.replace(after, status=status_of(actions).status)
    assert (network.KIND, "r") not in redis_kind.child_names(gone)


def test_another_s_policy_of_that_name_is_never_touched_and_the_status_says_so():
    r = with_policy(networkPolicy={"allowFrom": CLIENTS})
    theirs = made(r, controller_uid="someone-else", owner_refs=())
    actions = plan(r, [theirs])
    assert writes(actions) == []
    degraded = cond(status_of(actions).status, "Degraded")
    assert degraded["reason"] == network.CONFLICT
    assert "network policy r is not owned by this Redis" in degraded["message"]
    unset = with_policy()
    assert writes(plan(unset, [theirs])) == []


def test_nothing_is_written_while_the_policies_were_not_listed():
    r = dataclasses.replace(
        with_policy(networkPolicy={"allowFrom": CLIENTS}), status={network.FIELD: "r"}
    )
    actions = plan(r, listed=False)
    assert writes(actions) == []
    assert status_of(actions).status[network.FIELD] == "r"  # kept as stored


def test_a_redis_without_it_wants_no_policy_listed():
    assert all(k != network.KIND for k, _ in redis_kind.child_names(with_policy()))


@pytest.mark.parametrize(
    ("policy", "says"),
    [
        ({}, "spec.networkPolicy.allowFrom: is required within spec.networkPolicy"),
        ({"allowFrom": "all"}, "spec.networkPolicy.allowFrom: must be a list of peers, got 'all'"),
        (
            {"allowFrom": [{}]},
            "spec.networkPolicy.allowFrom[0]: needs a podSelector or a namespaceSelector",
        ),
        (
            {"allowFrom": CLIENTS, "metricsFrom": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]},
            "spec.networkPolicy.metricsFrom[0]: must be a podSelector and/or a "
            "namespaceSelector, got {'ipBlock': {'cidr': '0.0.0.0/0'}}",
        ),
    ],
)
def test_a_bad_policy_is_named_by_its_field(policy, says):
    found = validate_spec({"num": 1, "networkPolicy": policy}, "redis:5-alpine").errors
    assert [str(e) for e in found] == [says]


def test_the_spec_keeps_the_peers():
    r = with_policy(networkPolicy={"allowFrom": CLIENTS})
    spec = validate(r, "redis:5-alpine").spec
    assert spec.access.peers == CLIENTS
    assert (
        network.desired_spec(owner_of(r), spec.access, 6379, False)["ingress"][0]["from"] == CLIENTS
    )


def test_the_crd_bounds_the_peers_as_the_planner_does():
    from pathlib import Path

    import yaml

    path = Path(__file__).resolve().parents[4] / "crds" / "myapp.demo.kubebuilder.io_redis.yaml"
    crd = yaml.safe_load(path.read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    found = spec["properties"][network.FIELD]
    assert found["required"] == ["allowFrom"]
    for key in ("allowFrom", "metricsFrom"):
        assert found["properties"][key]["maxItems"] == network.PEERS_MAX
        assert set(found["properties"][key]["items"]["properties"]) == set(network.SELECTORS)


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


def test_a_made_policy_is_said_in_a_normal_event_from_the_redis_controller():
    (create,) = writes(plan(with_policy(networkPolicy={"allowFrom": CLIENTS})))
    assert isinstance(create, CreateChild)
    assert create.event is not None
    assert (create.event.type, create.event.reason, create.event.component) == (
        "Normal",
        network.CREATED,
        COMPONENT,
    )
    assert create.event.message == (
        "Created network policy r: only spec.networkPolicy's peers may connect"
    )


def test_a_repair_says_what_drifted_in_a_normal_event():
    before = with_policy(networkPolicy={"allowFrom": CLIENTS})
    after = with_policy(networkPolicy={"allowFrom": SCRAPERS})
    (patch,) = writes(plan(after, [made(before)]))
    assert isinstance(patch, PatchChild)
    assert patch.why == "ingress differ from spec.networkPolicy"
    assert patch.event is not None
    assert (patch.event.type, patch.event.reason) == ("Normal", DRIFT)
    assert patch.event.component == COMPONENT  # the source kubectl shows
    assert patch.event.message == "Updated network policy r: ingress differ from spec.networkPolicy"


def test_unsetting_it_deletes_ours_saying_why():
    before = with_policy(networkPolicy={"allowFrom": CLIENTS})
    after = dataclasses.replace(redis(num=1), status={network.FIELD: "r"})
    (delete,) = writes(plan(after, [made(before)]))
    assert isinstance(delete, DeleteChild)
    assert delete.why == "spec.networkPolicy removed"
