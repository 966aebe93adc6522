"""Failure memory and the backoff schedule, in one place.

An object whose writes keep failing is retried less and less often, never
dropped. The memory lives in the object's own status (``status.backoff``), so
every mode (the daemon, `sync` from cron, the CronJob) reads the same record
back, and the planner stays a pure function of what a pass observed. Every time
here comes from the caller's clock.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from reconciler.model import rfc3339

DEFAULT_REASON = "ReconcileError"
# A write refused by a disruption budget: no failure of the object (no record,
# no backoff), but said in its status until the eviction goes through.
EVICTION_REFUSED = "EvictionRefused"
BACKING_OFF = "BackingOff"
STATUS_FIELD = "backoff"  # status.backoff: the record below, as the API stores it


@dataclass(frozen=True)
class Failure:
    """Consecutive failed passes of one object, and when to try it again."""

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
    """What the planner may do with one object this pass.

    ``hold``: write only its status (it is backing off, or a write of it just
    failed). ``backing_off``: say so in the status.
    """

    failure: Failure | None
    hold: bool
    backing_off: bool


OPEN = Gate(None, False, False)


def gate(failure: Failure | None, policy: Policy, now: datetime) -> Gate:
    """The gate of an object with this record at the start of a pass."""
    waiting = (
        failure is not None
        and failure.count >= policy.threshold
        and now.timestamp() < failure.retry_at
    )
    return Gate(failure, waiting, waiting)


def delay(count: int, policy: Policy) -> float:
    """0 below the threshold, then base, 2*base, 4*base ... capped."""
    if count < policy.threshold:
        return 0.0
    doublings = min(count - policy.threshold, 64)  # past that, the cap has long been reached
    return float(min(policy.cap, policy.base * 2**doublings))


@dataclass(frozen=True)
class WriteError:
    """The failed write of one object in a pass (an object stops at its first)."""

    message: str
    reason: str
    pod: str | None = None  # the pod an eviction of was refused


def after_failure(previous: Failure | None, error: WriteError, now: float, policy: Policy) -> Gate:
    """The gate for the status written right after a failed write: one more
    failure, and the time of the next try (whole seconds, rounded up, as the
    status stores them)."""
    count = (previous.count if previous is not None else 0) + 1
    retry_at = float(math.ceil(now + delay(count, policy)))
    failure = Failure(count, error.message, error.reason, retry_at)
    return Gate(failure, True, count >= policy.threshold)


def to_status(failure: Failure | None) -> dict[str, Any] | None:
    """The record as stored in ``status.backoff``; None removes it (merge patch)."""
    if failure is None:
        return None
    return {
        "failures": failure.count,
        "reason": failure.reason,
        "message": failure.message,
        "retryAfter": rfc3339(datetime.fromtimestamp(failure.retry_at, UTC)),
    }


def from_status(status: Mapping[str, Any]) -> Failure | None:
    """Read the record back; a malformed one is no record (the next failure
    starts counting again), never an error."""
    record = status.get(STATUS_FIELD)
    if not isinstance(record, Mapping):
        return None
    count, retry = record.get("failures"), record.get("retryAfter")
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        return None
    try:
        retry_at = datetime.fromisoformat(str(retry)).timestamp() if retry else 0.0
    except ValueError:
        retry_at = 0.0
    message = str(record.get("message") or "")
    return Failure(count, message, str(record.get("reason") or DEFAULT_REASON), retry_at)
