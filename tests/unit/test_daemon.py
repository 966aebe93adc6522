"""reconciler/daemon.py: what one tick leaves for the pace of the next."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from reconciler.actions import PatchStatus, Plan
from reconciler.daemon import Daemon
from reconciler.model import ObjKey
from reconciler.pacing import Pace, Why
from reconciler.result import ApplyReport, Outcome, PassResult, Result

KEY = ObjKey("Redis", "ns", "r")


def crash() -> PassResult:
    raise RuntimeError("a bug in the pass")


def daemon(**kw: Any) -> Daemon:
    d = Daemon(crash, interval=30, jitter=0, min_interval=1, **kw)
    d.pace = Pace(8, Why.SETTLING, "nothing moved since the last change")
    return d


def test_a_crashed_pass_forgets_the_pace_it_was_settling_at() -> None:
    d = daemon()
    d.tick()
    assert d.pace is None


def test_a_standby_tick_forgets_the_pace_so_a_new_leader_starts_at_the_interval() -> None:
    d = daemon(elector=SimpleNamespace(is_leader=False))
    d.tick()
    assert d.pace is None
    assert d.passes == 0


class FakeScheduler:
    def __init__(self) -> None:
        self.next_runs: list[datetime] = []

    def modify_job(self, job_id: str, *, next_run_time: datetime) -> None:
        self.next_runs.append(next_run_time)


def wrote() -> PassResult:
    return PassResult("p", Plan(), ApplyReport([Outcome(PatchStatus(KEY, "1", {}), Result.OK)]))


@pytest.mark.parametrize(
    ("pass_seconds", "next_after"),
    [
        (0.2, 1.0),  # min_interval after the pass's start
        (3.0, 3.0),  # longer than min_interval: at once, when it ends
    ],
)
def test_the_pass_after_a_write_starts_min_interval_after_its_start(
    pass_seconds: float, next_after: float
) -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    now = [start]

    def one_pass() -> PassResult:
        now[0] += timedelta(seconds=pass_seconds)
        return wrote()

    d = Daemon(one_pass, interval=30, jitter=0, min_interval=1, clock=lambda: now[0])
    scheduler = FakeScheduler()
    d.scheduler = scheduler  # type: ignore[assignment]
    d.tick()
    assert scheduler.next_runs == [start + timedelta(seconds=next_after)]


def test_the_daemon_loads_prometheus_client_only_to_serve_metrics() -> None:
    """About 2 MB of resident memory that a daemon without --metrics-address never uses."""
    code = (
        "import sys, reconciler.cli, reconciler.daemon, reconciler.leader;"
        "print('prometheus_client' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
