"""reconciler/run/pacing.py: when the daemon's next pass comes."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.actions import PatchStatus, Plan
from reconciler.config import Config
from reconciler.health import READY, Health
from reconciler.model import ObjKey
from reconciler.result import ApplyReport, Outcome, PassResult, Result
from reconciler.run.pacing import (
    PATIENCE,
    RECENT,
    Pace,
    Schedule,
    Why,
    earliest,
    explain,
    next_pace,
)

INTERVAL, MIN, BUDGET = 30.0, 1.0, 0.5
SCHEDULE = Schedule(INTERVAL, MIN, BUDGET)
KEY = ObjKey("Redis", "ns", "r")
OTHER = ObjKey("Redis", "ns", "other")
WAITING = Health("WaitingForReady", "waiting for 1 of 3 pods to be Ready", progressing=True)
CONFLICT = Health("PodConflict", "pods not owned ...", degraded=True, progressing=True)
DONE = Health(READY, "3/3 replicas ready")
HELD = Health(
    "RollingUpdate", "eviction of r-0 refused: budget r allows ...", progressing=True, waiting=True
)
SETTLED = "nothing moved since the last change"


@dataclass(frozen=True)
class Cost:
    """What a pass's looking took: wall and client CPU seconds."""

    wall: float
    cpu: float

    @property
    def seconds(self) -> float:
        return max(self.wall, self.cpu)


CHEAP = Cost(0.02, 0.01)  # a pass at 200 Redis
DEAR = Cost(1.5, 1.2)  # a pass at 10,000 Redis


def result(
    *written: Result,
    health: dict[ObjKey, Health] | None = None,
    backing_off: frozenset[ObjKey] = frozenset(),
    unreachable: str | None = None,
) -> PassResult:
    outcomes = [Outcome(PatchStatus(KEY, "1", {}), res) for res in written]
    return PassResult(
        "p",
        Plan(backing_off=backing_off),
        ApplyReport(outcomes),
        unreachable=unreachable,
        health=health or {},
    )


def pace(
    res: PassResult | None,
    previous: Pace | None = None,
    cost: Cost | None = CHEAP,
    schedule: Schedule = SCHEDULE,
) -> Pace:
    if res is not None and cost is not None:
        res = replace(res, look_wall=cost.wall, look_cpu=cost.cpu)
    return next_pace(res, previous, schedule)


C = (CHEAP.seconds,)
WROTE = Pace(MIN, Why.WROTE, "1 write", C)
MOVING = "1 object progressing"


@pytest.mark.parametrize(
    ("res", "previous", "want"),
    [
        # Quiet, converged: the interval.
        (result(health={KEY: DONE}), None, Pace(INTERVAL, costs=C)),
        (result(health={KEY: DONE}), Pace(INTERVAL), Pace(INTERVAL, costs=C)),
        # Quiet right after early passes: on doubling back to the interval.
        (result(health={KEY: DONE}), WROTE, Pace(2, Why.SETTLING, SETTLED, C * 2)),
        (result(health={KEY: DONE}), Pace(8, Why.SETTLING), Pace(16, Why.SETTLING, SETTLED, C)),
        (result(health={KEY: DONE}), Pace(16, Why.SETTLING), Pace(INTERVAL, costs=C)),
        (result(health={KEY: DONE}), Pace(30, Why.PROGRESSING), Pace(INTERVAL, costs=C)),
        # Throttled (429 past the retries), even beside writes that landed: the interval.
        (result(Result.OK, Result.THROTTLED), WROTE, Pace(INTERVAL, costs=C * 2)),
        # A pass that reached nothing: the interval.
        (result(unreachable="cannot reach"), WROTE, Pace(INTERVAL, costs=C * 2)),
        # A write: look again soon, whatever came before.
        (result(Result.OK), Pace(16, Why.PROGRESSING), WROTE),
        # Waiting for pods, nothing written: as soon as the budget allows
        # while the wait is short, then after a quarter of the time waited
        # since the last write, never later than the interval.
        (result(health={KEY: WAITING}), None, Pace(MIN, Why.PROGRESSING, MOVING, C)),
        (
            result(health={KEY: WAITING}),
            WROTE,
            Pace(MIN, Why.PROGRESSING, MOVING, C * 2, waited=MIN),
        ),
        (
            result(health={KEY: WAITING}),
            Pace(2, Why.PROGRESSING, waited=2),
            Pace(MIN, Why.PROGRESSING, MOVING, C, waited=4),
        ),
        (
            result(health={KEY: WAITING}),
            Pace(6, Why.PROGRESSING, waited=14),
            Pace(5, Why.PROGRESSING, f"{MOVING}, nothing new for 20s", C, waited=20),
        ),
        (
            result(health={KEY: WAITING}),
            Pace(30, Why.PROGRESSING, waited=100),
            Pace(INTERVAL, Why.PROGRESSING, f"{MOVING}, nothing new for 130s", C, waited=130),
        ),
        # A wait counts from the last write; settling is not waiting.
        (
            result(health={KEY: WAITING}),
            Pace(16, Why.SETTLING),
            Pace(MIN, Why.PROGRESSING, MOVING, C),
        ),
        (result(Result.OK), Pace(16, Why.PROGRESSING, waited=40), WROTE),
        # Degraded (a conflict only a person resolves) or backing off: never
        # early of itself; after a change they settle as a quiet pass does.
        (result(health={KEY: CONFLICT}), None, Pace(INTERVAL, costs=C)),
        (result(health={KEY: CONFLICT}), WROTE, Pace(2, Why.SETTLING, SETTLED, C * 2)),
        (
            result(health={KEY: WAITING}, backing_off=frozenset({KEY})),
            None,
            Pace(INTERVAL, costs=C),
        ),
        # Its next eviction refused by a budget (theirs may hold it for
        # hours): never early of itself, settling after a change; another
        # object that moves still brings the pass forward.
        (result(health={KEY: HELD}), None, Pace(INTERVAL, costs=C)),
        (result(health={KEY: HELD}), WROTE, Pace(2, Why.SETTLING, SETTLED, C * 2)),
        (
            result(health={KEY: HELD, OTHER: WAITING}),
            None,
            Pace(MIN, Why.PROGRESSING, MOVING, C),
        ),
        # A failed write is not a write: backoff, not a fast loop, handles it.
        (result(Result.FAILED, health={KEY: DONE}), None, Pace(INTERVAL, costs=C)),
        # 409: someone else wrote; the next pass sees it, soon.
        (
            result(Result.CONFLICT),
            Pace(2, Why.CONFLICT),
            Pace(MIN, Why.CONFLICT, "1 write refused with 409 Conflict", C),
        ),
        # Dry-run plans are not writes.
        (result(Result.DRY_RUN, health={KEY: DONE}), None, Pace(INTERVAL, costs=C)),
    ],
)
def test_next_pace(res: PassResult | None, previous: Pace | None, want: Pace) -> None:
    assert pace(res, previous) == want


