"""reconciler/run/daemon.py: what one tick leaves for the pace of the next."""

from __future__ import annotations

import logging
import signal
import threading
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from apscheduler.events import EVENT_JOB_EXECUTED

from reconciler.actions import PatchStatus, Plan
from reconciler.model import ObjKey
from reconciler.result import ApplyReport, Outcome, PassResult, Result
from reconciler.run.daemon import Daemon, Loop
from reconciler.run.pacing import Pace, Schedule, Why
from reconciler.run.turn import Unreached
from tests.unit.imports import loaded_after

KEY = ObjKey("Redis", "ns", "r")
SCHEDULE = Schedule(interval=30, min_interval=1, budget=0.5)


def crash() -> PassResult:
    raise RuntimeError("a bug in the pass")


def daemon(**kw: Any) -> Loop:
    d = Loop(crash, schedule=SCHEDULE, jitter=0, **kw)
    d.pace = Pace(8, Why.SETTLING, "nothing moved since the last change")
    return d


def test_a_crashed_pass_forgets_the_pace_it_was_settling_at() -> None:
    d = daemon()
    d.tick()
    assert d.pace is None


def elector(leader: bool, trouble: list[str], first_round: Any = lambda: None) -> SimpleNamespace:
    """What the loop asks of a LeaderElector."""
    return SimpleNamespace(
        is_leader=leader,
        on_change=None,
        try_acquire_or_renew=first_round,
        run=lambda stop: None,
        release=lambda: None,
        config=SimpleNamespace(retry_period=0.1),
        sighting=SimpleNamespace(trouble=lambda: trouble[0] if trouble else None),
    )


def standby(trouble: list[str]) -> dict[str, Any]:
    """A loop's standby: not the leader, as its pass's fence says."""
    return {"elector": elector(False, trouble), "standby": lambda: "not the leader"}


def test_a_standby_tick_forgets_the_pace_so_a_new_leader_starts_at_the_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="reconciler.run.turn")
    d = daemon(**standby([]))
    d.tick()
    assert d.pace is None
    assert d.passes == 0
    assert "not the leader; skipping this pass" in caplog.messages


def test_a_replica_blind_to_its_lease_says_so_once_and_when_it_sees_again(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.INFO)
    sent: list[str] = []
    monkeypatch.setattr("reconciler.run.sdnotify.notify", sent.append)
    trouble: list[str] = []
    d = daemon(**standby(trouble))
    d.tick()
    trouble.append("lease ns/reconciler neither held nor seen for 7s: 404 NotFound")
    d.tick()
    d.tick()
    assert f"STATUS=not ready: {trouble[0]}" in sent
    trouble.clear()
    d.tick()
    said = [r.getMessage() for r in caplog.records if "ready" in r.getMessage()]
    assert said == [
        "not ready: lease ns/reconciler neither held nor seen for 7s: 404 NotFound",
        "ready again: the Lease is held or seen",
    ]


def wrote() -> PassResult:
    return PassResult("p", Plan(), ApplyReport([Outcome(PatchStatus(KEY, "1", {}), Result.OK)]))


def quiet() -> PassResult:
    return PassResult("p", Plan(), ApplyReport())


def run_beside(d: Daemon, helper: threading.Thread, done: Any) -> None:
    """Run the daemon on its real scheduler with ``helper`` started beside
    it, then ``done``; the daemon's signal handlers are undone after."""
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    helper.start()
    try:
        d.run()
    finally:
        done()
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


def run_until_second_pass(pass_seconds: float, budget: float) -> float:
    """Run the daemon on its real scheduler; seconds from the end of a first
    pass that wrote (and spent ``pass_seconds`` looking) to the start of the second."""
    times: list[float] = []

    def one_pass() -> PassResult:
        times.append(time.monotonic())
        if len(times) == 1:
            time.sleep(pass_seconds)
            times.append(time.monotonic())
            return replace(wrote(), look_wall=pass_seconds)
        d.stopping.set()
        d.scheduler.shutdown(wait=False)
        return quiet()

    d = Daemon([Loop(one_pass, schedule=Schedule(30, 0.5, budget), jitter=0)])
    guard = threading.Timer(10, lambda: d.scheduler.shutdown(wait=False))
    run_beside(d, guard, guard.cancel)
    assert len(times) == 3, "no second pass within 10 s"
    return times[2] - times[1]


