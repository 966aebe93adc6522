"""One pass: observe -> plan -> apply, then the pod report and the summary.

Shared by `reconciler sync`, `reconciler plan` and each tick of
`reconciler run`, so the three modes cannot behave differently.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import Enum

from reconciler import backoff
from reconciler.actions import EventSpec, ObjRef, PatchStatus, Plan
from reconciler.buckets import Holder
from reconciler.client.interface import UNFENCED, Client, WriteFence
from reconciler.config import Config
from reconciler.engine import report as pod_report
from reconciler.engine.apply import ApplyOptions, Executor
from reconciler.engine.events import EventQueue, EventSink
from reconciler.engine.failures import pruned_field
from reconciler.engine.heap import collector_held
from reconciler.engine.observe import Observation, observe
from reconciler.engine.observe.churn import with_writes
from reconciler.engine.observe.lister import ListSettings
from reconciler.engine.observe.orphans import Refused
from reconciler.engine.plan import health_after, plan_pass
from reconciler.engine.state import State
from reconciler.health import Health
from reconciler.kinds import registry
from reconciler.model import PODS, ObjKey, Pod
from reconciler.result import ApplyReport, PassResult, Result, plural
from reconciler.snapshot import Snapshot

log = logging.getLogger(__name__)


class Mode(Enum):
    """What a pass does after planning."""

    PLAN = "plan"  # nothing: `reconciler plan` shows the plan
    DRY_RUN = "dry-run"  # log each action as it would be sent; write nothing
    APPLY = "apply"


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _backing_off(snapshot: Snapshot, plan: Plan) -> list[str]:
    """A line for each object the pass held back: cron and CI must not read a
    pass that left objects failing as a success."""
    lines = []
    for kind in registry.KINDS:
        for obj in snapshot.of(kind.name) or ():
            failure = obj.failure
            if obj.key in plan.backing_off and failure is not None:
                retry = (backoff.to_status(failure) or {})["retryAfter"]
                lines.append(
                    f"[{obj.key}] {kind.name} backing off until {retry} after "
                    f"{failure.count} consecutive failures: {failure.message}"
                )
    return lines


def _report_pods(state: State, pods: tuple[Pod, ...], pass_id: str, *, update: bool) -> None:
    """Log what changed in the pods since the previous view, then keep this view."""
    current = pod_report.views(pods)
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
            extra={"object": line.pod, "kind": PODS.kind, "pass_id": pass_id},
        )
    if update:
        state.pod_views = current


@dataclass(frozen=True, kw_only=True)
class PassSetup:
    """What every pass of one cluster is run with: built once (for the
    daemon by `run/manager.py`, for `sync` and `plan` by the command) and
    taken by the runner and `pass_once`. ``events``: a queue the caller
    flushes before it exits (else each pass posts its own). ``holder``: a
    sharded replica, which is also the pass's write fence, so what a pass
    observes and what it may write for cannot disagree; ``fence``: the
    fence of a pass that no holder fences (the leader's, or none)."""

    kube: Client
    config: Config
    mode: Mode = Mode.APPLY
    fence: WriteFence = UNFENCED
    holder: Holder | None = None
    events: EventQueue | None = None
    clock: Callable[[], datetime] = _utcnow

    def __post_init__(self) -> None:
        if self.holder is not None and self.fence is not UNFENCED:
            raise ValueError("a sharded pass is fenced by its holder, and by no other fence")

    @property
    def fenced_by(self) -> WriteFence:
        """What the pass asks before each object's writes."""
        return self.holder if self.holder is not None else self.fence

    @property
    def lists(self) -> ListSettings:
        """The settings observe asks its LISTs with."""
        return ListSettings.of(self.config)


@dataclass(frozen=True)
class _Pass:
    """One pass: its setup and its id in the log lines."""

    setup: PassSetup
    pass_id: str


def _holder(p: _Pass) -> str | None:
    holder = p.setup.holder
    return holder.name if holder is not None else None


def _sink(p: _Pass, snapshot: Snapshot) -> EventSink:
    s = p.setup
    return EventSink(s.kube, s.clock, s.events, snapshot.terminating)


def _apply(p: _Pass, plan: Plan, snapshot: Snapshot) -> ApplyReport:
    s = p.setup
    if s.mode is Mode.PLAN:
        return ApplyReport()
    dry_run = s.mode is Mode.DRY_RUN
    options = ApplyOptions(s.config.write_concurrency, dry_run, p.pass_id)
    return Executor(s.kube, _sink(p, snapshot), options, s.fenced_by).run(plan)


def _look(p: _Pass, state: State, selector: str | None) -> tuple[Observation, Plan]:
    """Observe and plan; ``state`` keeps the new snapshot and what it settled."""
    s = p.setup
    config, holder = s.config, s.holder
    obs = observe(
        s.kube,
        config.namespaces,
        selector,
        s.lists,
        previous=state.seen,
        scope=holder.scope() if holder is not None else None,
    )
    if holder is not None:
        holder.report(obs.mislabelled)
    # What observe reused is in the new snapshot; free the rest of the old
    # one before the plan is built (at scale, the two together set the peak).
    state.seen = None
    if obs.unreachable is None:
        for err in obs.errors:
            log.error("%s", err)
    snapshot, now = replace(obs.snapshot, pruned=dict(state.pruned)), s.clock()
    plan = plan_pass(snapshot, config, now, state.settled, _holder(p))
    state.seen, state.settled = snapshot, plan.settled
    return replace(obs, snapshot=snapshot), plan


def pass_once(setup: PassSetup, state: State) -> PassResult:
    """Run one pass and update ``state`` in place. Never raises for per-object
    errors; they are in the result, which decides the exit code. With
    ``setup.events``, the pass queues its events there instead of posting
    them itself. With ``setup.holder``, the pass sees only the objects of the
    buckets it holds; its fence is asked before each object's writes (for
    its bucket, when sharded)."""
    started, cpu = time.monotonic(), time.process_time()
    kube, config, mode = setup.kube, setup.config, setup.mode
    before = kube.stats.snapshot()
    p = _Pass(setup, uuid.uuid4().hex[:8])
    selector = config.pod_report_selector if config.pod_report else None

    with collector_held():
        obs, plan = _look(p, state, selector)
    snapshot = obs.snapshot
    look_wall, look_cpu = time.monotonic() - started, time.process_time() - cpu
    observed = ", ".join(f"{n} {k}" for k, n in obs.counts.items()) or "nothing observed"
    planned = plural(len(plan.actions), "action")
    log.info("pass %s: %s planned over %s", p.pass_id, planned, observed)

    applied = _apply(p, plan, snapshot)
    _expect_writes(state, applied)
    _say_pruned(state, applied, plan, _sink(p, snapshot))
    if mode is Mode.APPLY:
        _say_refused(obs.refused, _sink(p, snapshot))
    errors = list(obs.errors) + _backing_off(snapshot, plan)
    errors += [f"[{o.action.owner}] {o.action.describe()}: {o.error}" for o in applied.failed()]

    if config.pod_report and obs.report_pods is not None:
        _report_pods(state, obs.report_pods, p.pass_id, update=mode is not Mode.DRY_RUN)

    used = kube.stats.snapshot() - before
    return PassResult(
        p.pass_id,
        plan,
        applied,
        errors,
        obs.unreachable,
        duration=time.monotonic() - started,
        look_wall=look_wall,
        look_cpu=look_cpu,
        requests=used.total,
        by_code=used.by_code(),
        writes=used.writes,
        bytes_received=used.bytes_received,
        observed=dict(obs.counts),
        warnings=list(obs.warnings),
        health=_health(snapshot, plan, applied),
        malformed=list(obs.malformed),
        stale=list(obs.stale),
        refused=[r.kind for r in obs.refused],
    )


def _expect_writes(state: State, applied: ApplyReport) -> None:
    """The snapshot the next pass starts from counts this pass's writes in
    its churn: a kind it wrote past FETCH_MAX is listed in full at once."""
    if state.seen is None:
        return
    wrote = Counter(o.action.kind for o in applied.outcomes if o.result is Result.OK)
    state.seen = replace(state.seen, churn=with_writes(state.seen.churn, wrote))


PRUNED_REASON = "StatusFieldPruned"


def _say_pruned(state: State, applied: ApplyReport, plan: Plan, events: EventSink) -> None:
    """Name each status field the installed CRD prunes, once per process (a
    log line and a Warning event on an object it was dropped from), and keep
    it out of the plans from now on."""
    for kind_name, fields in applied.pruned.items():
        known = state.pruned.get(kind_name, frozenset())
        kind = next(k for k in registry.KINDS if k.name == kind_name)
        for name, key in sorted(fields.items()):
            if name in known:
                continue
            message = pruned_field(kind.resource, name)
            log.warning("[%s] %s", key, message, extra={"object": str(key), "kind": kind_name})
            owner = plan.owners.get(key)
            if owner is not None and owner.ref is not None:
                events.post(EventSpec(owner.ref, "Warning", PRUNED_REASON, message, kind.component))
        state.pruned[kind_name] = known | fields.keys()


OWNER_REFUSED_REASON = "OwnerReferenceRefused"
# Pods told per pass: each event costs a write, and whoever made one such
# pod can make thousands (each is still named in the pass's warnings).
REFUSED_EVENTS_MAX = 10


def _say_refused(refused: Sequence[Refused], events: EventSink) -> None:
    """A Warning event on each pod whose owner we will not ask for, so that
    `kubectl describe pod` says why we leave it alone."""
    for r in refused[:REFUSED_EVENTS_MAX]:
        pod = r.pod
        ref = ObjRef(PODS.api_version, PODS.kind, pod.namespace, pod.name, pod.uid)
        component = next(k.component for k in registry.KINDS if k.name == r.kind)
        events.post(EventSpec(ref, "Warning", OWNER_REFUSED_REASON, str(r), component))


def _health(snapshot: Snapshot, plan: Plan, applied: ApplyReport) -> dict[ObjKey, Health]:
    """As planned, except where a write failed: then as the status written
    after the failure says."""
    planned = {id(a) for a in plan.actions}
    after = [
        o.action
        for o in applied.outcomes
        if o.result is Result.OK
        and isinstance(o.action, PatchStatus)
        and id(o.action) not in planned
    ]
    return {**plan.health, **health_after(snapshot, after)}
