"""The write limit: the first pass's writes, sent by a client with no logic.

The request bodies come from the reconciler's own planner and event code,
computed *before* the clock starts, so the timed part is nothing but HTTP:
8 threads, one keep-alive gzip session each, one object's requests in order
(finalizer, pods, events, status), exactly as the executor orders them. What
the reconciler spends on top of this is its own overhead; what this costs is
the apiserver's price for the writes on this machine.

Differences from the executor, all in the limit's favour: no resourceVersion
preconditions (they need the previous response), no error handling, no
logging, and no LISTs.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bench.kubeapi import CORE_PATH, MERGE_PATCH, REDIS_PATH, XCA_PATH, Api, Request, parallel
from reconciler.actions import Action, CreatePod, EventSpec, PatchFinalizers, PatchStatus
from reconciler.config import Config
from reconciler.events import event_body
from reconciler.model import ObjKey, redis_from_api, xca_from_api
from reconciler.plan import plan_redis, plan_xca

WORKERS = 8  # the reconciler's default write_concurrency


@dataclass(frozen=True)
class WriteResult:
    wall: float
    requests: int
    failures: int
    by_kind: dict[str, int]


def _object_path(key: ObjKey, sub: str = "") -> str:
    prefix, plural = (REDIS_PATH, "redis") if key.kind == "Redis" else (XCA_PATH, "xcas")
    return f"{prefix}/namespaces/{key.namespace}/{plural}/{key.name}" + (f"/{sub}" if sub else "")


def _event(spec: EventSpec, now: datetime) -> Request:
    ns = spec.involved.namespace
    return Request("POST", f"{CORE_PATH}/namespaces/{ns}/events", event_body(spec, now))


def to_requests(action: Action, now: datetime) -> list[Request]:
    """The HTTP requests the executor sends for one action when all goes well."""
    if isinstance(action, CreatePod):
        ns = action.target.namespace
        out = [Request("POST", f"{CORE_PATH}/namespaces/{ns}/pods", action.manifest)]
        return out + ([_event(action.event, now)] if action.event else [])
    if isinstance(action, PatchFinalizers):
        body = {"metadata": {"finalizers": list(action.finalizers)}}
        return [Request("PATCH", _object_path(action.owner), body, MERGE_PATCH)]
    if isinstance(action, PatchStatus):
        body = {"status": dict(action.status)}
        patch = Request("PATCH", _object_path(action.owner, "status"), body, MERGE_PATCH)
        return [patch, *(_event(ev, now) for ev in action.events)]
    raise TypeError(f"a first pass over new objects does not {action!r}")


def first_pass_requests(
    redis: Sequence[Mapping[str, Any]], xcas: Sequence[Mapping[str, Any]]
) -> list[list[Request]]:
    """Per object, in executor order, the requests of a first pass over new objects."""
    now, config = datetime.now(UTC), Config()
    groups = [
        [
            req
            for act in plan_redis(redis_from_api(obj), (), config, now)
            for req in to_requests(act, now)
        ]
        for obj in redis
    ]
    groups += [
        [req for act in plan_xca(xca_from_api(obj), now) for req in to_requests(act, now)]
        for obj in xcas
    ]
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