@pytest.mark.parametrize(
    ("pass_seconds", "budget", "least", "most"),
    [
        (0.1, 0.5, 0.3, 5.0),  # min_interval (0.5 s) after the pass's start, not at once
        (1.0, 1.0, 0.0, 0.9),  # budget 1: a pass longer than min_interval is followed at once
        (1.0, 0.5, 0.8, 5.0),  # budget 1/2: 2 s after its start, 1 s after its end
    ],
)
def test_the_pass_after_a_write_starts_when_min_interval_and_the_budget_allow(
    pass_seconds: float, budget: float, least: float, most: float
) -> None:
    gap = run_until_second_pass(pass_seconds, budget)
    assert least <= gap <= most


def test_an_early_pass_is_handed_to_the_scheduler_only_once_the_job_has_ended() -> None:
    """APScheduler skips a job that is due while it still runs (max_instances
    1): a time already past, set from inside a long pass, meant the next pass
    came a whole interval later."""
    calls: list[tuple[datetime, bool]] = []
    loop = Loop(wrote, schedule=SCHEDULE, jitter=0)
    d = Daemon([loop])
    d.scheduler = SimpleNamespace(  # type: ignore[assignment]
        modify_job=lambda _id, next_run_time: calls.append((next_run_time, loop.pass_lock.locked()))
    )
    loop.tick()
    assert calls == []
    d._listener(SimpleNamespace(code=EVENT_JOB_EXECUTED, job_id=loop.job_id))
    ((_, during_pass),) = calls
    assert not during_pass


def test_the_daemon_loads_prometheus_client_only_to_serve_metrics() -> None:
    """About 2 MB of resident memory that a daemon without --metrics-address never uses."""
    modules = "reconciler.cli, reconciler.run.daemon, reconciler.run.leader"
    assert loaded_after(modules, {"prometheus_client"}) == []


def test_a_loops_lease_thread_logs_under_its_cluster() -> None:
    """threading.Thread starts with an empty context: the renewer must be
    handed the loop's, or its lines ("lost the lease") name no cluster."""
    from reconciler import log_cluster

    seen: list[str] = []
    elector = SimpleNamespace(
        is_leader=True,
        on_change=None,
        try_acquire_or_renew=lambda: None,
        run=lambda stop: seen.append(log_cluster.CLUSTER.get()),
        sighting=SimpleNamespace(trouble=lambda: None),
    )
    loop = Loop(quiet, schedule=SCHEDULE, jitter=0, name="prod", elector=elector)
    renewer = log_cluster.in_cluster("prod", loop.start_leases)
    assert renewer is not None
    renewer.join(timeout=5)
    assert seen == ["prod"]


def test_a_cluster_whose_first_lease_round_hangs_delays_no_other_clusters_first_pass() -> None:
    """The first Lease round runs in its loop's first tick: before, every
    loop's round ran before any pass, so one cluster's hung apiserver held
    back the first pass of all."""
    release = threading.Event()
    passed = threading.Event()

    def one_pass() -> PassResult:
        passed.set()
        return quiet()

    hung = elector(True, [], first_round=lambda: release.wait(10))
    loops = [
        Loop(quiet, schedule=SCHEDULE, jitter=0, name="hung", elector=hung),
        Loop(one_pass, schedule=SCHEDULE, jitter=0, name="fine"),
    ]
    d = Daemon(loops, parallel=2)
    saw: list[bool] = []

    def watch() -> None:
        saw.append(passed.wait(5))
        release.set()
        deadline = time.monotonic() + 15
        while not d.scheduler.running and time.monotonic() < deadline:
            time.sleep(0.05)
        d._stop(signal.SIGTERM, None)

    watcher = threading.Thread(target=watch)
    run_beside(d, watcher, watcher.join)
    assert saw == [True]


