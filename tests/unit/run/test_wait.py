"""reconciler/run/wait.py: `sync --wait` runs passes until the wait ends."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from reconciler.actions import PatchStatus, Plan
from reconciler.health import READY, Health
from reconciler.model import ObjKey
from reconciler.result import ApplyReport, Outcome, PassResult, Result
from reconciler.run.pacing import Schedule
from reconciler.run.wait import WaitEnd, WaitResult, end_of, wait

KEY = ObjKey("Redis", "ns", "r")
WAITING = Health("WaitingForReady", "waiting for 1 of 3 pods to be Ready", progressing=True)
CONFLICT = Health("PodConflict", "pods not owned by this Redis hold r-0", degraded=True)
DONE = Health(READY, "3/3 replicas ready")
HELD = Health("RollingUpdate", "eviction of r-0 refused: ...", progressing=True, waiting=True)
PATCH = PatchStatus(KEY, "1", {})
SCHEDULE = Schedule(interval=30, min_interval=1, budget=0.5)


def result(
    *written: Result,
    health: Health = DONE,
    planned: bool | None = None,
    errors: tuple[str, ...] = (),
    backing_off: bool = False,
    unreachable: str | None = None,
    looked: float = 0.0,
) -> PassResult:
    """A pass; it planned what it wrote unless ``planned`` says otherwise."""
    plans = bool(written) if planned is None else planned
    return PassResult(
        "p",
        Plan(
            actions=(PATCH,) if plans else (),
            backing_off=frozenset({KEY}) if backing_off else frozenset(),
        ),
        ApplyReport([Outcome(PATCH, res) for res in written]),
        errors=list(errors),
        unreachable=unreachable,
        health={KEY: health},
        look_wall=looked,
    )


@pytest.mark.parametrize(
    ("res", "want"),
    [
        # Nothing planned, nothing failed, every object Ready.
        (result(), WaitEnd.CONVERGED),
        # Wrote: the next pass must confirm with an empty plan.
        (result(Result.OK), None),
        # Pods not Ready yet: they may become Ready by themselves.
        (result(health=WAITING), None),
        # Its next eviction held by a disruption budget: the disruption
        # controller, or the budget's owner, may let it go.
        (result(health=HELD), None),
        # Someone else wrote first: the next pass sees what they did.
        (result(Result.CONFLICT), None),
        # A foreign pod holds a desired name: only a person can fix it.
        (result(health=CONFLICT), WaitEnd.STUCK),
        # Backing off after failed writes: still, and failing.
        (
            result(health=WAITING, errors=("[ns/r] backing off",), backing_off=True),
            WaitEnd.STUCK,
        ),
        # A LIST failed: the view is partial, nothing written.
        (result(errors=("cannot list pods",)), WaitEnd.STUCK),
        (result(unreachable="cannot reach the cluster"), WaitEnd.UNREACHABLE),
    ],
)
def test_end_of(res: PassResult, want: WaitEnd | None) -> None:
    assert end_of(res) == want


class Clock:
    """Time moves only when the wait sleeps, or a pass takes ``pass_seconds``."""

    def __init__(self, pass_seconds: float = 0.0) -> None:
        self.now = 100.0
        self.slept: list[float] = []
        self.pass_seconds = pass_seconds

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def run(passes: list[PassResult], clock: Clock, timeout: float = 60.0) -> WaitResult:
    it: Iterator[PassResult] = iter(passes)

    def one_pass() -> PassResult:
        clock.now += clock.pass_seconds
        return next(it)

    return wait(
        one_pass,
        timeout=timeout,
        schedule=SCHEDULE,
        clock=clock,
        sleep=clock.sleep,
    )


def test_writes_then_pods_then_an_empty_plan_converge_at_the_daemons_pace() -> None:
    clock = Clock()
    waited = run(
        [
            result(Result.OK, Result.OK, health=WAITING),
            result(health=WAITING),
            result(health=WAITING),
            result(Result.OK),
            result(),
        ],
        clock,
    )
    assert waited.end is WaitEnd.CONVERGED
    assert waited.passes == 5
    # Passes that cost nothing: min_interval after each, while pods start too.
    assert clock.slept == [1, 1, 1, 1]
    assert waited.elapsed == 4
    assert waited.one_line() == "converged after 5 passes in 4.0s"


def test_timeout_lists_what_is_pending_and_never_sleeps_past_the_deadline() -> None:
    clock = Clock(pass_seconds=0.5)
    waited = run([result(health=WAITING)] * 10, clock, timeout=5)
    assert waited.end is WaitEnd.TIMEOUT
    # Passes of 0.5 s that cost nothing to look start a second apart
    # (min_interval, counted from each start); the last starts at the deadline.
    assert clock.slept == [0.5] * 5
    assert waited.passes == 6
    assert waited.last.pending == {KEY: WAITING}
    assert waited.one_line() == "timed out after 6 passes in 5.5s: 1 object not Ready"


def test_a_long_pass_is_followed_once_its_cost_fits_the_budget() -> None:
    """Delays count from a pass's start, and a pass that looked for 3 s is
    followed, at a budget of a half, 6 s after it started: 3 s after it ended."""
    clock = Clock(pass_seconds=3)
    passes = [result(Result.OK, health=WAITING, looked=3), result(health=WAITING, looked=3)]
    waited = run([*passes, result(health=WAITING, looked=3), result()], clock)
    assert waited.end is WaitEnd.CONVERGED
    assert clock.slept == [3, 3, 3]
    assert waited.elapsed == 21


def test_a_still_but_unconverged_scope_ends_at_once() -> None:
    clock = Clock()
    waited = run([result(Result.OK, health=WAITING), result(health=CONFLICT)], clock)
    assert waited.end is WaitEnd.STUCK
    assert clock.slept == [1]
    assert waited.one_line() == (
        "not converging after 2 passes in 1.0s: nothing is in motion and 1 object not Ready"
    )


def test_min_interval_at_the_interval_still_waits_for_motion() -> None:
    """With min_interval >= interval the daemon never comes early; a wait
    still goes on while things move, at the interval."""
    clock = Clock()
    passes = [result(Result.OK, health=WAITING), result(health=WAITING), result()]
    waited = wait(
        iter(passes).__next__,
        timeout=300,
        schedule=Schedule(interval=5, min_interval=5, budget=0.5),
        clock=clock,
        sleep=clock.sleep,
    )
    assert waited.end is WaitEnd.CONVERGED
    assert clock.slept == [5, 5]


def test_a_pass_runs_without_the_result_of_the_pass_before() -> None:
    """A converging pass at scale holds thousands of actions; keeping the last
    one alive through the next pass would double the peak memory."""
    results: list[PassResult] = []
    alive_during: list[bool] = []

    def one_pass() -> PassResult:
        if results:
            previous = weakref.ref(results.pop())
            gc.collect()
            alive_during.append(previous() is not None)
        res = result(Result.OK) if len(alive_during) < 2 else result()
        results.append(res)
        return res

    clock = Clock()
    waited = wait(one_pass, timeout=60, schedule=SCHEDULE, clock=clock, sleep=clock.sleep)
    assert waited.end is WaitEnd.CONVERGED and waited.passes == 3
    assert alive_during == [False, False]