def test_a_standby_tick_keeps_the_costs_and_goes_to_the_interval() -> None:
    assert pace(None, WROTE, None) == Pace(INTERVAL, costs=C)


@pytest.mark.parametrize(
    ("costs", "want", "budgeted"),
    [
        # A cheap pass: min_interval.
        ((CHEAP,), MIN, False),
        # A pass of 1.5 s at a budget of a half: 3 s after it started.
        ((DEAR,), 3.0, True),
        # Client CPU above the wall (threads writing in parallel) counts.
        ((Cost(0.8, 1.0),), 2.0, True),
        # A cheap pass right after dear ones: the recent mean holds it back.
        ((DEAR, DEAR, CHEAP), (1.5 + 1.5 + 0.02) / 3 / BUDGET, True),
        # Only the last RECENT passes count.
        ((DEAR, CHEAP, CHEAP, CHEAP), MIN, False),
    ],
)
def test_a_moving_cluster_is_polled_as_often_as_the_budget_allows(
    costs: tuple[Cost, ...], want: float, budgeted: bool
) -> None:
    now: Pace | None = None
    for cost in costs:
        now = pace(result(Result.OK), now, cost)
    assert now is not None
    assert now.delay == pytest.approx(want)
    assert now.why is Why.WROTE
    assert now.budgeted is budgeted


def test_a_pass_too_dear_for_an_early_pass_is_followed_at_the_interval() -> None:
    assert pace(result(Result.OK), cost=Cost(20.0, 5.0)) == Pace(INTERVAL, costs=(20.0,))


def test_min_interval_at_or_above_the_interval_turns_early_passes_off() -> None:
    assert pace(result(Result.OK), schedule=Schedule(1.0, MIN, BUDGET)) == Pace(1.0, costs=C)


def test_the_log_says_when_the_budget_holds_a_pass_back() -> None:
    held = pace(result(health={KEY: WAITING}), cost=DEAR)
    assert explain(held, SCHEDULE) == (
        "progressing (1 object progressing); paced by the budget: a pass looks for 1.50s,"
        " 50% of the time"
    )
    assert explain(WROTE, SCHEDULE) == "wrote (1 write)"


def test_a_settling_pass_held_back_by_the_budget_says_so() -> None:
    """After a write, a quiet pass doubles the last early delay unless the
    recent costs ask for more; the log then names the budget, not the doubling."""
    dear = pace(result(health={KEY: DONE}), pace(result(Result.OK)), DEAR)
    assert (dear.delay, dear.why, dear.budgeted) == (
        pytest.approx(1.5 / BUDGET),
        Why.SETTLING,
        True,
    )
    assert explain(dear, SCHEDULE) == (
        f"settling ({SETTLED}); paced by the budget: a pass looks for 1.50s, 50% of the time"
    )
    cheap = pace(result(health={KEY: DONE}), WROTE)
    assert (cheap.delay, cheap.budgeted) == (2 * MIN, False)
    assert explain(cheap, SCHEDULE) == f"settling ({SETTLED})"


def test_the_schedule_comes_from_the_config() -> None:
    config = Config(interval=60, min_interval=2, pace_budget=0.25)
    assert Schedule.of(config) == Schedule(60, 2, 0.25)


