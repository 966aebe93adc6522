"""`reconciler run`: the same pass on an APScheduler interval, brought
forward while objects progress (reconciler/run/pacing.py).

One pass at a time per cluster (max_instances=1, coalesce): a slow pass
delays the next rather than overlapping it, and missed runs are logged, not
queued. Each cluster a process serves is a `Loop` of its own, a job of the one
scheduler: its own pace, Lease or buckets and metrics, so a cluster that is
down or slow delays no other. SIGTERM
and SIGINT let the running pass finish before the process exits 0; an exec
plugin that pass waits on is killed then, so the stop never waits for its
timeout (the systemd units allow 60 s). With
leader election, only the holder of the Lease runs passes; the others tick
and stay healthy, ready to take over. Sharded, every replica runs passes
over the buckets it holds (reconciler/run/shard.py), and one that holds none
ticks like a standby.

A cluster that no pass can use (`Unreached`: unreachable, or every LIST
refused) for ``unready_after`` passes in a row is named, with the error, on
systemd's STATUS line (`sdnotify.Status`) and by /readyz, until a pass
reaches it again. The process does not exit for it, and the watchdog is
still fed (`Loop._after` says why).
"""

from __future__ import annotations

import contextvars
import logging
import signal
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from apscheduler.events import (
    EVENT_JOB_ERROR,
    EVENT_JOB_EXECUTED,
    EVENT_JOB_MAX_INSTANCES,
    EVENT_JOB_MISSED,
)
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.base import BaseScheduler
from apscheduler.schedulers.blocking import BlockingScheduler

from reconciler.client.kube import stop_credential_plugins
from reconciler.config import Config
from reconciler.log_cluster import in_cluster
from reconciler.result import PassOutcome, PassResult, plural
from reconciler.run import sdnotify
from reconciler.run.leader import LeaderElector
from reconciler.run.pacing import Pace, Schedule, explain, next_pace
from reconciler.run.shard import ShardMember

if TYPE_CHECKING:  # prometheus_client is loaded only when metrics are served
    from reconciler.run.metrics import ClusterMetrics

log = logging.getLogger(__name__)


def _thread(name: str, target: Callable[..., None], *args: object) -> threading.Thread:
    """A daemon thread in a copy of this thread's context: a Lease renewer
    logs under the cluster of the loop that started it (`log_cluster`)."""
    run = contextvars.copy_context().run
    return threading.Thread(target=run, args=(target, *args), name=name, daemon=True)


@dataclass(frozen=True)
class Unreached:
    """The passes in a row that could not use the cluster: none of their
    LISTs reached it, or it refused every one for the credentials (401) or
    for RBAC (403), which the error's first word says. A pass that reaches
    it again starts the count over."""

    passes: int = 0
    since: datetime | None = None  # when the first of them started
    why: str = ""  # the last one's error

    def after(self, result: PassResult, started: datetime) -> Unreached:
        if result.outcome is not PassOutcome.UNREACHABLE:
            return Unreached()
        return Unreached(self.passes + 1, self.since or started, result.unreachable or "")

    def trouble(self, after: int, now: datetime) -> str | None:
        """Why the cluster is not ready, once ``after`` passes in a row could not use it."""
        if self.passes < after or self.since is None:
            return None
        seconds = (now - self.since).total_seconds()
        passes = plural(self.passes, "pass", "passes")
        since = self.since.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        return (
            f"no pass has reached the cluster for {seconds:.0f}s"
            f" ({passes} in a row since {since}): {self.why}"
        )


