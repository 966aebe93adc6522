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

Each tick is a turn (reconciler/run/turn.py): the pass, its result line,
metrics and systemd's notifications. A cluster that no pass can use
(`turn.Unreached`: unreachable, or every LIST refused) for ``unready_after``
passes in a row is named, with the error, on systemd's STATUS line
(`sdnotify.Status`) and by /readyz, until a pass reaches it again. The
process does not exit for it, and the watchdog is still fed (`turn.Vigil`
says why).
"""

from __future__ import annotations

import contextvars
import logging
import signal
import threading
from collections.abc import Callable, Sequence
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
from reconciler.result import PassResult, plural
from reconciler.run import sdnotify
from reconciler.run.leader import LeaderElector
from reconciler.run.pacing import Pace, Schedule, explain, next_pace
from reconciler.run.shard import ShardMember
from reconciler.run.turn import ResultLine, Turns, Vigil

if TYPE_CHECKING:  # prometheus_client is loaded only when metrics are served
    from reconciler.run.metrics import ClusterMetrics

log = logging.getLogger(__name__)


def _thread(name: str, target: Callable[..., None], *args: object) -> threading.Thread:
    """A daemon thread in a copy of this thread's context: a Lease renewer
    logs under the cluster of the loop that started it (`log_cluster`)."""
    run = contextvars.copy_context().run
    return threading.Thread(target=run, args=(target, *args), name=name, daemon=True)


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
        kinds: Sequence[str] = (),
    ) -> None:
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
        self.clock = clock
        self.pass_lock = threading.Lock()
        self.stopping = threading.Event()
        self.passes = 0
        self.vigil = Vigil(
            name=name,
            metrics=metrics,
            requests=requests,
            lease_trouble=self.lease_trouble,
            unready_after=unready_after,
            kinds=kinds,
            clock=clock,
        )
        # Each tick's turn: the pass unless the fence says this replica is a
        # standby, then its result line and the vigil (turn.py).
        self.turns = Turns(one_pass, standby, (ResultLine(), self.vigil), clock)
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
            try:
                turn = self.turns.take()
            except Exception:  # a bug in one pass must not kill the daemon
                log.exception("pass crashed; the next pass starts over")
                self.pace = None
                return
            if turn.result is None:
                self.pace = None  # a leader again later starts at the interval, not settling
                return
            self.passes += 1
            self._pace(turn.result, turn.started)

    def _pace(self, result: PassResult, started: datetime) -> None:
        """Bring the next pass forward when this one left work in motion, as
        soon as the pace's budget allows; the delay counts from this pass's
        start, so a pass longer than min_interval is followed sooner."""
        self.pace = next_pace(result, self.pace, self.schedule)
        early = self.pace.early and self.pace.delay < self.interval
        self.vigil.paced(self.pace, early and not self.stopping.is_set())
        if not early or self.stopping.is_set():
            return
        now = self.clock()
        when = max(started + timedelta(seconds=self.pace.delay), now)
        wait = round((when - now).total_seconds(), 1)
        log.info("next pass in %gs: %s", wait, explain(self.pace, self.schedule))
        self.early_at = when

    def ended(self, scheduler: BaseScheduler) -> None:
        """The pass's job has ended: bring the next one forward if it asked."""
        when, self.early_at = self.early_at, None
        if when is not None and not self.stopping.is_set():
            scheduler.modify_job(self.job_id, next_run_time=when)

    def trouble(self) -> str | None:
        """Why this cluster is not ready (`Vigil.trouble`)."""
        return self.vigil.trouble()

    def lease_trouble(self) -> str | None:
        """Why this replica cannot tell whether anyone reconciles."""
        source = self.elector or self.shard
        return source.sighting.trouble() if source is not None else None

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
            loop.vigil.status = status
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