def test_a_pass_longer_than_the_interval_is_said_once_per_skipped_tick_not_twice(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """APScheduler warns of each skipped tick in its words, and the daemon in
    its own: a long first pass logged two warnings every interval."""
    passes: list[float] = []

    def one_pass() -> PassResult:
        passes.append(time.monotonic())
        if len(passes) == 1:
            time.sleep(1.5)
            return quiet()
        d.stopping.set()
        d.scheduler.shutdown(wait=False)
        return quiet()

    d = Daemon([Loop(one_pass, schedule=Schedule(0.4, 0.4, 0.5), jitter=0)])
    guard = threading.Timer(10, lambda: d.scheduler.shutdown(wait=False))
    with caplog.at_level(logging.INFO):
        run_beside(d, guard, guard.cancel)
    said = [r.getMessage() for r in caplog.records]
    assert any("the previous pass is still running" in m for m in said)
    assert not any("maximum number of running instances" in m for m in said)


# ---------------------------------------------- passes that cannot use the cluster

REFUSED = "unauthorized: the cluster does not accept these credentials (401 Unauthorized: x)"
DOWN = "cannot reach the cluster: https://10.0.0.1:6443: connection refused"
T0 = datetime(2026, 12, 1, 19, 10, 2, tzinfo=UTC)


def unused(why: str = REFUSED) -> PassResult:
    return PassResult("p", Plan(), ApplyReport(), unreachable=why)


class Clock:
    """A second further at each reading."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


def refused_loop(results: list[PassResult], **kw: Any) -> Loop:
    """A loop whose passes are ``results``, in order."""
    return Loop(lambda: results.pop(0), schedule=SCHEDULE, jitter=0, clock=Clock(), **kw)


def test_status_says_why_after_unready_after_passes_and_a_reached_pass_clears_it(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.INFO)
    sent: list[str] = []
    monkeypatch.setattr("reconciler.run.sdnotify.notify", sent.append)
    loop = refused_loop([unused(), unused(), unused(), unused(), quiet()], unready_after=3)
    for _ in range(2):
        loop.tick()
    statuses = [m for m in sent if m.startswith("STATUS=")]
    assert all(m.startswith("STATUS=pass p unreachable") for m in statuses), sent
    assert loop.trouble() is None
    loop.tick()
    assert sent[-2].startswith("STATUS=not ready: no pass has reached the cluster for ")
    assert "(3 passes in a row since 2026-12-01 19:10:" in sent[-2]
    assert sent[-2].endswith(f"): {REFUSED}")
    assert sent[-1] == "WATCHDOG=1"  # fed: a restart mends no token
    loop.tick()
    assert "(4 passes in a row since" in sent[-2]
    loop.tick()
    assert sent[-2].startswith("STATUS=pass p ok") and loop.trouble() is None
    assert sent.count("WATCHDOG=1") == 5 and sent.count("READY=1") == 1
    said = [r.getMessage() for r in caplog.records if "ready" in r.getMessage()]
    assert len(said) == 2, said  # once each way, not at every pass
    assert said[0].startswith("not ready: no pass has reached the cluster for ")
    assert said[1] == "ready again: a pass could use the cluster"


def test_unready_after_one_says_it_at_the_first_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[str] = []
    monkeypatch.setattr("reconciler.run.sdnotify.notify", sent.append)
    refused_loop([unused(DOWN)], unready_after=1).tick()
    assert sent[1].startswith("STATUS=not ready: ") and sent[1].endswith(DOWN), sent


def test_a_standby_forgets_the_passes_it_could_not_use_the_cluster_in() -> None:
    """It runs none: were the count kept, a standby would stay not ready for
    the passes it ran as leader, whatever the cluster does now."""
    lead = elector(True, [])
    loop = refused_loop(
        [unused()],
        unready_after=1,
        elector=lead,
        standby=lambda: None if lead.is_leader else "not the leader",
    )
    loop.tick()
    assert loop.trouble() is not None
    lead.is_leader = False
    loop.tick()
    assert loop.trouble() is None and loop.vigil.unreached == Unreached()


def test_one_clusters_trouble_stays_on_the_status_line_while_others_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """systemd keeps the last STATUS= sent: another cluster's next pass
    must not hide the one that is not ready."""
    sent: list[str] = []
    monkeypatch.setattr("reconciler.run.sdnotify.notify", sent.append)
    eu = refused_loop([unused(), quiet()], name="eu", unready_after=1)
    us = refused_loop([quiet(), quiet()], name="us", unready_after=1)
    Daemon([eu, us])
    eu.tick()
    us.tick()
    assert sent[-2].startswith("STATUS=[eu] not ready: no pass has reached the cluster for ")
    eu.tick()
    assert sent[-2].startswith("STATUS=[eu] pass p ok")
    us.tick()
    assert sent[-2].startswith("STATUS=[us] pass p ok")