class Loop:
    """One cluster's passes: its pace, its Lease or buckets, its metrics.
    The `Daemon` runs each loop as a job of its one scheduler."""

    def __init__(
        self,
        one_pass: Callable[[], PassResult],
        *,
        standby: Callable[[], str | None] = lambda: None,
        schedule: Schedule,
        jitter: float,
        name: str = "",
        elector: LeaderElector | None = None,
        shard: ShardMember | None = None,
        metrics: ClusterMetrics | None = None,
        requests: Callable[[], dict[tuple[str, str], int]] = dict,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        unready_after: int = Config.unready_after,
    ) -> None:
        self.one_pass = one_pass
        self.standby = standby  # why no pass now (the pass's fence lets it write nothing)
        self.schedule = schedule
        self.interval = schedule.interval
        self.jitter = jitter
        self.name = name  # empty for the one cluster of a process that serves one
        self.job_id = f"pass {name}" if name else "pass"
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
        self.unready_after = unready_after
        self.unreached = Unreached()
        # The STATUS= line; the Daemon gives every loop of the process the same one.
        self.status = sdnotify.Status()
        self.said: dict[str, str | None] = {}  # each trouble as last logged
        self.leases_started = False
        self.renewer: threading.Thread | None = None

    def tick(self) -> None:
        with self.pass_lock:
            if self.stopping.is_set():
                return
            if not self.leases_started:
                # In the loop's own job: a cluster whose first Lease round
                # hangs delays its own first pass, never another cluster's.
                self.leases_started = True
                self.renewer = self.start_leases()
            self.ticks += 1
            why = self.standby()
            if why is not None:
                log.debug("%s; skipping this pass", why)
                self.pace = None  # a leader again later starts at the interval, not settling
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
            self._after(result, started)
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
            self.metrics.count_early(str(self.pace.why))
        self.early_at = when

    def ended(self, scheduler: BaseScheduler) -> None:
        """The pass's job has ended: bring the next one forward if it asked."""
        when, self.early_at = self.early_at, None
        if when is not None and not self.stopping.is_set():
            scheduler.modify_job(self.job_id, next_run_time=when)

    def _after(self, result: PassResult | None, started: datetime | None = None) -> None:
        """After each tick: metrics, then systemd's READY=1 (the first),
        STATUS= and WATCHDOG=1. The watchdog is fed also while no pass can
        use the cluster: it is for a process that hangs, which a restart
        mends; a refused token, lost RBAC or an apiserver that is down is not
        mended by one, and restarts would only end at the unit's start limit,
        after which nothing retries once the cluster is back. The STATUS line
        and /readyz say it instead, and the next pass that reaches the
        cluster clears them."""
        if self.metrics is not None:
            if result is not None:
                self.metrics.record_pass(result, self.requests())
            else:
                self.metrics.record_requests(self.requests())
                self.metrics.tick()
        # A standby has no passes to count: its Lease's trouble speaks for it.
        self.unreached = (
            self.unreached.after(result, started or self.clock())
            if result is not None
            else Unreached()
        )
        if self.ticks == 1:
            sdnotify.notify("READY=1")
        reach, lease = self.reach_trouble(), self.lease_trouble()
        self._say("reach", reach, "a pass reached the cluster")
        self._say("lease", lease, "the Lease is held or seen")
        line = result.one_line() if result is not None else "standby: nothing held"
        self.status.say(self.name, line, reach or lease)
        sdnotify.notify("WATCHDOG=1")

    def trouble(self) -> str | None:
        """Why this cluster is not ready: /readyz fails with it, and
        systemd's status line shows it."""
        return self.reach_trouble() or self.lease_trouble()

    def reach_trouble(self) -> str | None:
        """``unready_after`` passes in a row could not use the cluster."""
        return self.unreached.trouble(self.unready_after, self.clock())

    def lease_trouble(self) -> str | None:
        """Why this replica cannot tell whether anyone reconciles."""
        source = self.elector or self.shard
        return source.sighting.trouble() if source is not None else None

    def _say(self, what: str, trouble: str | None, cleared: str) -> None:
        """Log a change of one trouble once, not at every tick."""
        before = self.said.get(what)
        if trouble is not None and before is None:
            log.error("not ready: %s", trouble)
        elif trouble is None and before is not None:
            log.info("ready again: %s", cleared)
        self.said[what] = trouble

    def retry_period(self) -> float:
        source = self.elector or self.shard
        return source.config.retry_period if source is not None else 0.0

    def _start_shard(self, shard: ShardMember) -> threading.Thread:
        if self.metrics is not None:
            metrics = self.metrics
            metrics.set_buckets(shard.config.buckets)
            shard.on_change = metrics.record_buckets
        # Join, then take our share a retry period later, once the replicas
        # started with us have joined too: know our buckets before the first pass.
        shard.round()
        self.stopping.wait(shard.config.retry_period)
        shard.round()
        thread = _thread("shard", shard.run, self.stopping, self.pass_lock)
        thread.start()
        return thread

    def start_leases(self) -> threading.Thread | None:
        """Before the first pass: know our role (leader or standby, buckets
        held), then keep the Leases renewed in a thread."""
        if self.metrics is not None:
            self.metrics.blocked = self.trouble
        if self.elector is None and self.metrics is not None:
            self.metrics.set_leader(True)  # a writer: the no-leader alert stays quiet
        if self.elector is not None:
            elector = self.elector
            if self.metrics is not None:
                elector.on_change = self.metrics.set_leader
            elector.try_acquire_or_renew()
            renewer = _thread("lease", elector.run, self.stopping)
            renewer.start()
            return renewer
        if self.shard is not None:
            return self._start_shard(self.shard)
        return None

    def stop(self) -> None:
        """After the last pass: give up what this loop holds."""
        with self.pass_lock:  # wait for a pass still running in the pool
            pass
        self.stopping.set()
        if self.renewer is not None:
            self.renewer.join(timeout=self.retry_period() + 5)
        if self.elector is not None:
            self.elector.release()
        if self.shard is not None:
            self.shard.leave()
        log.info("stopped after %s", plural(self.passes, "pass", "passes"))


