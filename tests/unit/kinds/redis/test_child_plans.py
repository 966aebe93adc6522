"""What a Redis's status says while a kind of child it needs could not be
listed (kinds/redis/child_plans.py `unseen_verdict`), planned whole by the
engine as a pass plans it: Degraded=ChildrenUnknown on each Redis whose
plan reads that kind, naming the kind and the error, no write of that kind,
said once, kept through a timeout, and gone once the kind is seen again."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest

from reconciler.actions import Action, CreateChild, DeleteChild, PatchChild, PatchStatus
from reconciler.children import plural
from reconciler.engine.plan import plan_pass
from reconciler.kinds.redis import disruption, network, service, storage
from reconciler.kinds.redis.child_plans import CHILDREN_UNKNOWN
from reconciler.kinds.redis.identity import Redis
from reconciler.snapshot import Snapshot
from tests.unit import sim
from tests.unit.builders import CONFIG, NOW, redis, snap
from tests.unit.kinds.redis.helpers import cond, status_of
from tests.unit.kinds.redis.test_network import CLIENTS, made, plan, with_policy

CLASSES = "StorageClass"
FORBIDDEN = {
    kind: f'LIST {kind}: 403 Forbidden: {kind.lower()}s is forbidden: User "bot" cannot list'
    for kind in (storage.KIND, service.KIND, disruption.KIND, network.KIND, CLASSES)
}
PLAIN = {"port": 6379, "num": 1}
STORAGE = {"port": 6379, "num": 1, "storage": {"size": "1Gi"}}
PAIR = {"port": 6379, "num": 2}
POLICY = {"port": 6379, "num": 1, network.FIELD: {"allowFrom": [{"podSelector": {}}]}}


def settled(*redises: Redis) -> Snapshot:
    """The world once passes, the kubelet and the provisioner are done: every
    pod, Service, budget, claim and policy made, every status written."""
    world = snap(redises, (), (), (), (), (), (), ())
    for _ in range(10):
        actions = plan_pass(world, CONFIG, NOW).actions
        if not actions:
            return world
        world = sim.kubelet(sim.apply(world, actions))
    raise AssertionError("no convergence")


def refused(world: Snapshot, *kinds: str, why: dict[str, str] = FORBIDDEN) -> Snapshot:
    """The same world as a pass sees it when the LIST of ``kinds`` fails:
    for good (a reason in ``why``), or for now (none)."""
    children = {**world.children, **dict.fromkeys(kinds)}
    unlisted = {k: why[k] for k in kinds if k in why}
    return dataclasses.replace(world, children=children, unlisted=unlisted)


def degraded(actions: Sequence[Action], r: Redis) -> dict[str, Any] | None:
    """The Degraded condition of ``r``'s status patch; None without one."""
    patches = [a for a in actions if isinstance(a, PatchStatus) and a.owner == r.key]
    if not patches:
        return None
    (patch,) = patches
    return next(c for c in patch.status["conditions"] if c["type"] == "Degraded")


def writes_of(actions: Sequence[Action], kind: str) -> list[Action]:
    return [
        a
        for a in actions
        if isinstance(a, CreateChild | PatchChild | DeleteChild) and a.kind == kind
    ]


# (the kind refused, the spec, whether the Redis needs that kind)
CASES = [
    (storage.KIND, STORAGE, True),
    (storage.KIND, PLAIN, False),
    (service.KIND, PLAIN, True),
    (disruption.KIND, PAIR, True),
    (disruption.KIND, PLAIN, False),
    (network.KIND, POLICY, True),
    (network.KIND, PLAIN, False),
    (CLASSES, STORAGE, False),  # its claim bound at its size: no class is read
]


@pytest.mark.parametrize(("kind", "spec", "needs"), CASES)
def test_a_refused_kind_degrades_the_redis_that_needs_it_and_no_other(kind, spec, needs):
    r = redis("r", spec=spec)
    world = settled(r)
    r = sim.redis_named(world, "r")
    actions = plan_pass(refused(world, kind), CONFIG, NOW).actions
    assert writes_of(actions, kind) == []
    found = degraded(actions, r)
    if not needs:
        assert found is None, actions  # its status stands: nothing it reads is missing
        return
    assert found is not None and found["status"] == "True"
    assert found["reason"] == CHILDREN_UNKNOWN
    assert found["message"].startswith(f"could not list {plural(kind)}: 403 Forbidden")
    assert "\n" not in found["message"]
    (patch,) = [a for a in actions if isinstance(a, PatchStatus)]
    assert patch.status["state"] == CHILDREN_UNKNOWN
    assert [(e.type, e.reason) for e in patch.events] == [("Warning", CHILDREN_UNKNOWN)]
    conditions = {c["type"]: c for c in patch.status["conditions"]}
    before = {c["type"]: c for c in r.status["conditions"]}
    for truthful in ("Ready", "Progressing"):  # its pods are as they were
        assert conditions[truthful] == before[truthful]


