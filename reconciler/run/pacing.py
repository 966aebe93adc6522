"""When the daemon's next pass comes: early while objects move, at the
interval once the cluster is quiet, and never more often than a pass's cost
allows.

Polling pays for reaction time with the interval. A pass that wrote, or that
left objects progressing (pods not yet Ready, a rolling update, a deletion
waiting for its pods), is followed as soon as the polling stays within its
budget: the share of the time the daemon may spend looking (``budget``).
Looking is what polling adds to the work: observing and planning, in wall
time (the apiserver's LISTs are inside it) or client CPU, whichever is
larger; the recent passes' mean stands in for the next one's. Writes are not
counted: they are the work itself, which a watch-based controller does too,
and what they set in motion is worth seeing soon. So a pass that looked for
20 ms is followed ``min_interval`` after it started, and one that looked for
1.5 s, at a budget of a half, 3 s after it started: the reaction is as quick
as the machine and the apiserver can afford, at any size, and a pod that
turns Ready just after a pass that wrote waits one such delay.
Delays count from the start of a pass, as the interval does.

While objects progress but a pass finds nothing new to do (no write: the
kubelet, the scheduler or the disruption controller has not moved since),
the delay grows with the wait: the next pass comes after ``PATIENCE`` (a
quarter) of the time waited since the last pass that wrote, if that is
later than the budget's delay. A change after a wait of 40 s is thus seen
at most 10 s late, and a wait costs passes in the logarithm of its length,
not in proportion: a rollout of 1,000 Redis, whose waves each wait tens of
seconds for terminating pods to go, took 34 passes instead of 60
(docs/performance/pace.md); a half was measured too and lost, its late
looks delaying every wave. Any write, or a 409, returns to the budget's
delay.

Once the picture is still, the delay doubles from where it was until it
reaches the interval: changes come in bursts (a rollout, a drain, a person
at kubectl), and a pass that finds nothing costs little. So a write buys at
most log2(interval / min_interval) passes more, never a loop. Objects in
backoff and Degraded objects (an invalid spec, a pod conflict that only a
person can resolve) never make a pass early, so a stuck object costs no more
than a quiet one; nor do objects whose eviction a budget refused and is
asked again (a budget of another's may hold it for hours; one our own
budget holds is not asked, and counts as progress: the disruption
controller is about to count a pod), nor a pass the apiserver throttled
(429), which is followed at the interval while the throttling lasts. Pure:
the caller hands in the pass and the previous pace.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from reconciler.config import Config
from reconciler.health import Health
from reconciler.model import ObjKey
from reconciler.result import PassOutcome, PassResult, Result, plural

# How many recent passes' costs stand in for the next pass's.
RECENT = 3

# While objects progress and passes find nothing new, the share of the time
# waited so far after which the next pass looks again.
PATIENCE = 0.25

# The log's detail for a settling pass.
SETTLED = "nothing moved since the last change"


class Why(StrEnum):
    """Why a pass comes before the interval; the metric's label values."""

    WROTE = "wrote"  # this pass changed the cluster: look at the result soon
    CONFLICT = "conflict"  # someone else wrote first: the next pass sees what they did
    PROGRESSING = "progressing"  # waiting for pods, a rolling update or a deletion
    SETTLING = "settling"  # still now, but it moved lately: look again, less often each time


@dataclass(frozen=True)
class Schedule:
    """The pace's settings, from the config (reconciler/config.py)."""

    interval: float  # the regular pace, when nothing moves
    min_interval: float  # the earliest a pass follows the start of the one before
    budget: float  # the share of the time passes may spend looking while objects move (0, 1]

    @classmethod
    def of(cls, config: Config) -> Schedule:
        return cls(config.interval, config.min_interval, config.pace_budget)


@dataclass(frozen=True)
class Pace:
    delay: float  # seconds from the start of this pass to the start of the next
    why: Why | None = None  # None: the regular interval
    detail: str = ""  # for the log: what moved
    costs: tuple[float, ...] = ()  # the recent passes' costs of looking, newest last
    budgeted: bool = False  # the budget, not min_interval, set this early delay
    waited: float = 0.0  # seconds since the last pass that wrote, while objects progress

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
    moving = [key for key, health in _progressing(result) if not health.waiting]
    if moving:
        return Motion(Why.PROGRESSING, f"{plural(len(moving), 'object')} progressing")
    return None


