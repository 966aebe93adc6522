"""Failure memory and the backoff schedule, alone and driven by the planner
and executor pass by pass."""

from __future__ import annotations

from datetime import UTC, datetime

from reconciler.actions import Plan
from reconciler.apply import Executor
from reconciler.backoff import Policy, delay, remember
from reconciler.kube import ApiError
from reconciler.plan import plan

from .builders import CONFIG, NOW, plan_redis, redis, snap
from .fakes import FakeKube

POLICY = Policy(threshold=3, base=30, cap=600)


def run(kube, actions):
    return Executor(kube, concurrency=4, clock=lambda: NOW).run(Plan(tuple(actions)))


def test_backoff_grows_and_is_capped():
    policy = Policy(threshold=3, base=30, cap=600)
    assert [delay(n, policy) for n in (1, 2, 3, 4, 5, 9)] == [0, 0, 30, 60, 120, 600]


def test_failures_are_counted_kept_while_backing_off_and_cleared_on_success():
    r = redis(num=1)
    kube = FakeKube()
    kube.errors[("POST", "r-0")] = ApiError(500, "InternalError", "etcd")
    prev = {}
    for expected in (1, 2, 3):
        p = plan_redis(r, [], CONFIG, NOW, prev.get(r.key))
        report = run(kube, p)
        memory = remember(prev, frozenset(), report.write_errors(), 1000.0, POLICY)
        prev, newly = memory.failures, memory.announce
        assert prev[r.key].count == expected
    assert newly and newly[0][1].retry_at == 1030.0  # third failure: back off
    held = frozenset({r.key})
    kept = remember(prev, held, run(kube, []).write_errors(), 1001.0, POLICY).failures
    assert kept[r.key].count == 3  # never dropped while backing off
    kube.errors.clear()
    p = plan_redis(r, [], CONFIG, NOW, None)
    cleared = remember(kept, frozenset(), run(kube, p).write_errors(), 2000.0, POLICY).failures
    assert cleared == {}


def test_failure_memory_across_passes_names_the_error_and_doubles_the_wait():
    """Planner, executor and failure memory pass by pass, each pass at the time
    the planner next allows a retry."""
    r = redis(num=1)
    kube = FakeKube()
    kube.errors[("POST", "r-0")] = ApiError(422, "Invalid", "spec.containers[0].image: bad")
    failures: dict = {}

    def one_pass(t):
        p = plan(snap((r,), (), (), failures), CONFIG, datetime.fromtimestamp(t, UTC))
        report = run(kube, p.actions)
        memory = remember(failures, p.backing_off, report.write_errors(), t, CONFIG.backoff)
        return p, (memory.failures, memory.announce)

    t, waits, announced = NOW.timestamp(), [], []
    for _ in range(5):
        _, (failures, newly) = one_pass(t)
        rec = failures[r.key]
        waits.append(rec.retry_at - t)
        announced.append(bool(newly))
        assert (rec.message, rec.reason) == (
            "422 Invalid: spec.containers[0].image: bad",
            "InvalidObject",
        )
        if rec.retry_at > t:
            # Inside the wait: no pod write, and the record stands as it is.
            held, (kept, _) = one_pass(t + 1)
            assert held.backing_off == {r.key}
            assert not [a for a in held.actions if a.verb == "create"]
            assert kept == failures
        t = max(rec.retry_at, t + 1)
    assert [failures[r.key].count, *waits] == [5, 0, 0, 30, 60, 120]  # defaults: 3, 30s
    assert announced[:3] == [False, False, True]
