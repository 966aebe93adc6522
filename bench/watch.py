"""Watch-based observers of one namespace, for waits and for end-state timing.

Polling with LISTs of thousands of pods would load the 2-core machine that is
being measured and only see the end state to within the poll interval. A
watch costs the apiserver almost nothing and reports each change as it
happens, so the harness knows exactly when every pod became Ready and when a
contender first reached the common end state. (The reconciler itself does not
watch; only the harness does.)
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import requests

from bench.kubeapi import CORE_PATH, POLICY_PATH, REDIS_PATH, XCA_PATH, Api

log = logging.getLogger(__name__)

Judge = Callable[[Mapping[str, Any]], bool]
WATCH_SECONDS = 240  # server-side timeout of one watch request; it is then renewed


class WatchExpired(Exception):
    """The watch's resourceVersion is too old (410): LIST again."""


@dataclass
class Tracker:
    """Keeps, for every object of one collection, whether it is "good" per ``judge``.

    Counts are maintained incrementally so a check costs O(1), however many
    thousand objects there are.
    """

    api: Api
    path: str  # collection path, e.g. /api/v1/namespaces/ns/pods
    judge: Judge
    board: Board
    good: dict[str, bool] = field(default_factory=dict)
    good_count: int = 0
    resource_version: str = ""

    @property
    def total(self) -> int:
        return len(self.good)

    def _set(self, name: str, ok: bool | None) -> None:
        """Record one object's state (None: it is gone). Caller holds the board lock."""
        old = self.good.pop(name, None)
        self.good_count -= bool(old)
        if ok is not None:
            self.good[name] = ok
            self.good_count += ok

    def relist(self, session: requests.Session) -> None:
        resp = session.get(self.api.server + self.path, timeout=self.api.timeout)
        resp.raise_for_status()
        page = resp.json()
        with self.board.changed:
            self.good.clear()
            self.good_count = 0
            for obj in page.get("items") or ():
                self._set(obj["metadata"]["name"], self.judge(obj))
            self.resource_version = page["metadata"]["resourceVersion"]
            self.board.touch()

    def apply_event(self, event: Mapping[str, Any]) -> None:
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise WatchExpired
            raise RuntimeError(f"watch {self.path}: {obj}")
        meta = obj.get("metadata") or {}
        with self.board.changed:
            if kind == "BOOKMARK":
                self.resource_version = meta.get("resourceVersion", self.resource_version)
                return
            self._set(meta["name"], None if kind == "DELETED" else self.judge(obj))
            self.resource_version = meta.get("resourceVersion", self.resource_version)
            self.board.touch()

    def watch_once(self, session: requests.Session) -> None:
        params = {
            "watch": "1",
            "resourceVersion": self.resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(WATCH_SECONDS),
        }
        with session.get(
            self.api.server + self.path,
            params=params,
            stream=True,
            timeout=(10, WATCH_SECONDS + 30),
        ) as resp:
            if resp.status_code == 410:
                raise WatchExpired
            resp.raise_for_status()
            self.board.register(resp)
            for line in resp.iter_lines(chunk_size=1 << 16):
                if self.board.stopped:
                    return
                if line:
                    self.apply_event(json.loads(line))

    def run(self) -> None:
        """LIST, then WATCH until the board is stopped; LIST again on 410."""
        session = self.api.new_session()
        self.relist(session)
        self.board.ready.release()
        while not self.board.stopped:
            try:
                self.watch_once(session)
            except WatchExpired:
                self.relist(session)
            except (requests.RequestException, ValueError, AttributeError) as exc:
                if self.board.stopped:
                    return
                log.warning("watch %s: %s; retrying", self.path, exc)
                time.sleep(0.5)


