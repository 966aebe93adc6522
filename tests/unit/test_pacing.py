"""reconciler/run/pacing.py: when the daemon's next pass comes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.actions import PatchStatus, Plan
from reconciler.health import READY, Health
from reconciler.model import ObjKey
from reconciler.result import ApplyReport, Outcome, PassResult, Result
from reconciler.run.pacing import Pace, Why, next_pace

INTERVAL, MIN = 30.0, 1.0
KEY = ObjKey("Redis", "ns", "r")
OTHER = ObjKey("Redis", "ns", "other")
WAITING = Health("WaitingForReady", "waiting for 1 of 3 pods to be Ready", progressing=True)
CONFLICT = Health("PodConflict", "pods not owned ...", degraded=True, progressing=True)
DONE = Health(READY, "3/3 replicas ready")
SETTLED = "nothing moved since the last change"


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


def pace(res: PassResult | None, previous: Pace | None = None, **kw: float) -> Pace:
    return next_pace(res, previous, interval=kw.get("interval", INTERVAL), min_interval=MIN)


@pytest.mark.parametrize(
    ("res", "previous", "want"),
    [
        # Quiet, converged: the interval.
        (result(health={KEY: DONE}), None, Pace(INTERVAL)),
        (result(health={KEY: DONE}), Pace(INTERVAL), Pace(INTERVAL)),
        # Quiet right after early passes: on doubling back to the interval.
        (result(health={KEY: DONE}), Pace(1, Why.WROTE), Pace(2, Why.SETTLING, SETTLED)),
        (
            result(health={KEY: DONE}),
            Pace(8, Why.SETTLING, SETTLED),
            Pace(16, Why.SETTLING, SETTLED),
        ),
        (result(health={KEY: DONE}), Pace(16, Why.SETTLING, SETTLED), Pace(INTERVAL)),
        (result(health={KEY: DONE}), Pace(30, Why.PROGRESSING), Pace(INTERVAL)),
        # Throttled (429 past the retries), even beside writes that landed: the interval.
        (result(Result.OK, Result.THROTTLED), Pace(1, Why.WROTE), Pace(INTERVAL)),
        # A standby's tick, or a pass that reached nothing: the interval.
        (None, Pace(1, Why.WROTE), Pace(INTERVAL)),
        (result(unreachable="cannot reach"), Pace(1, Why.WROTE), Pace(INTERVAL)),
        # A write: look again soon, whatever came before.
        (result(Result.OK), Pace(16, Why.PROGRESSING), Pace(MIN, Why.WROTE, "1 write")),
        # Waiting for pods, nothing written: min_interval, then doubled, capped.
        (result(health={KEY: WAITING}), None, Pace(1, Why.PROGRESSING, "1 object progressing")),
        (
            result(health={KEY: WAITING}),
            Pace(1, Why.WROTE),
            Pace(2, Why.PROGRESSING, "1 object progressing"),
        ),
        (
            result(health={KEY: WAITING}),
            Pace(16, Why.PROGRESSING),
            Pace(30, Why.PROGRESSING, "1 object progressing"),
        ),
        (
            result(health={KEY: WAITING}),
            Pace(30, Why.PROGRESSING),
            Pace(30, Why.PROGRESSING, "1 object progressing"),
        ),
        # Degraded (a conflict only a person resolves) or backing off: never
        # early of itself; after a change they settle as a quiet pass does.
        (result(health={KEY: CONFLICT}), None, Pace(INTERVAL)),
        (result(health={KEY: CONFLICT}), Pace(1, Why.WROTE), Pace(2, Why.SETTLING, SETTLED)),
        (result(health={KEY: WAITING}, backing_off=frozenset({KEY})), None, Pace(INTERVAL)),
        # A failed write is not a write: backoff, not a fast loop, handles it.
        (result(Result.FAILED, health={KEY: DONE}), None, Pace(INTERVAL)),
        # 409: someone else wrote; the next pass sees it, at a doubling pace.
        (
            result(Result.CONFLICT),
            Pace(2, Why.CONFLICT),
            Pace(4, Why.CONFLICT, "1 write refused with 409 Conflict"),
        ),
        # Dry-run plans are not writes.
        (result(Result.DRY_RUN, health={KEY: DONE}), None, Pace(INTERVAL)),
    ],
)
def test_next_pace(res: PassResult | None, previous: Pace | None, want: Pace) -> None:
    assert pace(res, previous) == want


def test_min_interval_at_or_above_the_interval_turns_early_passes_off() -> None:
    assert pace(result(Result.OK), interval=1.0) == Pace(1.0)


@given(
    st.lists(
        st.tuples(
            st.booleans(),  # wrote
            st.sampled_from([DONE, WAITING, CONFLICT]),
            st.booleans(),  # backing off
        ),
        min_size=1,
        max_size=30,
    )
)
def test_the_pace_stays_between_min_and_interval_and_only_a_write_resets_it(
    passes: list[tuple[bool, Health, bool]],
) -> None:
    previous: Pace | None = None
    for wrote, health, held in passes:
        res = result(
            *([Result.OK] if wrote else []),
            health={KEY: health, OTHER: DONE},
            backing_off=frozenset({KEY}) if held else frozenset(),
        )
        now = pace(res, previous)
        assert MIN <= now.delay <= INTERVAL
        moving = health.progressing and not health.degraded and not held
        if wrote:
            assert now == Pace(MIN, Why.WROTE, "1 write")
        elif previous is None or not previous.early:
            assert now.delay == (MIN if moving else INTERVAL)  # still: never early of itself
        elif moving:
            assert now.delay == min(previous.delay * 2, INTERVAL)  # no busy loop
        else:  # still after early passes: doubling back to the interval
            grown = previous.delay * 2
            assert now == (
                Pace(INTERVAL) if grown >= INTERVAL else Pace(grown, Why.SETTLING, SETTLED)
            )
        previous = now


def test_after_a_write_a_still_cluster_costs_a_bounded_number_of_early_passes() -> None:
    """A write buys log2(interval / min_interval) passes at most, then the interval."""
    now = pace(result(Result.OK))
    delays = []
    while now.early:
        delays.append(now.delay)
        now = pace(result(health={KEY: DONE}), now)
    assert delays == [1, 2, 4, 8, 16]
    assert now == Pace(INTERVAL)
