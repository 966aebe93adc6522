"""`reconciler sync --wait`: passes until the scope converges, for pipelines.

A pipeline that applies Redis objects wants to block until they are served,
as `kubectl rollout status` and `helm --wait` do. The passes come at the
daemon's pace (reconciler.run.pacing), so a wait costs what the daemon would.
The wait ends in one of four ways:

- converged: a pass planned nothing, had no errors, and every object is Ready;
- stuck: nothing is in motion (no write, no conflict, nothing progressing,
  no eviction a disruption budget holds) yet the scope has not converged: a
  Degraded object or a failure that only a person can fix, so waiting
  longer would only delay the bad news;
- timeout: the deadline passed with objects still in motion;
- unreachable: a pass reached nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from reconciler.result import PassOutcome, PassResult, plural
from reconciler.run.pacing import Pace, Schedule, explain, held, motion, next_pace
from reconciler.run.turn import WaitEnd

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WaitResult:
    end: WaitEnd
    last: PassResult  # the final pass: its not-Ready objects are what is pending
    passes: int
    elapsed: float  # seconds from the first pass's start to the last one's end

    def one_line(self) -> str:
        took = f"after {plural(self.passes, 'pass', 'passes')} in {self.elapsed:.1f}s"
        pending = plural(len(self.last.pending), "object")
        if self.end is WaitEnd.CONVERGED:
            return f"converged {took}"
        if self.end is WaitEnd.STUCK:
            return f"not converging {took}: nothing is in motion and {pending} not Ready"
        if self.end is WaitEnd.TIMEOUT:
            return f"timed out {took}: {pending} not Ready"
        return f"stopped {took}: the cluster is unreachable"


def converged(result: PassResult) -> bool:
    return result.outcome is PassOutcome.OK and not result.plan.actions and not result.pending


def end_of(result: PassResult) -> WaitEnd | None:
    """How the wait ends after ``result``, or None to keep waiting."""
    if result.outcome is PassOutcome.UNREACHABLE:
        return WaitEnd.UNREACHABLE
    if converged(result):
        return WaitEnd.CONVERGED
    if motion(result) is None and not held(result):
        return WaitEnd.STUCK
    return None


def wait(
    one_pass: Callable[[], PassResult],
    *,
    timeout: float,
    schedule: Schedule,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> WaitResult:
    """Run passes until the wait ends. The last pass starts by the deadline at the
    latest, so a wait lasts at most ``timeout`` plus one pass."""
    start = clock()
    deadline = start + timeout
    pace: Pace | None = None
    passes = 0
    while True:
        began = clock()
        result = one_pass()
        passes += 1
        ended = end_of(result)
        if ended is None and clock() >= deadline:
            ended = WaitEnd.TIMEOUT
        if ended is not None:
            return WaitResult(ended, result, passes, clock() - start)
        pace = next_pace(result, pace, schedule)
        now = clock()
        delay = max(min(began + pace.delay, deadline) - now, 0.0)
        why = explain(pace, schedule) if pace.early else "the interval"
        log.info("next pass in %gs: %s", round(delay, 1), why)
        # Free this pass's plan and outcomes before the next pass builds its
        # own: at scale they are the larger part of the peak memory.
        del result
        sleep(delay)
