"""The write limit: the first pass's writes, sent by a client with no logic.

Which requests a first pass sends is decided by the reconciler's planner *and*
executor (the executor merges events, for instance), so the harness asks them:
it plans the new objects with ``reconciler.engine.plan.plan`` and runs the real
``Executor`` against a recorder instead of a cluster, before the clock starts.
The timed part is nothing but HTTP: 8 threads, one keep-alive gzip session
each, one object's requests in the executor's order, objects concurrently.

What the reconciler spends on top of this is its own overhead; what this costs
is the apiserver's price for the writes on this machine. Differences from the
executor, all in the limit's favour: no resourceVersion preconditions (the
recorder cannot know the new versions), no LISTs, no error handling, no
logging.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bench.kubeapi import MERGE_PATCH, Api, Request, parallel
from reconciler.actions import Plan
from reconciler.client.request_head import path_of
from reconciler.config import Config
from reconciler.engine.apply import Executor
from reconciler.engine.events import EventSink
from reconciler.engine.plan import plan_pass
from reconciler.kinds.registry import KINDS
from reconciler.model import ResourceType
from reconciler.snapshot import Snapshot

WORKERS = 8  # the reconciler's default write_concurrency


@dataclass(frozen=True)
class WriteResult:
    wall: float
    requests: int
    failures: int
    by_kind: dict[str, int]


def _unguarded(body: Mapping[str, Any]) -> dict[str, Any]:
    """The body without its resourceVersion precondition."""
    out = dict(body)
    meta = dict(out.get("metadata") or {})
    meta.pop("resourceVersion", None)
    if meta:
        out["metadata"] = meta
    else:
        out.pop("metadata", None)
    return out


class Recorder:
    """Stands in for ``reconciler.client.kube.Kube``: records writes, answers success."""

    path = staticmethod(path_of)

    def __init__(self) -> None:
        self.requests: list[Request] = []

    def create(self, res: ResourceType, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
        self.requests.append(Request("POST", path_of(res, namespace), dict(body)))
        return {}

    def merge_patch(
        self, res: ResourceType, namespace: str, name: str, body: Mapping[str, Any], sub: str = ""
    ) -> dict[str, Any]:
        path = path_of(res, namespace, name, sub)
        self.requests.append(Request("PATCH", path, _unguarded(body), MERGE_PATCH))
        return {}

    def __getattr__(self, name: str) -> Any:
        raise TypeError(f"a first pass over new objects does not call Kube.{name}")


def first_pass_requests(
    redis: Sequence[Mapping[str, Any]], xcas: Sequence[Mapping[str, Any]]
) -> list[list[Request]]:
    """Per object, in executor order, the requests of a first pass over new objects."""
    now = datetime.now(UTC)
    raw = {"Redis": redis, "Xca": xcas}
    objects = {kind.name: tuple(map(kind.decode, raw[kind.name])) for kind in KINDS}
    snapshot = Snapshot(objects, pods=())
    the_plan = plan_pass(snapshot, Config(), now)
    groups: list[list[Request]] = []
    for actions in the_plan.by_owner().values():
        recorder = Recorder()
        events = EventSink(recorder, lambda: now)  # type: ignore[arg-type]
        executor = Executor(recorder, events)  # type: ignore[arg-type]
        executor.run(Plan(tuple(actions), owners=the_plan.owners))
        groups.append(recorder.requests)
    return groups


def _kind(req: Request) -> str:
    resource = req.path.rsplit("/namespaces/", 1)[1].split("/")
    sub = "/status" if resource[-1] == "status" else ""
    return f"{req.method} {resource[1]}{sub}"


def fire(api: Api, groups: Sequence[Sequence[Request]], workers: int = WORKERS) -> WriteResult:
    """Send every group's requests in order, ``workers`` groups at a time."""

    def send_all(group: Sequence[Request]) -> int:
        return sum(1 for req in group if not api.send(req).ok)

    started = time.monotonic()
    failures = sum(parallel(send_all, groups, workers))
    wall = time.monotonic() - started
    by_kind = Counter(_kind(req) for group in groups for req in group)
    return WriteResult(wall, sum(by_kind.values()), failures, dict(sorted(by_kind.items())))