class _SaidByTheListener(logging.Filter):
    """APScheduler warns of each tick skipped while a pass runs on; the
    listener says the same with the cluster's name, so a long pass logs one
    line per interval, not two."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "maximum number of running instances" not in str(record.msg)


_SKIPS_SAID = _SaidByTheListener()


class Daemon:
    """The process: one scheduler running every cluster's loop, at most
    ``parallel`` passes at once, until SIGTERM."""

    def __init__(self, loops: Sequence[Loop], parallel: int = 1) -> None:
        logging.getLogger("apscheduler.scheduler").addFilter(_SKIPS_SAID)
        self.loops = {loop.job_id: loop for loop in loops}
        status = sdnotify.Status()  # one STATUS= line, whichever loop speaks
        for loop in loops:
            loop.status = status
        self.stopping = threading.Event()
        self.scheduler = BlockingScheduler(
            timezone=UTC,
            executors={"default": ThreadPoolExecutor(max(1, parallel))},
            job_defaults={"max_instances": 1, "coalesce": True},
        )

    def _listener(self, event) -> None:  # type: ignore[no-untyped-def]
        loop = self.loops.get(event.job_id)
        prefix = f"[{loop.name}] " if loop is not None and loop.name else ""
        if event.code == EVENT_JOB_EXECUTED and loop is not None:
            loop.ended(self.scheduler)
        elif event.code == EVENT_JOB_MISSED:
            log.warning("%spass scheduled at %s was missed", prefix, event.scheduled_run_time)
        elif event.code == EVENT_JOB_MAX_INSTANCES:
            log.warning("%spass skipped: the previous pass is still running", prefix)
        elif event.code == EVENT_JOB_ERROR:
            log.error("%spass raised: %s", prefix, event.exception)

    def _stop(self, signum: int, _frame: object) -> None:
        log.info("received %s; finishing the current passes", signal.Signals(signum).name)
        sdnotify.notify("STOPPING=1")
        stop_credential_plugins()  # a pass waiting on one ends now, its credentials refused
        self.stopping.set()
        for loop in self.loops.values():
            loop.stopping.set()
        self.scheduler.shutdown(wait=False)

    def run(self) -> int:
        for loop in self.loops.values():
            self.scheduler.add_job(
                in_cluster,
                "interval",
                args=(loop.name, loop.tick),
                seconds=loop.interval,
                jitter=loop.jitter,
                next_run_time=datetime.now(UTC),
                misfire_grace_time=max(1, int(loop.interval)),
                id=loop.job_id,
                name=f"reconcile pass {loop.name}".strip(),
            )
            log.info(
                "%srunning a pass every %.0fs (jitter %.0fs)",
                f"[{loop.name}] " if loop.name else "",
                loop.interval,
                loop.jitter,
            )
        self.scheduler.add_listener(
            self._listener,
            EVENT_JOB_EXECUTED | EVENT_JOB_MISSED | EVENT_JOB_MAX_INSTANCES | EVENT_JOB_ERROR,
        )
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)
        self.scheduler.start()
        self.stopping.set()
        for loop in self.loops.values():
            in_cluster(loop.name, loop.stop)
        return 0