def test_the_message_names_each_kind_by_its_plural():
    r = redis("r", spec={**POLICY, "num": 2, "storage": {"size": "1Gi"}})
    world = settled(r)
    kinds = (storage.KIND, service.KIND, disruption.KIND, network.KIND)
    actions = plan_pass(refused(world, *kinds), CONFIG, NOW).actions
    message = degraded(actions, sim.redis_named(world, "r"))["message"]
    for many in ("PersistentVolumeClaims", "Services", "PodDisruptionBudgets", "NetworkPolicies"):
        assert f"could not list {many}: 403 Forbidden" in message
    assert "LIST " not in message  # the lister's prefix is not repeated


def _pending(c):
    return dataclasses.replace(c, status={"phase": "Pending"})


def _smaller(c):
    """Asking less than the spec's 1Gi: to grow, if its class lets it."""
    return dataclasses.replace(c, spec={**c.spec, "resources": {"requests": {"storage": "512Mi"}}})


@pytest.mark.parametrize("changed", [_pending, _smaller])
def test_storage_classes_are_needed_while_a_claim_waits_on_its_class_or_is_to_grow(changed):
    r = redis("r", spec=STORAGE)
    world = settled(r)
    claims = tuple(changed(c) for c in world.children[storage.KIND])
    world = dataclasses.replace(world, children={**world.children, storage.KIND: claims})
    actions = plan_pass(refused(world, CLASSES), CONFIG, NOW).actions
    found = degraded(actions, sim.redis_named(world, "r"))
    assert found["reason"] == CHILDREN_UNKNOWN
    assert found["message"].startswith("could not list StorageClasses: 403 Forbidden")


def test_said_once_kept_through_a_timeout_and_gone_once_the_kind_is_seen():
    r = redis("r", spec=STORAGE)
    world = settled(r)
    first = plan_pass(refused(world, storage.KIND), CONFIG, NOW).actions
    world = sim.apply(world, first)
    later = NOW + timedelta(minutes=1)
    # Refused again: nothing new to say, so nothing written.
    again = plan_pass(refused(world, storage.KIND), CONFIG, later).actions
    assert again == ()
    # A timeout (no lasting reason): the reason stored stands, no flap.
    assert plan_pass(refused(world, storage.KIND, why={}), CONFIG, later).actions == ()
    # Seen again: Degraded goes, and the claims are looked after as before.
    (healed,) = plan_pass(world, CONFIG, later).actions
    assert isinstance(healed, PatchStatus)
    found = next(c for c in healed.status["conditions"] if c["type"] == "Degraded")
    assert (found["status"], found["reason"]) == ("False", "AsExpected")
    assert healed.status["state"] != CHILDREN_UNKNOWN


def test_a_timeout_alone_says_nothing():
    """A Degraded flap per timeout would fire a Warning event each time."""
    r = redis("r", spec=STORAGE)
    world = settled(r)
    assert plan_pass(refused(world, storage.KIND, why={}), CONFIG, NOW).actions == ()


def test_a_refused_kind_makes_no_claim_for_a_new_redis():
    """Pods wait on claims never made: the status says why."""
    r = redis("r", spec=STORAGE)
    world = refused(snap((r,), (), (), (), (), (), (), ()), storage.KIND)
    actions = plan_pass(world, CONFIG, NOW).actions
    assert writes_of(actions, storage.KIND) == []
    assert degraded(actions, r)["reason"] == CHILDREN_UNKNOWN


def test_something_worse_is_said_first():
    """A pod of another holding a desired name needs a person first."""
    r = redis("r", spec=PLAIN)
    world = settled(r)
    r = sim.redis_named(world, "r")
    (mine,) = world.pods
    foreign = dataclasses.replace(mine, controller_uid="foreign", owner_refs=())
    world = dataclasses.replace(world, pods=(foreign,))
    actions = plan_pass(refused(world, service.KIND), CONFIG, NOW).actions
    assert degraded(actions, r)["reason"] == "PodConflict"


def test_another_s_policy_of_that_name_makes_it_degraded_and_is_its_state():
    r = with_policy(networkPolicy={"allowFrom": CLIENTS})
    theirs = made(r, controller_uid="someone-else", owner_refs=())
    st = status_of(plan(r, [theirs])).status
    degraded = cond(st, "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", network.CONFLICT)
    assert (st["state"], st["message"]) == (network.CONFLICT, network.conflict_message("r"))