def held(result: PassResult) -> int:
    """Objects whose next step waits on a disruption budget: still in motion
    (the disruption controller, or the budget's owner, will move them), but
    no pass of ours hurries them, so they bring none forward."""
    return sum(1 for _, health in _progressing(result) if health.waiting)


def _progressing(result: PassResult) -> list[tuple[ObjKey, Health]]:
    """Objects that may still change: progressing, and neither Degraded nor
    backing off (a person, or time, has to act on those first)."""
    return [
        (key, health)
        for key, health in result.health.items()
        if health.progressing and not health.degraded and key not in result.plan.backing_off
    ]


def earliest(costs: tuple[float, ...], schedule: Schedule) -> float:
    """The earliest delay the budget allows after the newest of ``costs``:
    that pass's cost, or the recent mean if larger, over the budget, and
    never below min_interval. Each pass is thereby followed no sooner than
    its own cost over the budget: the share of time spent looking stays
    within the budget, pass by pass."""
    if not costs:
        return schedule.min_interval
    basis = max(costs[-1], sum(costs) / len(costs))
    return max(schedule.min_interval, basis / schedule.budget)


def cost(result: PassResult) -> float:
    """What looking cost this pass: wall or client CPU, whichever is larger."""
    return max(result.look_wall, result.look_cpu)


def next_pace(result: PassResult | None, previous: Pace | None, schedule: Schedule) -> Pace:
    """The pace after ``result`` (None: a standby's tick)."""
    costs = _recent(previous, result)
    regular = Pace(schedule.interval, costs=costs)
    if result is None or result.outcome is PassOutcome.UNREACHABLE:
        return regular
    if schedule.min_interval >= schedule.interval or result.applied.throttled():
        return regular  # early passes off, or the apiserver asked us to slow down
    soonest = earliest(costs, schedule)
    if soonest >= schedule.interval:
        return regular
    moved = motion(result)
    if moved is None:
        return _settling(previous, soonest, regular)
    waited = _waited(previous) if moved.why is Why.PROGRESSING else 0.0
    patient = min(PATIENCE * waited, schedule.interval)
    if patient > soonest:  # nothing new for a while: look after a share of the wait
        detail = f"{moved.detail}, nothing new for {waited:.0f}s"
        return Pace(patient, moved.why, detail, costs, waited=waited)
    budgeted = soonest > schedule.min_interval
    return Pace(soonest, moved.why, moved.detail, costs, budgeted, waited)


def _waited(previous: Pace | None) -> float:
    """Objects progress and this pass had nothing to write: the seconds
    from the last pass that wrote (or met a 409) to this one, counted in the
    delays planned since; 0 when the early passes start with this one."""
    if previous is None:
        return 0.0
    if previous.why in (Why.WROTE, Why.CONFLICT):
        return previous.delay
    if previous.why is Why.PROGRESSING:
        return previous.waited + previous.delay
    return 0.0


def _recent(previous: Pace | None, result: PassResult | None) -> tuple[float, ...]:
    before = previous.costs if previous is not None else ()
    return before if result is None else (*before, cost(result))[-RECENT:]


def _settling(previous: Pace | None, soonest: float, regular: Pace) -> Pace:
    """The pace once nothing moves: back to the interval by doubling from the
    last early delay, so a change right after a burst is seen in seconds."""
    if previous is None or not previous.early:
        return regular
    doubled = previous.delay * 2
    delay = max(doubled, soonest)
    if delay >= regular.delay:
        return regular
    budgeted = soonest > doubled
    return Pace(delay, Why.SETTLING, SETTLED, regular.costs, budgeted)


def explain(pace: Pace, schedule: Schedule) -> str:
    """For the log: why the next pass comes when it does."""
    said = f"{pace.why} ({pace.detail})"
    if not pace.budgeted or not pace.costs:
        return said
    share = f"{schedule.budget:.0%}"
    looked = pace.costs[-1]
    return f"{said}; paced by the budget: a pass looks for {looked:.2f}s, {share} of the time"
