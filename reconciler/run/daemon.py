"""`reconciler run`: the same pass on an APScheduler interval, brought
forward while objects progress (reconciler/run/pacing.py).

One pass at a time (max_instances=1, coalesce): a slow pass delays the next
rather than overlapping it, and missed runs are logged, not queued. SIGTERM
and SIGINT let the running pass finish before the process exits 0. With
leader election, only the holder of the Lease runs passes; the others tick
and stay healthy, ready to take over. Sharded, every replica runs passes
over the buckets it holds (reconciler/run/shard.py), and one that holds none
ticks like a standby.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from apscheduler.events import (
    EVENT_JOB_ERROR,
    EVENT_JOB_EXECUTED,
    EVENT_JOB_MAX_INSTANCES,
    EVENT_JOB_MISSED,
)
from apscheduler.schedulers.blocking import BlockingScheduler

from reconciler.result import PassResult, plural
from reconciler.run import sdnotify
from reconciler.run.leader import LeaderElector
from reconciler.run.pacing import Pace, Schedule, explain, next_pace
from reconciler.run.shard import ShardMember

if TYPE_CHECKING:  # prometheus_client is loaded only when metrics are served
    from reconciler.run.metrics import Metrics

log = logging.getLogger(__name__)


class Daemon:
    def __init__(
        self,
        one_pass: Callable[[], PassResult],
        *,
        schedule: Schedule,
        jitter: float,
        elector: LeaderElector | None = None,
        shard: ShardMember | None = None,
        metrics: Metrics | None = None,
        requests: Callable[[], dict[tuple[str, str], int]] = dict,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.one_pass = one_pass
        self.schedule = schedule
        self.interval = schedule.interval
        self.jitter = jitter
        self.pace: Pace | None = None
        # When the next pass comes early: set by a pass, handed to the
        # scheduler once that pass's job has ended (a job may not run twice at
        # once, so a time already past would be skipped while it still runs).
        self.early_at: datetime | None = None
        self.elector = elector
        self.shard = shard
        self.metrics = metrics
        self.requests = requests
        self.clock = clock
        self.pass_lock = threading.Lock()
        self.stopping = threading.Event()
        self.passes = 0
        self.ticks = 0
        self.said: str | None = None  # the Lease trouble last logged
        self.scheduler = BlockingScheduler(
            timezone=UTC,
            job_defaults={
                "max_instances": 1,
                "coalesce": True,
                "misfire_grace_time": max(1, int(schedule.interval)),
            },
        )

    def tick(self) -> None:
        with self.pass_lock:
            if self.stopping.is_set():
                return
            self.ticks += 1
            if self.elector is not None and not self.elector.is_leader:
                log.debug("not the leader; skipping this pass")
                self.pace = None  # a leader again later starts at the interval, not settling
                self._after(None)
                return
            if self.shard is not None and not self.shard.held():
                log.debug("sharded: no bucket held; skipping this pass")
                self.pace = None
                self._after(None)
                return
            started = self.clock()
            try:
                result = self.one_pass()
            except Exception:  # a bug in one pass must not kill the daemon
                log.exception("pass crashed; the next pass starts over")
                self.pace = None
                return
            self.passes += 1
            log.info("%s", result.one_line())
            self._after(result)
            self._pace(result, started)

    def _pace(self, result: PassResult, started: datetime) -> None:
        """Bring the next pass forward when this one left work in motion, as
        soon as the pace's budget allows; the delay counts from this pass's
        start, so a pass longer than min_interval is followed sooner."""
        self.pace = next_pace(result, self.pace, self.schedule)
        if self.metrics is not None:
            self.metrics.record_pace(self.pace)
        if not self.pace.early or self.pace.delay >= self.interval or self.stopping.is_set():
            return
        now = self.clock()
        when = max(started + timedelta(seconds=self.pace.delay), now)
        wait = round((when - now).total_seconds(), 1)
        log.info("next pass in %gs: %s", wait, explain(self.pace, self.schedule))
        if self.metrics is not None:
            self.metrics.early.labels(str(self.pace.why)).inc()
        self.early_at = when

    def _ended(self) -> None:
        """The pass's job has ended: bring the next one forward if it asked."""
        when, self.early_at = self.early_at, None
        if when is not None and not self.stopping.is_set():
            self.scheduler.modify_job("pass", next_run_time=when)

    def _after(self, result: PassResult | None) -> None:
        if self.metrics is not None:
            if result is not None:
                self.metrics.record_pass(result, self.requests())
            else:
                self.metrics.record_requests(self.requests())
                self.metrics.tick()
        if self.ticks == 1:
            sdnotify.notify("READY=1")
        trouble = self.trouble()
        self._say(trouble)
        status = result.one_line() if result is not None else trouble or "standby: nothing held"
        sdnotify.notify(f"STATUS={status}")
        sdnotify.notify("WATCHDOG=1")

    def trouble(self) -> str | None:
        """Why this replica cannot tell whether anyone reconciles: /readyz
        fails with it, and systemd's status line shows it."""
        source = self.elector or self.shard
        return source.sighting.trouble() if source is not None else None

    def _say(self, trouble: str | None) -> None:
        """Log a change of the Lease trouble once, not at every tick."""
        if trouble is not None and self.said is None:
            log.error("not ready: %s", trouble)
        elif trouble is None and self.said is not None:
            log.info("ready again: the Lease is held or seen")
        self.said = trouble

    def _retry_period(self) -> float:
        source = self.elector or self.shard
        return source.config.retry_period if source is not None else 0.0

    def _listener(self, event) -> None:  # type: ignore[no-untyped-def]
        if event.code == EVENT_JOB_EXECUTED:
            self._ended()
        elif event.code == EVENT_JOB_MISSED:
            log.warning("pass scheduled at %s was missed", event.scheduled_run_time)
        elif event.code == EVENT_JOB_MAX_INSTANCES:
            log.warning("pass skipped: the previous pass is still running")
        elif event.code == EVENT_JOB_ERROR:
            log.error("pass raised: %s", event.exception)

    def _stop(self, signum: int, _frame: object) -> None:
        log.info("received %s; finishing the current pass", signal.Signals(signum).name)
        sdnotify.notify("STOPPING=1")
        self.stopping.set()
        self.scheduler.shutdown(wait=False)

    def _start_shard(self, shard: ShardMember) -> threading.Thread:
        if self.metrics is not None:
            metrics = self.metrics
            metrics.buckets.set(shard.config.buckets)
            shard.on_change = metrics.record_buckets
        # Join, then take our share a retry period later, once the replicas
        # started with us have joined too: know our buckets before the first pass.
        shard.round()
        self.stopping.wait(shard.config.retry_period)
        shard.round()
        thread = threading.Thread(
            target=shard.run, args=(self.stopping, self.pass_lock), name="shard", daemon=True
        )
        thread.start()
        return thread

    def run(self) -> int:
        renewer = None
        if self.metrics is not None:
            self.metrics.blocked = self.trouble
        if self.elector is None and self.metrics is not None:
            self.metrics.leader.set(1)  # a writer: the no-leader alert stays quiet
        if self.elector is not None:
            elector = self.elector
            if self.metrics is not None:
                gauge = self.metrics.leader
                elector.on_change = lambda leader: gauge.set(1 if leader else 0)
            elector.try_acquire_or_renew()  # know our role before the first pass
            renewer = threading.Thread(
                target=elector.run, args=(self.stopping,), name="lease", daemon=True
            )
            renewer.start()
        if self.shard is not None:
            renewer = self._start_shard(self.shard)
        self.scheduler.add_job(
            self.tick,
            "interval",
            seconds=self.interval,
            jitter=self.jitter,
            next_run_time=datetime.now(UTC),
            id="pass",
            name="reconcile pass",
        )
        self.scheduler.add_listener(
            self._listener,
            EVENT_JOB_EXECUTED | EVENT_JOB_MISSED | EVENT_JOB_MAX_INSTANCES | EVENT_JOB_ERROR,
        )
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)
        log.info("running a pass every %.0fs (jitter %.0fs)", self.interval, self.jitter)
        self.scheduler.start()
        with self.pass_lock:  # wait for a pass still running in the pool
            pass
        self.stopping.set()
        if renewer is not None:
            renewer.join(timeout=self._retry_period() + 5)
        if self.elector is not None:
            self.elector.release()
        if self.shard is not None:
            self.shard.leave()
        log.info("stopped after %s", plural(self.passes, "pass", "passes"))
        return 0
