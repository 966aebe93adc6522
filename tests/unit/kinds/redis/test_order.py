"""A Redis's writes run in the order `order.ORDER` declares, whatever order
its rules produce them in."""

from __future__ import annotations

import dataclasses

from reconciler.engine.plan import plan_pass
from reconciler.kinds import registry
from reconciler.kinds.redis.kind import KIND
from reconciler.kinds.redis.order import ORDER
from tests.unit.builders import CONFIG, NOW, redis, snap

CLIENTS = [{"podSelector": {"matchLabels": {"app": "shop"}}}]


def steps(actions):
    return [ORDER.steps[ORDER.step_of(a)].name for a in actions]


def test_a_first_pass_writes_in_the_declared_order():
    """Everything a new Redis asks for, in one pass: the finalizer guards the
    pods, claims come before the pods that mount them, the status counts
    the pods, and the budget comes last."""
    r = redis(
        finalizers=(),
        spec={
            "port": 6379,
            "num": 2,
            "storage": {"size": "1Gi"},
            "networkPolicy": {"allowFrom": CLIENTS},
        },
    )
    listed = snap((r,), (), (), services=(), budgets=(), claims=(), classes=(), policies=())
    actions = [a for a in plan_pass(listed, CONFIG, NOW).actions if a.owner == r.key]
    assert steps(actions) == [
        "finalizer",
        "new claims",
        "new claims",
        "pods",
        "pods",
        "service",
        "network policy",
        "status",
        "budget",
    ]


def test_the_engine_arranges_a_plan_by_its_kinds_order(monkeypatch):
    """The order is the declaration's, not the rules': the same writes
    produced backwards still run finalizer first and status after the pods."""

    def backwards(obj, inp):
        found = KIND.plan(obj, inp)
        return dataclasses.replace(found, actions=found.actions[::-1])

    reversed_kind = dataclasses.replace(KIND, plan=backwards)
    monkeypatch.setattr(registry, "KINDS", (reversed_kind,))
    r = redis(finalizers=(), num=2)
    actions = plan_pass(snap((r,)), CONFIG, NOW).actions
    assert steps(actions) == ["finalizer", "pods", "pods", "status"]
