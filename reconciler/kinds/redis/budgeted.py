"""A Redis's pod changes as budgets let them land, and its budget's writes.

No more evictions are asked than our budget allows; a refusal the
apiserver gave is said in the status, and asked again while the same pod
is to go.
"""

from __future__ import annotations

from dataclasses import replace

from reconciler.actions import EvictPod
from reconciler.kinds.base import PlanInput
from reconciler.kinds.redis import disruption
from reconciler.kinds.redis.changes import PodChanges
from reconciler.kinds.redis.identity import Redis, owner_of
from reconciler.kinds.redis.removal import Removal
from reconciler.kinds.redis.rollout import Rollout
from reconciler.kinds.redis.spec import RedisSpec
from reconciler.model import Child


def within_budget(
    redis: Redis, budget: Child | None, changes: PodChanges, inp: PlanInput
) -> tuple[PodChanges, disruption.Refusal | None]:
    """The changes without the evictions our budget, as listed, would refuse,
    and the refusal the status says. Evicting the next pod of a rollout as
    soon as the last one turns Ready, before the disruption controller has
    counted it, was refused most times at 1,000 Redis (bench.pace); and a
    budget that lets some go gets no more evictions than it allows. Such a
    wait is no refusal: nothing was asked, so the status says none and no
    Warning is posted (a refusal the apiserver gave for that pod stands).
    It ends at the controller's next count, or when a pod of the Redis is
    Ready again, which the message already names."""
    evicting = [a.name for a in changes.actions if isinstance(a, EvictPod)]
    allowed = disruption.allowed_now(budget, redis.uid) if inp.refused is None else None
    if allowed is None or len(evicting) <= allowed:
        return changes, refusal_now(redis, changes, inp)
    stored = disruption.refusal_of(redis.status)
    held = kept(changes, *evicting[allowed:])  # asked once it allows them
    return held, disruption.expected(stored, frozenset(evicting))


def budget_wait(budget: Child | None, asked: PodChanges, kept: PodChanges) -> str:
    """Why our budget holds an eviction, said once the Redis is past its
    progress deadline: a short wait (the disruption controller about to
    count a pod) is no news worth a status write, a long one (the controller
    not counting, a pod not Ready) is why the rollout is stuck."""
    held = [a.name for a in asked.actions if isinstance(a, EvictPod) and a not in kept.actions]
    if not held or budget is None:
        return ""
    return f"eviction of {held[0]} waits: {disruption.why_held(budget)}"


def refusal_now(redis: Redis, changes: PodChanges, inp: PlanInput) -> disruption.Refusal | None:
    """The eviction a budget refused: just now (the status written after
    it), or in an earlier pass, while this one asks for the same pod again."""
    if inp.refused is not None:
        return disruption.Refusal(*inp.refused)
    evicting = frozenset(a.name for a in changes.actions if isinstance(a, EvictPod))
    return disruption.expected(disruption.refusal_of(redis.status), evicting)


def kept(changes: PodChanges, *pods: str) -> PodChanges:
    """The changes as they will land when the evictions of ``pods`` are refused."""

    def kept(removals: tuple[Removal, ...]) -> tuple[Removal, ...]:
        return tuple(r for r in removals if not (isinstance(r, EvictPod) and r.name in pods))

    rollout = Rollout(changes.rollout.stale, kept(changes.rollout.replace))
    return replace(changes, surplus=kept(changes.surplus), rollout=rollout)


def budget_plan(
    redis: Redis, spec: RedisSpec, inp: PlanInput
) -> tuple[disruption.BudgetWrite, ...]:
    """Its budget's writes: none while the budgets could not all be listed,
    while paused, or in a namespace being deleted. A scale-down held by
    another's budget keeps ours at its size for the pods it still has.
    When they run, and when its size waits, is `order.ORDER`'s."""
    if disruption.KIND not in inp.children or spec.paused or inp.namespace_terminating:
        return ()
    found = inp.pods.child(disruption.KIND, redis.namespace, redis.name)
    return disruption.plan_budget(owner_of(redis), found, spec.num)
