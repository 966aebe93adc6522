"""Prometheus metrics and the /healthz and /readyz endpoints of `reconciler run`.

/healthz fails when no cluster's loop has completed a pass for
``stale_after`` seconds (healthz_intervals intervals), so a process that
hangs (rather than crashes) is restarted by systemd or the kubelet. A standby
replica that skips passes because it is not the leader still counts as alive:
its loop is ticking. /readyz fails, with the reason and the cluster, while a
cluster's loop says it is blocked (``blocked``: a replica that can neither
hold nor see the holder of its Lease for longer than the lease duration, or
``unready_after`` passes in a row that could not use the cluster;
reconciler/run/daemon.py), or while its loop has ended no pass for
``stale_after`` seconds: then nothing reconciles there.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from reconciler.model import PODS
from reconciler.result import PassOutcome, PassResult
from reconciler.run.pacing import Pace

log = logging.getLogger(__name__)
CONDITIONS = ("Ready", "Degraded", "Progressing")


class Metrics:
    """The process's registry and its health, over every cluster it serves.

    Served for several clusters (``named``), every metric but the process's
    own carries a ``cluster`` label; for one, none does, as before.
    """

    def __init__(self, named: bool = False) -> None:
        self.registry = CollectorRegistry()
        self.named = named
        self.clusters: dict[str, ClusterMetrics] = {}
        ProcessCollector(registry=self.registry)  # process_resident_memory_bytes, CPU seconds
        c = ("cluster",) if named else ()
        r = self.registry
        # The stalled-passes alert (config/prometheus) counts in intervals, so
        # it follows a changed --interval without an edit to the rule.
        self.interval = Gauge(
            "reconciler_pass_interval_seconds",
            "Configured seconds between passes of `reconciler run`.",
            c,
            registry=r,
        )
        self.pass_duration = Histogram(
            "reconciler_pass_duration_seconds",
            "Wall time of one reconcile pass.",
            c,
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
            registry=r,
        )
        self.passes = Counter(
            "reconciler_passes_total", "Passes by result.", [*c, "result"], registry=r
        )
        self.throttled = Counter(
            "reconciler_throttled_total",
            "Objects whose writes the apiserver throttled (429) past the retries; "
            "the next pass writes them.",
            [*c, "kind"],
            registry=r,
        )
        self.malformed = Counter(
            "reconciler_malformed_lists_total",
            "LISTs answered with what is not the list asked for (another kind, no items): "
            "the kind is not seen in that pass.",
            [*c, "kind"],
            registry=r,
        )
        self.stale = Counter(
            "reconciler_stale_lists_total",
            "LISTs that left out an object a GET then found: the kind is not seen in that "
            "pass, and no pod is deleted as an orphan.",
            [*c, "kind"],
            registry=r,
        )
        self.refused_owners = Counter(
            "reconciler_owner_references_refused_total",
            "Our pods whose controller reference cannot name one of our objects (another "
            "group, or not a name of the kind): the owner is never asked for, the pod left alone.",
            [*c, "kind"],
            registry=r,
        )
        self.actions = Counter(
            "reconciler_actions_total",
            "Actions by kind, verb and result.",
            [*c, "kind", "verb", "result"],
            registry=r,
        )
        self.requests = Counter(
            "reconciler_api_requests_total",
            "API requests by verb and code.",
            [*c, "verb", "code"],
            registry=r,
        )
        self.observed = Gauge(
            "reconciler_objects_observed",
            "Objects seen in the last pass.",
            [*c, "kind"],
            registry=r,
        )
        self.last_success = Gauge(
            "reconciler_last_success_timestamp_seconds",
            "Unix time of the last pass without errors.",
            c,
            registry=r,
        )
        self.objects = Gauge(
            "reconciler_objects",
            "Objects whose condition is True as the last pass left them, by kind.",
            [*c, "kind", "condition"],
            registry=r,
        )
        self.backing_off = Gauge(
            "reconciler_objects_backing_off",
            "Objects whose writes are held after repeated failures, by kind.",
            [*c, "kind"],
            registry=r,
        )
        self.stalled = Gauge(
            "reconciler_objects_progress_deadline_exceeded",
            "Objects whose pods stopped moving before all were Ready "
            "(Progressing=False/ProgressDeadlineExceeded), by kind.",
            [*c, "kind"],
            registry=r,
        )
        self.early = Counter(
            "reconciler_early_passes_total",
            "Passes scheduled before the interval, by why: wrote, conflict, progressing, settling.",
            [*c, "reason"],
            registry=r,
        )
        self.next_pass = Gauge(
            "reconciler_next_pass_delay_seconds",
            "Seconds from the start of the last pass to the start of the next.",
            c,
            registry=r,
        )
        self.look = Gauge(
            "reconciler_pass_look_seconds",
            "What observing and planning took in the last pass (wall or client CPU,"
            " whichever is larger): the cost the pace budget counts.",
            c,
            registry=r,
        )
        self.budgeted = Counter(
            "reconciler_budget_paced_passes_total",
            "Early passes that waited past --min-interval for the pace budget "
            "(the recent passes' looking over --pace-budget).",
            c,
            registry=r,
        )
        self.leader = Gauge(
            "reconciler_leader",
            "1 if this instance may write: it holds the Lease, or runs without leader election.",
            c,
            registry=r,
        )
        self.buckets = Gauge(
            "reconciler_shard_buckets",
            "Buckets the objects are split into (sharded replicas; 0 otherwise).",
            c,
            registry=r,
        )
        self.buckets_held = Gauge(
            "reconciler_shard_buckets_held",
            "Buckets this replica holds and may write.",
            c,
            registry=r,
        )
        self.bucket_changes = Counter(
            "reconciler_shard_bucket_changes_total",
            "Buckets this replica took or gave up.",
            [*c, "change"],
            registry=r,
        )
        self.reached = Gauge(
            "reconciler_last_reached_timestamp_seconds",
            "Unix time of the last pass that reached the cluster (not every LIST"
            " unanswered or refused): /readyz fails once unready_after passes in a row have not.",
            c,
            registry=r,
        )

    def cluster(self, name: str, interval: float, stale_after: float) -> ClusterMetrics:
        """The metrics and health of one cluster (``name``: empty for the one
        cluster of a process that serves one)."""
        metrics = ClusterMetrics(self, name, interval, stale_after)
        self.clusters[name] = metrics
        return metrics

    def healthy(self) -> bool:
        """Some cluster's loop ticks. A restart would stop the passes of every
        cluster for the one whose loop hangs: that one is named by /readyz
        instead, as systemd's watchdog is fed by any loop's tick."""
        return any(c.healthy() for c in self.clusters.values())

    def not_ready(self) -> str | None:
        """Why /readyz fails, naming the cluster when there are several."""
        for name, cluster in self.clusters.items():
            why = cluster.not_ready()
            if why is not None:
                return f"{name}: {why}" if self.named else why
        return None if self.clusters else "no cluster served"


class ClusterMetrics:
    """One cluster's series (its ``cluster`` label bound) and its health."""

    def __init__(self, metrics: Metrics, name: str, interval: float, stale_after: float) -> None:
        self.family = metrics
        self.name = name
        self.bound: tuple[str, ...] = (name,) if metrics.named else ()
        self.stale_after = stale_after
        # Why the cluster's loop is not ready: its Lease, or the passes that
        # cannot use the cluster (set by the daemon).
        self.blocked: Callable[[], str | None] | None = None
        self.of(metrics.interval).set(interval)
        self._held: frozenset[int] = frozenset()
        self._seen_requests: dict[tuple[str, str], int] = {}
        self.last_tick = 0.0
        self.ready = False
        self.lock = threading.Lock()

    def of(self, family: Any, *labels: str) -> Any:
        """``family``'s series for this cluster and ``labels``."""
        values = (*self.bound, *labels)
        return family.labels(*values) if values else family

    def set_leader(self, leader: bool) -> None:
        self.of(self.family.leader).set(1 if leader else 0)

    def set_buckets(self, buckets: int) -> None:
        self.of(self.family.buckets).set(buckets)

    def count_early(self, why: str) -> None:
        self.of(self.family.early, why).inc()

    def record_buckets(self, held: frozenset[int]) -> None:
        """Called by the shard member whenever its held buckets change."""
        f = self.family
        with self.lock:
            taken, given = len(held - self._held), len(self._held - held)
            self._held = held
        self.of(f.buckets_held).set(len(held))
        if taken:
            self.of(f.bucket_changes, "taken").inc(taken)
        if given:
            self.of(f.bucket_changes, "given-up").inc(given)
        self.set_leader(bool(held))

    def record_pace(self, pace: Pace) -> None:
        f = self.family
        self.of(f.next_pass).set(pace.delay)
        if pace.costs:
            self.of(f.look).set(pace.costs[-1])
        if pace.budgeted:
            self.of(f.budgeted).inc()

    def record_pass(self, result: PassResult, requests: dict[tuple[str, str], int]) -> None:
        f = self.family
        self.of(f.pass_duration).observe(result.duration)
        self.of(f.passes, str(result.outcome)).inc()
        for (kind, verb, res), n in result.applied.counts().items():
            self.of(f.actions, kind, verb, res).inc(n)
        for outcome in result.applied.throttled():
            self.of(f.throttled, outcome.action.owner.kind).inc()
        for kind in result.malformed:
            self.of(f.malformed, kind).inc()
        for kind in result.stale:
            self.of(f.stale, kind).inc()
        for kind in result.refused:
            self.of(f.refused_owners, kind).inc()
        for kind, n in result.observed.items():
            self.of(f.observed, kind).set(n)
        self.record_health(result)
        if result.outcome is PassOutcome.OK:
            self.of(f.last_success).set(time.time())
        if result.outcome is not PassOutcome.UNREACHABLE:
            self.of(f.reached).set(time.time())
        self.record_requests(requests)
        self.tick()

    def record_health(self, result: PassResult) -> None:
        """Every kind listed this pass is set, zeros included, so that an
        alert clears; a kind whose LIST failed keeps its last values."""
        f = self.family
        listed = [kind for kind in result.observed if kind != PODS.kind]
        counts: collections.Counter[tuple[str, str]] = collections.Counter()
        for key, health in result.health.items():
            counts[(key.kind, "Ready")] += health.ready
            counts[(key.kind, "Degraded")] += health.degraded
            counts[(key.kind, "Progressing")] += health.progressing
        held = collections.Counter(key.kind for key in result.plan.backing_off)
        stalled = collections.Counter(k.kind for k, h in result.health.items() if h.stalled)
        for kind in listed:
            for condition in CONDITIONS:
                self.of(f.objects, kind, condition).set(counts[(kind, condition)])
            self.of(f.backing_off, kind).set(held[kind])
            self.of(f.stalled, kind).set(stalled[kind])

    def record_requests(self, requests: dict[tuple[str, str], int]) -> None:
        """Counters only go up: add what the client counted since last time."""
        with self.lock:
            for key, total in requests.items():
                delta = total - self._seen_requests.get(key, 0)
                if delta > 0:
                    self.of(self.family.requests, *key).inc(delta)
                self._seen_requests[key] = total

    def tick(self) -> None:
        self.last_tick = time.monotonic()
        self.ready = True

    def healthy(self) -> bool:
        return self.ready and time.monotonic() - self.last_tick < self.stale_after

    def not_ready(self) -> str | None:
        """Why /readyz fails for this cluster: no pass yet, what its loop
        says blocks it, or no pass ended for ``stale_after`` seconds."""
        if not self.ready:
            return "first pass not done"
        blocked = self.blocked() if self.blocked is not None else None
        if blocked is not None:
            return blocked
        ended_for = time.monotonic() - self.last_tick
        if ended_for >= self.stale_after:
            return f"no pass has ended for {ended_for:.0f}s: one is still running"
        return None


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        metrics = self.server.metrics
        if self.path == "/metrics":
            self._send(200, generate_latest(metrics.registry), CONTENT_TYPE_LATEST)
        elif self.path == "/healthz":
            ok = metrics.healthy()
            self._send(200 if ok else 503, b"ok\n" if ok else b"no pass completed recently\n")
        elif self.path == "/readyz":
            why = metrics.not_ready()
            self._send(503 if why else 200, f"{why or 'ok'}\n".encode())
        else:
            self._send(404, b"not found\n")

    def _send(self, code: int, body: bytes, ctype: str = "text/plain; charset=utf-8") -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("http %s", format % args)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], metrics: Metrics) -> None:
        super().__init__(address, _Handler)
        self.metrics = metrics


def parse_address(address: str) -> tuple[str, int]:
    """':8080' -> ('', 8080) (all interfaces); '127.0.0.1:8080' -> as given."""
    host, _, port = address.rpartition(":")
    if not port.isdigit():
        raise ValueError(f"expected HOST:PORT or :PORT, got {address!r}")
    if int(port) > 65535:
        raise ValueError(f"port {port} is not between 0 and 65535")
    return host.strip("[]"), int(port)


def serve(address: str, metrics: Metrics) -> ThreadingHTTPServer:
    server = _Server(parse_address(address), metrics)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    host, port = server.server_address[:2]
    log.info("serving /metrics, /healthz and /readyz on %s:%s", host or "*", port)
    return server