@dataclass
class Board:
    """Trackers of one namespace sharing a lock, plus an end-state clock.

    ``end_state`` is evaluated after every change; the first time it holds is
    recorded, so the time-to-end-state is known to within one watch event.
    """

    end_state: Callable[[Board], bool] | None = None
    changed: threading.Condition = field(default_factory=threading.Condition)
    ready: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(0))
    trackers: dict[str, Tracker] = field(default_factory=dict)
    reached_at: float | None = None
    started: bool = False
    stopped: bool = False
    _streams: list[requests.Response] = field(default_factory=list)
    _threads: list[threading.Thread] = field(default_factory=list)

    def touch(self) -> None:
        """Called with the lock held after any change."""
        if (
            self.started
            and self.reached_at is None
            and self.end_state is not None
            and self.end_state(self)
        ):
            self.reached_at = time.monotonic()
        self.changed.notify_all()

    def register(self, resp: requests.Response) -> None:
        with self.changed:
            self._streams.append(resp)
            if self.stopped:  # stop() ran while this watch was being opened
                _shutdown(resp)

    def track(self, name: str, api: Api, path: str, judge: Judge) -> None:
        tracker = Tracker(api, path, judge, self)
        self.trackers[name] = tracker
        thread = threading.Thread(target=tracker.run, name=f"watch-{name}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def start(self, timeout: float = 30.0) -> None:
        """Wait until every tracker has its initial LIST, so no event is missed."""
        for _ in self.trackers:
            if not self.ready.acquire(timeout=timeout):
                raise TimeoutError("a watch did not start")
        with self.changed:
            self.started = True

    def wait(self, predicate: Callable[[Board], bool], timeout: float) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: predicate(self), timeout=timeout)

    def __getitem__(self, name: str) -> Tracker:
        return self.trackers[name]

    def stop(self) -> None:
        with self.changed:
            self.stopped = True
            streams = list(self._streams)
        for resp in streams:
            _shutdown(resp)
        for thread in self._threads:
            thread.join(timeout=5)


def _shutdown(resp: requests.Response) -> None:
    """Closing a response does not wake a thread blocked reading it; shutting
    its socket down does, at once."""
    with contextlib.suppress(Exception):
        resp.raw.connection.sock.shutdown(socket.SHUT_RDWR)


# ---------------------------------------------------------------- judges


def pod_ok(pod: Mapping[str, Any]) -> bool:
    """Ready, not terminating, and controlled by an owner."""
    meta = pod.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return False
    if not any(r.get("controller") for r in meta.get("ownerReferences") or ()):
        return False
    conds = (pod.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


def redis_ok(finalizer: str | None) -> Judge:
    """Finalizer present (``None``: any finalizer), and status.replicas and
    status.readyReplicas both equal spec.num."""

    def judge(obj: Mapping[str, Any]) -> bool:
        finalizers = (obj.get("metadata") or {}).get("finalizers") or ()
        has = bool(finalizers) if finalizer is None else finalizer in finalizers
        want = (obj.get("spec") or {}).get("num", 0)
        status = obj.get("status") or {}
        return has and status.get("replicas") == want and status.get("readyReplicas") == want

    return judge


def xca_ok(obj: Mapping[str, Any]) -> bool:
    return (obj.get("status") or {}).get("active") is True


def pods_settled(expected: int) -> Callable[[Board], bool]:
    """At least ``expected`` pods, every one Ready (the wait between passes)."""

    def check(board: Board) -> bool:
        pods = board["pods"]
        return pods.total >= expected and pods.good_count == pods.total

    return check


def owned(obj: Mapping[str, Any]) -> bool:
    """Controlled by an owner (a Redis's Service or budget)."""
    refs = (obj.get("metadata") or {}).get("ownerReferences") or ()
    return any(r.get("controller") for r in refs)


def common_end_state(
    n: int, pods_per_redis: int = 3, children: bool = False
) -> Callable[[Board], bool]:
    """The end state every contender must reach: all pods Ready, finalizers,
    Redis status written with every pod counted Ready, every Xca active;
    with ``children``, a Service and a disruption budget owned by each Redis."""

    def check(board: Board) -> bool:
        pods, redis, xcas = board["pods"], board["redis"], board["xcas"]
        made = not children or (
            board["services"].good_count == n and board["budgets"].good_count == n
        )
        return (
            pods.total == pods.good_count == n * pods_per_redis
            and redis.good_count == n
            and xcas.good_count == n
            and made
        )

    return check


def namespace_board(
    api: Api,
    namespace: str,
    n: int,
    finalizer: str | None,
    with_objects: bool = True,
    children: bool = False,
) -> Board:
    """Trackers for the namespace's pods (and Redis/Xca objects; with
    ``children``, the Services and budgets), started and ready."""
    end_state = common_end_state(n, children=children) if with_objects else None
    board = Board(end_state=end_state)
    board.track("pods", api, f"{CORE_PATH}/namespaces/{namespace}/pods", pod_ok)
    if with_objects:
        board.track("redis", api, f"{REDIS_PATH}/namespaces/{namespace}/redis", redis_ok(finalizer))
        board.track("xcas", api, f"{XCA_PATH}/namespaces/{namespace}/xcas", xca_ok)
    if with_objects and children:
        board.track("services", api, f"{CORE_PATH}/namespaces/{namespace}/services", owned)
        budgets = f"{POLICY_PATH}/namespaces/{namespace}/poddisruptionbudgets"
        board.track("budgets", api, budgets, owned)
    board.start()
    return board
