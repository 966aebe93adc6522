"""The rolling update: which stale pods are replaced this pass."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from reconciler.kinds.redis.identity import Redis
from reconciler.kinds.redis.pods import spec_drift, template_hash, template_hash_of
from reconciler.kinds.redis.removal import Removal, remove
from reconciler.kinds.redis.spec import RedisSpec
from reconciler.model import (
    Pod,
)


@dataclass(frozen=True)
class Rollout:
    stale: tuple[int, ...]  # desired indexes whose pod's containers differ from the spec's
    replace: tuple[Removal, ...]  # the stale pods deleted or evicted this pass


# Why a stale pod that is not Ready goes without waiting for the others.
UNREADY_STALE = "not Ready, so replaced without waiting"


def _why_stale(pod: Pod, spec: RedisSpec, drift: str) -> str:
    """ "spec changed" when the pod was made for another spec; "drift" when it
    was made for this one and changed since (by hand)."""
    if template_hash_of(pod) == template_hash(spec):
        return f"drift ({drift})"
    return "spec changed"


def _others_ready(spec: RedisSpec, desired: Mapping[int, Pod], victim: int) -> bool:
    return all(
        i in desired and not desired[i].terminating and desired[i].ready
        for i in range(spec.num)
        if i != victim
    )


def rolling_update(redis: Redis, spec: RedisSpec, desired: Mapping[int, Pod]) -> Rollout:
    """Stale pods that are not Ready (crashing, not pulling, unschedulable)
    all go at once: they serve nothing, so replacing them costs no
    availability (a Deployment counts them against maxUnavailable the same
    way), and waiting for them to turn Ready would wait forever when the new
    spec is the fix. Otherwise the lowest stale pod goes, only while every
    other desired pod exists and is Ready, so that at most one serving pod is
    down for the update at any time. An ended pod is replaced by
    `ended_pods` instead."""
    drifts = {
        i: spec_drift(p, spec) for i, p in desired.items() if not p.terminating and not p.ended
    }
    stale = tuple(sorted(i for i, d in drifts.items() if d is not None))
    unready = [i for i in stale if not desired[i].ready]
    if unready:
        return Rollout(stale, tuple(_replace(redis, spec, desired[i], drifts[i]) for i in unready))
    if not stale or not _others_ready(spec, desired, stale[0]):
        return Rollout(stale, ())
    return Rollout(stale, (_replace(redis, spec, desired[stale[0]], drifts[stale[0]]),))


def _replace(redis: Redis, spec: RedisSpec, pod: Pod, drift: str | None) -> Removal:
    why = _why_stale(pod, spec, drift or "")
    why = why if pod.ready else f"{why}; {UNREADY_STALE}"
    return remove(redis, pod, why, why)
