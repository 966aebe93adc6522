"""Failure memory and the backoff schedule, in one place.

An object whose writes keep failing is retried less and less often, never
dropped. The memory is an input of the planner (like the cluster itself), so
that backoff and the Degraded condition stay pure functions of what a pass
observed. Every time here comes from the caller's clock: the planner's ``now``
and the retry times it is compared with are read from the same clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from reconciler.actions import EventSpec, ObjRef
from reconciler.model import ObjKey

DEFAULT_REASON = "ReconcileError"
BACKING_OFF = "BackingOff"


@dataclass(frozen=True)
class Failure:
    """Consecutive failed writes of one object, and when to try it again."""

    count: int
    message: str
    reason: str = DEFAULT_REASON
    retry_at: float = 0.0  # seconds since the epoch, on the pass's clock


@dataclass(frozen=True)
class Policy:
    """After ``threshold`` consecutive failures: wait base, 2*base, 4*base ... cap."""

    threshold: int
    base: float
    cap: float


@dataclass(frozen=True)
class Gate:
    """What the planner may do with one object this pass. ``holding``: it is
    backing off, so only its status may be written."""

    failure: Failure | None
    holding: bool


def gate(failure: Failure | None, policy: Policy, now: datetime) -> Gate:
    holding = (
        failure is not None
        and failure.count >= policy.threshold
        and now.timestamp() < failure.retry_at
    )
    return Gate(failure, holding)


def delay(count: int, policy: Policy) -> float:
    """0 below the threshold, then base, 2*base, 4*base ... capped."""
    if count < policy.threshold:
        return 0.0
    doublings = min(count - policy.threshold, 64)  # past that, the cap has long been reached
    return float(min(policy.cap, policy.base * 2**doublings))


@dataclass(frozen=True)
class WriteError:
    """The first failed write of one object in a pass."""

    message: str
    reason: str


@dataclass(frozen=True)
class Memory:
    """Failure memory after a pass. ``announce``: the objects at or past the
    threshold, each of which gets a Warning naming the count and the next try."""

    failures: dict[ObjKey, Failure]
    announce: tuple[tuple[ObjKey, Failure], ...]


def remember(
    previous: Mapping[ObjKey, Failure],
    held: frozenset[ObjKey],
    failed: Mapping[ObjKey, WriteError],
    now: float,
    policy: Policy,
) -> Memory:
    """Carry failure counts across passes; never drop an object.

    A failed object's count goes up by one; an object held back this pass keeps
    its record as it was (only a status write may have run); every other
    object's record is cleared, since its writes succeeded. Every failed retry
    under backoff is announced: retries are rare by then, so the events are too.
    """
    failures: dict[ObjKey, Failure] = {}
    announce: list[tuple[ObjKey, Failure]] = []
    for key, error in failed.items():
        count = (previous[key].count if key in previous else 0) + 1
        record = Failure(count, error.message, error.reason, now + delay(count, policy))
        failures[key] = record
        if count >= policy.threshold:
            announce.append((key, record))
    for key, record in previous.items():
        if key in held and key not in failed:
            failures[key] = record
    return Memory(failures, tuple(announce))


def backoff_event(ref: ObjRef, component: str, failure: Failure, now: float) -> EventSpec:
    """A Warning saying the object is now retried less often (never dropped)."""
    wait = max(0, round(failure.retry_at - now))
    return EventSpec(
        ref,
        "Warning",
        BACKING_OFF,
        f"{failure.count} consecutive failures; next attempt in {wait}s: {failure.message}",
        component,
    )
