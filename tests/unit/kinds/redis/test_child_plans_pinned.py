"""child_plans.py's rules that a sampled mutation run found unpinned (issue
69, point 6): another's policy holding the name makes the Redis Degraded."""

from __future__ import annotations

from reconciler.kinds.redis import network
from tests.unit.kinds.redis.helpers import cond, status_of
from tests.unit.kinds.redis.test_network import CLIENTS, made, plan, with_policy


def test_another_s_policy_of_that_name_makes_it_degraded_and_is_its_state():
    r = with_policy(networkPolicy={"allowFrom": CLIENTS})
    theirs = made(r, controller_uid="someone-else", owner_refs=())
    st = status_of(plan(r, [theirs])).status
    degraded = cond(st, "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", network.CONFLICT)
    assert (st["state"], st["message"]) == (network.CONFLICT, network.conflict_message("r"))
