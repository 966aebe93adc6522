"""Rule 4: the pod writes of one pass (surplus, missing, stale, ended,
repaired), what the status needs to know of them, and the same changes held
back: while paused, in a namespace being deleted, and after a failed write.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from reconciler.actions import (
    Action,
    CreatePod,
    DeletePod,
    ObjRef,
    PatchPodMetadata,
    pod_event,
)
from reconciler.kinds.conditions import (
    observed_conditions,
)
from reconciler.kinds.redis.identity import COMPONENT, Redis, pod_index, pod_name, ref
from reconciler.kinds.redis.pods import PodSet, claims_of, held_by_another, pod_template
from reconciler.kinds.redis.removal import Removal, delete, remove
from reconciler.kinds.redis.repair import metadata_repair
from reconciler.kinds.redis.rollout import Rollout, rolling_update
from reconciler.kinds.redis.spec import RedisSpec
from reconciler.model import ObjKey, Pod

REPLACING_ENDED = "ReplacingEndedPods"


def surplus_pods(redis: Redis, spec: RedisSpec, podset: PodSet) -> list[Removal]:
    """Owned pods outside the desired set: beyond ``num``, or oddly named."""
    surplus: list[Removal] = []
    for pod in podset.owned:
        idx = pod_index(redis.name, pod.name)
        if pod.terminating or (idx is not None and idx < spec.num):
            continue
        surplus.append(remove(redis, pod, "scale down", f"scale down to {spec.num}"))
    return surplus


def _create_reason(redis: Redis, index: int) -> str:
    """Why a pod is created, for its event: a rollout, an ended pod, a
    deletion, or scaling up."""
    progressing = observed_conditions(redis.status).get("Progressing") or {}
    if progressing.get("reason") == "RollingUpdate":
        return "spec changed"
    if progressing.get("reason") == REPLACING_ENDED:
        return "replaces a pod that ended"
    recorded = redis.status.get("replicas")
    if isinstance(recorded, int) and index < recorded:
        return "deleted by hand"
    return "scale up"


@dataclass(frozen=True)
class Missing:
    creates: tuple[CreatePod, ...]
    conflicts: tuple[str, ...]  # desired names held by a pod this Redis does not own


def missing_pods(
    redis: Redis, spec: RedisSpec, podset: PodSet, going: frozenset[str] = frozenset()
) -> Missing:
    """Create each desired pod that does not exist, unless another holds its name
    (an owned pod still terminating holds it too, until it is gone), or its
    claim is being deleted (``going``: it would wait on a claim that goes)."""
    creates: list[CreatePod] = []
    conflicts: list[str] = []
    template: dict[str, Any] | None = None  # built once, for the first create
    involved: ObjRef | None = None
    for idx in range(spec.num):
        name = pod_name(redis, idx)
        if held_by_another(redis, podset, name):
            conflicts.append(name)
        elif idx not in podset.by_index and name not in going:
            template = template or pod_template(redis, spec)
            involved = involved or ref(redis)
            why = _create_reason(redis, idx)
            event = pod_event(involved, "CreatePod", (name,), why, COMPONENT)
            creates.append(CreatePod(redis.key, name, template, event, claims_of(spec, name)))
    return Missing(tuple(creates), tuple(conflicts))


def why_ended(pod: Pod) -> str:
    """The pod's own account of its end: its reason and message (an
    eviction), else its container's (OOMKilled, Error)."""
    if pod.reason:
        return f"{pod.reason}: {pod.message}" if pod.message else pod.reason
    ended = next((str(s) for s in pod.container_states if not s.waiting and s.reason), "")
    return f"{pod.phase} ({ended})" if ended else pod.phase


def ended_pods(redis: Redis, desired: Mapping[int, Pod]) -> tuple[DeletePod, ...]:
    """Desired pods that ended (Failed or Succeeded): their containers never
    run again, so they are deleted, and a later pass creates their names
    anew, as a StatefulSet does."""
    return tuple(
        delete(redis, p, f"ended: {why_ended(p)}", why_ended(p))
        for _, p in sorted(desired.items())
        if p.ended and not p.terminating
    )


@dataclass(frozen=True)
class PodChanges:
    """The pod writes of one pass, and what the status needs to know of them."""

    desired: Mapping[int, Pod]  # owned pods at desired indexes, before the changes
    surplus: tuple[Removal, ...]
    missing: Missing
    rollout: Rollout
    repairs: tuple[PatchPodMetadata, ...] = ()
    ended: tuple[DeletePod, ...] = ()

    @property
    def actions(self) -> list[Action]:
        """The writes the status counts; the metadata repairs come after the
        status (a pod written meanwhile must not hold the status back)."""
        return [*self.surplus, *self.ended, *self.missing.creates, *self.rollout.replace]

    @property
    def deleted(self) -> frozenset[str]:
        return frozenset(d.name for d in (*self.surplus, *self.ended, *self.rollout.replace))


def pod_changes(
    redis: Redis, spec: RedisSpec, podset: PodSet, going: frozenset[str] = frozenset()
) -> PodChanges:
    desired = {i: p for i, p in podset.by_index.items() if i < spec.num}
    rollout = rolling_update(redis, spec, desired)
    replaced = {d.name for d in rollout.replace}
    repairs = (
        metadata_repair(redis, spec, p)
        for _, p in sorted(desired.items())
        if not p.terminating and not p.ended and p.name not in replaced
    )
    return PodChanges(
        desired,
        tuple(surplus_pods(redis, spec, podset)),
        missing_pods(redis, spec, podset, going),
        rollout,
        tuple(r for r in repairs if r is not None),
        ended_pods(redis, desired),
    )


def paused(changes: PodChanges) -> PodChanges:
    """spec.paused: no pod is created, deleted, replaced or repaired; what
    would have been done is still counted (the stale pods) for the status."""
    return PodChanges(
        changes.desired,
        (),
        Missing((), changes.missing.conflicts),
        Rollout(changes.rollout.stale, ()),
    )


def nothing_created(changes: PodChanges) -> PodChanges:
    """In a namespace being deleted: deletes only (a rollout would need a create)."""
    missing = Missing((), changes.missing.conflicts)
    rollout = Rollout(changes.rollout.stale, ())
    return replace(changes, missing=missing, rollout=rollout)


def landed_only(changes: PodChanges, landed: frozenset[tuple[str, ObjKey]]) -> PodChanges:
    """The pod changes that already happened this pass: counted, not planned."""

    def done(action: Action | None) -> bool:
        return action is not None and (action.verb, action.target) in landed

    creates = tuple(c for c in changes.missing.creates if done(c))
    replaced = tuple(d for d in changes.rollout.replace if done(d))
    return PodChanges(
        changes.desired,
        tuple(d for d in changes.surplus if done(d)),
        Missing(creates, changes.missing.conflicts),
        Rollout(changes.rollout.stale, replaced),
        tuple(r for r in changes.repairs if done(r)),
        tuple(d for d in changes.ended if done(d)),
    )
