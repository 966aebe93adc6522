"""Posting core/v1 Events with aggregation by count.

The event name is derived from (object uid, type, reason, message), so the
same event reported again finds its earlier copy (409) and bumps ``count`` and
``lastTimestamp`` instead of adding a new object every pass, as kubelet does.
"""

from __future__ import annotations

import contextvars
import hashlib
import logging
import socket
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from reconciler.actions import POD_EVENT_VERBS, EventSpec, pod_event_message
from reconciler.client.errors import Conflict, KubeError
from reconciler.client.interface import Client
from reconciler.client.kube import EVENTS
from reconciler.model import rfc3339

log = logging.getLogger(__name__)
HOST = socket.gethostname()


def event_name(spec: EventSpec) -> str:
    digest = hashlib.sha256(
        "\0".join((spec.involved.uid, spec.type, spec.reason, spec.message)).encode()
    ).hexdigest()[:16]
    return f"{spec.involved.name}.{digest}"


def event_body(spec: EventSpec, now: datetime) -> dict[str, Any]:
    ts = rfc3339(now)
    ref = spec.involved
    return {
        "apiVersion": EVENTS.api_version,
        "kind": EVENTS.kind,
        "metadata": {"name": event_name(spec), "namespace": ref.namespace},
        "involvedObject": {
            "apiVersion": ref.api_version,
            "kind": ref.kind,
            "namespace": ref.namespace,
            "name": ref.name,
            "uid": ref.uid,
        },
        "type": spec.type,
        "reason": spec.reason,
        "message": spec.message[:1024],
        "source": {"component": spec.component, "host": HOST},
        "reportingComponent": spec.component,
        "reportingInstance": HOST,
        "firstTimestamp": ts,
        "lastTimestamp": ts,
        "count": 1,
    }


def post_event(kube: Client, spec: EventSpec, now: datetime) -> bool:
    """Best effort: an event that cannot be posted is logged, never fatal."""
    body = event_body(spec, now)
    ns, name = spec.involved.namespace, body["metadata"]["name"]
    try:
        try:
            kube.create(EVENTS, ns, body)
        except Conflict:
            old = kube.get(EVENTS, ns, name)
            kube.merge_patch(
                EVENTS,
                ns,
                name,
                {
                    "count": int(old.get("count") or 1) + 1,
                    "lastTimestamp": body["lastTimestamp"],
                    "metadata": {"resourceVersion": old["metadata"]["resourceVersion"]},
                },
            )
        return True
    except KubeError as exc:
        log.warning("[%s/%s] could not post event %s: %s", ns, spec.involved.name, spec.reason, exc)
        return False


# How long a stopping daemon waits for its queued events.
FLUSH_SECONDS = 10.0
# Events queued and not yet posted, at most; a pass that queues more waits
# for room, so a slow apiserver slows the pass as inline posting would, and
# memory stays bounded (about half a kilobyte an event).
QUEUE_LIMIT = 10_000


class EventQueue:
    """Posts events from a thread of its own, in the order they were queued.

    A pass's pod and status writes then do not wait for its events: at 200
    Redis, a quarter of a cold pass's requests were events, and the status is
    what a user and `sync --wait` read. client-go's recorder posts from a
    queue for the same reason. Each event keeps the time it was queued. The
    price is the recorder's too: a process killed before ``flush`` loses the
    events still queued (the status, rewritten by the next pass, keeps what
    they said).
    """

    def __init__(
        self,
        kube: Client,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        limit: int = QUEUE_LIMIT,
    ) -> None:
        self.kube = kube
        self.clock = clock
        self.limit = limit
        self._pending: deque[tuple[EventSpec, datetime]] = deque()
        self._posting = False
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def put(self, spec: EventSpec) -> None:
        """Queue one event; waits while the queue is full."""
        with self._changed:
            self._changed.wait_for(lambda: len(self._pending) < self.limit)
            self._pending.append((spec, self.clock()))
            self._changed.notify_all()
            if self._thread is None:
                # In the context of the pass that queued first: its cluster's name.
                self._thread = threading.Thread(
                    target=contextvars.copy_context().run,
                    args=(self._drain,),
                    name="events",
                    daemon=True,
                )
                self._thread.start()

    def flush(self, timeout: float | None = None) -> int:
        """Wait until every queued event is posted; the number left unposted
        when ``timeout`` ran out (0: all posted)."""
        with self._changed:
            self._changed.wait_for(lambda: not self._pending and not self._posting, timeout)
            return len(self._pending) + int(self._posting)

    def _drain(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: bool(self._pending))
                spec, queued = self._pending.popleft()
                self._posting = True
                self._changed.notify_all()
            try:
                post_event(self.kube, spec, queued)
            except Exception:  # a bug must not stop the events that follow
                log.exception("could not post event %s", spec.reason)
            finally:
                with self._changed:
                    self._posting = False
                    self._changed.notify_all()


@dataclass(frozen=True)
class EventSink:
    """Where a pass's events go: into ``queue``, which the caller flushes
    before it exits, or posted at once (stamped by ``clock``). None goes to
    a namespace being deleted (``quiet``): it would be refused there."""

    kube: Client
    clock: Callable[[], datetime]
    queue: EventQueue | None = None
    quiet: frozenset[str] = frozenset()

    def post(self, spec: EventSpec) -> None:
        if spec.involved.namespace in self.quiet:
            return
        if self.queue is not None:
            self.queue.put(spec)
        else:
            post_event(self.kube, spec, self.clock())


def merge_pod_events(events: list[EventSpec]) -> list[EventSpec]:
    """One CreatePod (or DeletePod) event per object, reason and why, per pass.

    "Created pod r-0: scale up" three times becomes "Created pods r-0, r-1,
    r-2: scale up": a third of the writes of a cold pass were events, and one
    line per batch is what `kubectl describe` readers want anyway. Events are
    grouped by their ``pods`` and ``why`` fields, never by their text; one
    without them is passed on as it is.
    """
    groups: dict[object, list[EventSpec]] = {}
    for i, ev in enumerate(events):
        mergeable = ev.pods and ev.why is not None and ev.reason in POD_EVENT_VERBS
        key = (ev.involved, ev.type, ev.reason, ev.component, ev.why) if mergeable else i
        groups.setdefault(key, []).append(ev)
    merged: list[EventSpec] = []
    for group in groups.values():  # in order of each group's first event
        first = group[0]
        if len(group) == 1 or first.why is None:
            merged.append(first)
            continue
        pods = tuple(name for ev in group for name in ev.pods)
        message = pod_event_message(first.reason, pods, first.why)
        merged.append(replace(first, pods=pods, message=message))
    return merged
