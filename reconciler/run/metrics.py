"""Prometheus metrics and the /healthz and /readyz endpoints of `reconciler run`.

/healthz fails when no pass has completed for ``stale_after`` seconds, so a
loop that hangs (rather than crashes) is restarted by systemd or the kubelet.
A standby replica that skips passes because it is not the leader still counts
as alive: its loop is ticking. /readyz fails, with the reason, while a replica
can neither hold nor see the holder of its Lease for longer than the lease
duration (``blocked``): then nothing says anyone reconciles.
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
    def __init__(self, interval: float = 0.0) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        # Why this replica cannot tell whether anyone reconciles (set by the daemon).
        self.blocked: Callable[[], str | None] | None = None
        ProcessCollector(registry=r)  # process_resident_memory_bytes, CPU seconds
        # The stalled-passes alert (config/prometheus) counts in intervals, so
        # it follows a changed --interval without an edit to the rule.
        self.interval = Gauge(
            "reconciler_pass_interval_seconds",
            "Configured seconds between passes of `reconciler run`.",
            registry=r,
        )
        self.interval.set(interval)
        self.pass_duration = Histogram(
            "reconciler_pass_duration_seconds",
            "Wall time of one reconcile pass.",
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
            registry=r,
        )
        self.passes = Counter(
            "reconciler_passes_total", "Passes by result.", ["result"], registry=r
        )
        self.throttled = Counter(
            "reconciler_throttled_total",
            "Objects whose writes the apiserver throttled (429) past the retries; "
            "the next pass writes them.",
            ["kind"],
            registry=r,
        )
        self.actions = Counter(
            "reconciler_actions_total",
            "Actions by kind, verb and result.",
            ["kind", "verb", "result"],
            registry=r,
        )
        self.requests = Counter(
            "reconciler_api_requests_total",
            "API requests by verb and code.",
            ["verb", "code"],
            registry=r,
        )
        self.observed = Gauge(
            "reconciler_objects_observed", "Objects seen in the last pass.", ["kind"], registry=r
        )
        self.last_success = Gauge(
            "reconciler_last_success_timestamp_seconds",
            "Unix time of the last pass without errors.",
            registry=r,
        )
        self.objects = Gauge(
            "reconciler_objects",
            "Objects whose condition is True as the last pass left them, by kind.",
            ["kind", "condition"],
            registry=r,
        )
        self.backing_off = Gauge(
            "reconciler_objects_backing_off",
            "Objects whose writes are held after repeated failures, by kind.",
            ["kind"],
            registry=r,
        )
        self.stalled = Gauge(
            "reconciler_objects_progress_deadline_exceeded",
            "Objects whose pods stopped moving before all were Ready "
            "(Progressing=False/ProgressDeadlineExceeded), by kind.",
            ["kind"],
            registry=r,
        )
        self.early = Counter(
            "reconciler_early_passes_total",
            "Passes scheduled before the interval, by why: wrote, conflict, progressing, settling.",
            ["reason"],
            registry=r,
        )
        self.next_pass = Gauge(
            "reconciler_next_pass_delay_seconds",
            "Seconds from the start of the last pass to the start of the next.",
            registry=r,
        )
        self.look = Gauge(
            "reconciler_pass_look_seconds",
            "What observing and planning took in the last pass (wall or client CPU,"
            " whichever is larger): the cost the pace budget counts.",
            registry=r,
        )
        self.budgeted = Counter(
            "reconciler_budget_paced_passes_total",
            "Early passes that waited past --min-interval for the pace budget "
            "(the recent passes' looking over --pace-budget).",
            registry=r,
        )
        self.leader = Gauge(
            "reconciler_leader",
            "1 if this instance may write: it holds the Lease, or runs without leader election.",
            registry=r,
        )
        self.buckets = Gauge(
            "reconciler_shard_buckets",
            "Buckets the objects are split into (sharded replicas; 0 otherwise).",
            registry=r,
        )
        self.buckets_held = Gauge(
            "reconciler_shard_buckets_held",
            "Buckets this replica holds and may write.",
            registry=r,
        )
        self.bucket_changes = Counter(
            "reconciler_shard_bucket_changes_total",
            "Buckets this replica took or gave up.",
            ["change"],
            registry=r,
        )
        self._held: frozenset[int] = frozenset()
        self._seen_requests: dict[tuple[str, str], int] = {}
        self.last_tick = 0.0
        self.ready = False
        self.lock = threading.Lock()

    def record_buckets(self, held: frozenset[int]) -> None:
        """Called by the shard member whenever its held buckets change."""
        with self.lock:
            taken, given = len(held - self._held), len(self._held - held)
            self._held = held
        self.buckets_held.set(len(held))
        if taken:
            self.bucket_changes.labels("taken").inc(taken)
        if given:
            self.bucket_changes.labels("given-up").inc(given)
        self.leader.set(1 if held else 0)

    def record_pace(self, pace: Pace) -> None:
        self.next_pass.set(pace.delay)
        if pace.costs:
            self.look.set(pace.costs[-1])
        if pace.budgeted:
            self.budgeted.inc()

    def record_pass(self, result: PassResult, requests: dict[tuple[str, str], int]) -> None:
        self.pass_duration.observe(result.duration)
        self.passes.labels(str(result.outcome)).inc()
        for (kind, verb, res), n in result.applied.counts().items():
            self.actions.labels(kind, verb, res).inc(n)
        for outcome in result.applied.throttled():
            self.throttled.labels(outcome.action.owner.kind).inc()
        for kind, n in result.observed.items():
            self.observed.labels(kind).set(n)
        self.record_health(result)
        if result.outcome is PassOutcome.OK:
            self.last_success.set(time.time())
        self.record_requests(requests)
        self.tick()

    def record_health(self, result: PassResult) -> None:
        """Every kind listed this pass is set, zeros included, so that an
        alert clears; a kind whose LIST failed keeps its last values."""
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
                self.objects.labels(kind, condition).set(counts[(kind, condition)])
            self.backing_off.labels(kind).set(held[kind])
            self.stalled.labels(kind).set(stalled[kind])

    def record_requests(self, requests: dict[tuple[str, str], int]) -> None:
        """Counters only go up: add what the client counted since last time."""
        with self.lock:
            for key, total in requests.items():
                delta = total - self._seen_requests.get(key, 0)
                if delta > 0:
                    self.requests.labels(*key).inc(delta)
                self._seen_requests[key] = total

    def tick(self) -> None:
        self.last_tick = time.monotonic()
        self.ready = True

    def healthy(self, stale_after: float) -> bool:
        return self.ready and time.monotonic() - self.last_tick < stale_after

    def not_ready(self) -> str | None:
        """Why /readyz fails: no pass yet, or a Lease this replica cannot see."""
        if not self.ready:
            return "first pass not done"
        return self.blocked() if self.blocked is not None else None


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        metrics = self.server.metrics
        if self.path == "/metrics":
            self._send(200, generate_latest(metrics.registry), CONTENT_TYPE_LATEST)
        elif self.path == "/healthz":
            ok = metrics.healthy(self.server.stale_after)
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

    def __init__(self, address: tuple[str, int], metrics: Metrics, stale_after: float) -> None:
        super().__init__(address, _Handler)
        self.metrics = metrics
        self.stale_after = stale_after


def parse_address(address: str) -> tuple[str, int]:
    """':8080' -> ('', 8080) (all interfaces); '127.0.0.1:8080' -> as given."""
    host, _, port = address.rpartition(":")
    if not port.isdigit():
        raise ValueError(f"expected HOST:PORT or :PORT, got {address!r}")
    if int(port) > 65535:
        raise ValueError(f"port {port} is not between 0 and 65535")
    return host.strip("[]"), int(port)


def serve(address: str, metrics: Metrics, stale_after: float) -> ThreadingHTTPServer:
    server = _Server(parse_address(address), metrics, stale_after)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    host, port = server.server_address[:2]
    log.info("serving /metrics, /healthz and /readyz on %s:%s", host or "*", port)
    return server
