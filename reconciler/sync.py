"""One pass: observe -> plan -> apply, then the pod report and the summary.

Shared by `reconciler sync`, `reconciler plan` and each tick of
`reconciler run`, so the three modes cannot behave differently.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from reconciler import report as pod_report
from reconciler.actions import EventSpec, ObjRef, Plan
from reconciler.apply import ApplyReport, Executor, next_failures
from reconciler.config import Config
from reconciler.constants import (
    REDIS_API_VERSION,
    REDIS_COMPONENT,
    XCA_API_VERSION,
    XCA_COMPONENT,
)
from reconciler.events import post_event
from reconciler.kube import Kube
from reconciler.model import Failure, ObjKey, Snapshot
from reconciler.observe import observe
from reconciler.plan import plan as make_plan
from reconciler.state import State

log = logging.getLogger(__name__)

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3


@dataclass
class PassResult:
    pass_id: str
    plan: Plan
    applied: ApplyReport
    errors: list[str] = field(default_factory=list)
    unreachable: str | None = None
    duration: float = 0.0
    requests: int = 0
    writes: int = 0
    bytes_received: int = 0
    by_code: dict[str, int] = field(default_factory=dict)
    observed: dict[str, int] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        if self.unreachable:
            return EXIT_UNREACHABLE
        return EXIT_FAILED if self.errors else EXIT_OK

    def action_counts(self) -> dict[str, int]:
        counts: Counter[str] = Counter()
        for (kind, verb, result), n in self.applied.counts().items():
            counts[f"{kind}/{verb}/{result}"] += n
        return dict(sorted(counts.items()))

    def summary(self) -> dict[str, Any]:
        return {
            "pass_id": self.pass_id,
            "result": {0: "ok", 1: "errors", 3: "unreachable"}[self.exit_code],
            "duration_seconds": round(self.duration, 3),
            "observed": self.observed,
            "planned": len(self.plan.actions),
            "actions": self.action_counts(),
            "backing_off": sorted(str(k) for k in self.plan.backing_off),
            "errors": self.errors,
            "api_requests": self.requests,
            "api_writes": self.writes,
            "api_requests_by_code": self.by_code,
            "bytes_received": self.bytes_received,
        }

    def one_line(self) -> str:
        acts = ", ".join(f"{k}={v}" for k, v in self.action_counts().items()) or "no changes"
        return (
            f"pass {self.pass_id} {self.summary()['result']} in {self.duration:.2f}s: "
            f"{acts}; {len(self.errors)} errors; {self.requests} API requests"
        )


def _utcnow() -> datetime:
    return datetime.now(UTC)


def object_refs(snapshot: Snapshot) -> dict[ObjKey, ObjRef]:
    """involvedObject references for events about observed Redis and Xca objects."""
    refs = {
        r.key: ObjRef(REDIS_API_VERSION, "Redis", r.namespace, r.name, r.uid)
        for r in snapshot.redis or ()
    }
    refs.update(
        {
            x.key: ObjRef(XCA_API_VERSION, "Xca", x.namespace, x.name, x.uid)
            for x in snapshot.xcas or ()
        }
    )
    return refs


def _backoff_event(refs: dict[ObjKey, ObjRef], key: ObjKey, failure: Failure) -> EventSpec | None:
    """A Warning saying the object is now retried less often (never dropped)."""
    ref = refs.get(key)
    if ref is None:
        return None
    delay = max(0, round(failure.retry_at - time.time()))
    return EventSpec(
        ref,
        "Warning",
        "BackingOff",
        f"{failure.count} consecutive failures; next attempt in {delay}s: {failure.message}",
        REDIS_COMPONENT if key.kind == "Redis" else XCA_COMPONENT,
    )


def run_pass(
    kube: Kube,
    config: Config,
    state: State,
    *,
    dry_run: bool = False,
    apply: bool = True,
    clock: Callable[[], datetime] = _utcnow,
    keep_going: Callable[[], bool] | None = None,
) -> PassResult:
    """Run one pass and update ``state`` in place. Never raises for per-object
    errors; they are in the result, which decides the exit code."""
    started = time.monotonic()
    before = kube.stats.snapshot()
    pass_id = uuid.uuid4().hex[:8]
    selector = config.pod_report_selector if config.pod_report else None

    obs = observe(kube, config.namespaces, selector, state.conflict_pods)
    if obs.unreachable is None:
        for err in obs.errors:
            log.error("%s", err)
    now = clock()
    snapshot = Snapshot(obs.snapshot.redis, obs.snapshot.xcas, obs.snapshot.pods, state.failures)
    the_plan = make_plan(snapshot, config, now)
    log.info(
        "pass %s: %d actions planned over %s",
        pass_id,
        len(the_plan.actions),
        ", ".join(f"{n} {k}" for k, n in obs.counts.items()) or "nothing observed",
    )

    applied = ApplyReport()
    refs = object_refs(snapshot)
    if apply:
        executor = Executor(
            kube,
            concurrency=config.write_concurrency,
            clock=clock,
            dry_run=dry_run,
            pass_id=pass_id,
            refs=refs,
            keep_going=keep_going,
        )
        applied = executor.run(the_plan)

    errors = list(obs.errors)
    errors += [f"[{o.action.owner}] {o.action.describe()}: {o.error}" for o in applied.failed()]

    if apply and not dry_run:
        failures, backing_off = next_failures(
            state.failures,
            the_plan,
            applied,
            time.time(),
            threshold=config.failure_threshold,
            base=config.backoff_base,
            cap=config.backoff_max,
        )
        state.failures = failures
        state.conflict_pods -= obs.gone
        state.conflict_pods |= {o.conflict_pod for o in applied.failed() if o.conflict_pod}
        for key, rec in backing_off:
            log.warning("[%s] %d consecutive failures; backing off", key, rec.count)
            if (event := _backoff_event(refs, key, rec)) is not None:
                post_event(kube, event, clock)

    if config.pod_report and obs.report_pods is not None:
        current = pod_report.views(obs.report_pods)
        lines = pod_report.diff(state.pod_views, current)
        level = logging.INFO
        if state.pod_views is None and len(lines) > pod_report.FIRST_VIEW_INFO_LINES:
            level = logging.DEBUG
            log.info(
                "pod report: first view of %d pods; pod lines are at DEBUG, and "
                "changes are reported from the next pass (across runs with --state-file)",
                len(current),
                extra={"pass_id": pass_id},
            )
        for line in lines:
            log.log(
                level,
                "[%s] pod %s",
                line.pod,
                line.message,
                extra={"object": line.pod, "kind": "Pod", "pass_id": pass_id},
            )
        if not dry_run:
            state.pod_views = current

    used = kube.stats.snapshot() - before
    result = PassResult(
        pass_id,
        the_plan,
        applied,
        errors,
        obs.unreachable,
        duration=time.monotonic() - started,
        requests=used.total,
        by_code=used.by_code(),
        writes=used.writes,
        bytes_received=used.bytes_received,
        observed=dict(obs.counts),
    )
    return result
