"""When the daemon's next pass comes: early while objects move, at the
interval once the cluster is quiet.

Polling pays for reaction time with the interval. A pass that wrote, or that
left objects progressing (pods not yet Ready, a rolling update, a deletion
waiting for its pods), is followed ``min_interval`` after it started, or at
once if it took longer; while nothing it wrote changes the picture, the delay
doubles up to the interval. Delays count from the start of a pass, as the
interval does: a long pass has already given its first writes that long to
take effect, and waiting again after it only delays what it set in motion. Once the
picture is still, the delay keeps doubling from where it was until it reaches
the interval: changes come in bursts (a rollout, a drain, a person at
kubectl), and a pass that finds nothing costs little. So each write buys at
most log2(interval / min_interval) passes more, never a loop. Objects in
backoff and Degraded objects (an invalid spec, a pod conflict that only a
person can resolve) never make a pass early, so a stuck object costs no more
than a quiet one; nor does a pass the apiserver throttled (429), which is
followed at the interval while the throttling lasts. Pure: the daemon hands
in the pass and the previous pace.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from reconciler.result import PassOutcome, PassResult, Result, plural


class Why(StrEnum):
    """Why a pass comes before the interval; the metric's label values."""

    WROTE = "wrote"  # this pass changed the cluster: look at the result soon
    CONFLICT = "conflict"  # someone else wrote first: the next pass sees what they did
    PROGRESSING = "progressing"  # waiting for pods, a rolling update or a deletion
    SETTLING = "settling"  # still now, but it moved lately: look again, less often each time


@dataclass(frozen=True)
class Pace:
    delay: float  # seconds from the start of this pass to the start of the next
    why: Why | None = None  # None: the regular interval
    detail: str = ""  # for the log: what moved

    @property
    def early(self) -> bool:
        return self.why is not None


@dataclass(frozen=True)
class Motion:
    """Why the picture may still change without anyone acting."""

    why: Why
    detail: str  # for the log: what moved


def motion(result: PassResult) -> Motion | None:
    """What this pass left in motion; None when the picture is still, so a
    further pass could see only what someone else changes."""
    counts = result.applied.counts()
    wrote = sum(n for (_, _, res), n in counts.items() if res is Result.OK)
    conflicts = sum(n for (_, _, res), n in counts.items() if res is Result.CONFLICT)
    if wrote:
        return Motion(Why.WROTE, plural(wrote, "write"))
    if conflicts:
        return Motion(Why.CONFLICT, f"{plural(conflicts, 'write')} refused with 409 Conflict")
    moving = [
        key
        for key, health in result.health.items()
        if health.progressing and not health.degraded and key not in result.plan.backing_off
    ]
    if moving:
        return Motion(Why.PROGRESSING, f"{plural(len(moving), 'object')} progressing")
    return None


def next_pace(
    result: PassResult | None, previous: Pace | None, *, interval: float, min_interval: float
) -> Pace:
    """The pace after ``result`` (None: a standby's tick)."""
    regular = Pace(interval)
    if result is None or result.outcome is PassOutcome.UNREACHABLE or min_interval >= interval:
        return regular
    if result.applied.throttled():
        return regular  # the apiserver asked us to slow down: no early pass while it does
    moved = motion(result)
    if moved is None:
        return _settling(previous, interval)
    if moved.why is Why.WROTE:
        return Pace(min_interval, moved.why, moved.detail)
    # Capped at the interval, a long wait stays there rather than restarting at
    # min_interval: only a write (above) resets the pace.
    grown = previous.delay * 2 if previous is not None and previous.early else min_interval
    return Pace(min(grown, interval), moved.why, moved.detail)


def _settling(previous: Pace | None, interval: float) -> Pace:
    """The pace once nothing moves: back to the interval by doubling from the
    last early delay, so a change right after a burst is seen in seconds."""
    if previous is None or not previous.early or previous.delay * 2 >= interval:
        return Pace(interval)
    delay = previous.delay * 2
    return Pace(delay, Why.SETTLING, "nothing moved since the last change")