costs = st.builds(
    Cost,
    st.floats(0, 40, allow_nan=False),
    st.floats(0, 40, allow_nan=False),
)
schedules = st.builds(
    Schedule,
    st.sampled_from([5.0, 30.0, 300.0]),
    st.sampled_from([0.25, 1.0, 2.0]),
    st.sampled_from([0.1, 0.5, 1.0]),
)
passes = st.lists(
    st.tuples(
        st.booleans(),  # wrote
        st.sampled_from([DONE, WAITING, CONFLICT]),
        st.booleans(),  # backing off
        costs,
    ),
    min_size=1,
    max_size=30,
)


Replayed = tuple[tuple[bool, Health, bool, Cost], Pace | None, Pace]


def replayed(passes: list[tuple[bool, Health, bool, Cost]], schedule: Schedule) -> list[Replayed]:
    """Each generated pass (wrote, health, backing off, cost) with the pace
    before it and the pace after it, in order."""
    out: list[Replayed] = []
    previous: Pace | None = None
    for wrote, health, held, cost in passes:
        res = result(
            *([Result.OK] if wrote else []),
            health={KEY: health, OTHER: DONE},
            backing_off=frozenset({KEY}) if held else frozenset(),
        )
        now = pace(res, previous, cost, schedule)
        out.append(((wrote, health, held, cost), previous, now))
        previous = now
    return out


@given(passes, schedules)
def test_the_pace_keeps_its_budget_and_its_bounds(
    passes: list[tuple[bool, Health, bool, Cost]], schedule: Schedule
) -> None:
    """Every early pass follows the one before no sooner than min_interval and
    than that pass's cost over the budget; nothing is later than the interval;
    a still cluster is never polled early of itself."""
    for (wrote, health, held, cost), previous, now in replayed(passes, schedule):
        assert now.delay <= schedule.interval
        assert len(now.costs) <= RECENT
        if now.early:
            assert now.delay >= schedule.min_interval
            assert cost.seconds <= now.delay * schedule.budget + 1e-9
        moving = wrote or (health.progressing and not health.degraded and not held)
        if not moving and (previous is None or not previous.early):
            assert now == Pace(schedule.interval, costs=now.costs)


@given(costs, schedules)
def test_a_cluster_gone_still_is_back_at_the_interval_within_a_bounded_number_of_passes(
    cost: Cost, schedule: Schedule
) -> None:
    """A write buys log2(interval / min_interval) passes at most, then the interval."""
    now = pace(result(Result.OK), cost=cost, schedule=schedule)
    early = 0
    while now.early:
        early += 1
        now = pace(result(health={KEY: DONE}), now, cost, schedule)
    assert now.delay == schedule.interval
    assert early <= 1 + math.ceil(math.log2(schedule.interval / schedule.min_interval))


def test_after_a_write_a_still_cluster_doubles_back_to_the_interval() -> None:
    now = pace(result(Result.OK))
    delays = []
    while now.early:
        delays.append(now.delay)
        now = pace(result(health={KEY: DONE}), now)
    assert delays == [1, 2, 4, 8, 16]
    assert now.delay == INTERVAL


def test_earliest_with_no_cost_known_is_min_interval() -> None:
    assert earliest((), SCHEDULE) == MIN


def test_a_long_wait_for_pods_is_looked_at_as_often_as_a_share_of_it() -> None:
    """After a write, objects progress and passes find nothing new for a
    minute: min_interval while the wait is short, then a quarter of the time
    waited, so a minute costs under twenty passes, not sixty, and a pod
    Ready at any time in it is seen no later than a quarter of the wait
    after."""
    now = pace(result(Result.OK))
    starts = [0.0]
    while starts[-1] < 60:
        starts.append(starts[-1] + now.delay)
        now = pace(result(health={KEY: WAITING}), now)
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert gaps[:4] == [MIN] * 4
    assert all(
        gap <= max(MIN, PATIENCE * start) for start, gap in zip(starts[1:-1], gaps[1:], strict=True)
    )
    assert gaps[-1] > 10 * MIN
    assert len(gaps) < 20
    again = pace(result(Result.OK), now)
    assert again.delay == MIN and again.waited == 0


@given(passes, schedules)
def test_a_pass_without_writes_waits_no_longer_than_a_share_of_the_wait(
    passes: list[tuple[bool, Health, bool, Cost]], schedule: Schedule
) -> None:
    """However the passes went, an early pass after one that found nothing
    new comes by the budget's delay or PATIENCE of the time waited since the
    last write, whichever is later; the wait it counts is never longer than
    the time since that write, or since the first pass if none wrote (the
    delays replayed since)."""
    since = 0.0
    for (wrote, *_), previous, now in replayed(passes, schedule):
        since = 0.0 if wrote else since + (previous.delay if previous is not None else 0.0)
        if now.early and now.why is Why.PROGRESSING:
            soonest = earliest(now.costs, schedule)
            assert now.delay <= max(soonest, PATIENCE * now.waited) + 1e-9
            assert now.waited <= since + 1e-9
