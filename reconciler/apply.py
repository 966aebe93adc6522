"""The executor: the only code that writes to the cluster.

Actions of one object run in order (finalizer before pods, status last);
different objects run concurrently on a bounded pool. An object whose write
fails stops there, and nothing else is affected: 404 and 409 mean "see it
again next pass", anything else is a failure recorded for backoff.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime

from reconciler.actions import (
    POD_EVENT_VERBS,
    Action,
    CreatePod,
    DeletePod,
    EventSpec,
    ObjRef,
    PatchFinalizers,
    PatchStatus,
    Plan,
    pod_event_message,
)
from reconciler.constants import REDIS_COMPONENT, XCA_COMPONENT
from reconciler.events import post_event
from reconciler.kube import ApiError, Kube, KubeError
from reconciler.model import Failure, ObjKey

log = logging.getLogger(__name__)

OK, GONE, CONFLICT, FAILED = "ok", "gone", "conflict", "failed"
SKIPPED, DRY_RUN = "skipped", "dry-run"


@dataclass(frozen=True)
class Outcome:
    action: Action
    result: str
    error: str | None = None
    reason: str = "ReconcileError"
    conflict_pod: ObjKey | None = None  # a foreign pod that holds a desired name


@dataclass
class ApplyReport:
    outcomes: list[Outcome] = field(default_factory=list)

    def counts(self) -> Counter[tuple[str, str, str]]:
        return Counter((o.action.kind, o.action.verb, o.result) for o in self.outcomes)

    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.result == FAILED]


class _Failed(Exception):
    def __init__(self, message: str, reason: str, conflict_pod: ObjKey | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.conflict_pod = conflict_pod


FAILURE_REASONS = {
    "create": "FailedCreatePod",
    "delete": "FailedDeletePod",
    "patch-finalizers": "FailedUpdateFinalizers",
    "patch-status": "FailedUpdateStatus",
}


class _Progress:
    """Logs "applied X/Y objects" every PROGRESS_EVERY seconds of a long pass."""

    EVERY = 5.0

    def __init__(self, total: int, pass_id: str) -> None:
        self.total, self.done, self.pass_id = total, 0, pass_id
        self.started = self.last = time.monotonic()

    def step(self) -> None:
        self.done += 1
        now = time.monotonic()
        if now - self.last >= self.EVERY and self.done < self.total:
            self.last = now
            rate = self.done / (now - self.started)
            log.info(
                "pass %s: applied %d/%d objects (%.0f/s, about %.0fs left)",
                self.pass_id,
                self.done,
                self.total,
                rate,
                (self.total - self.done) / rate,
                extra={"pass_id": self.pass_id},
            )


class Executor:
    def __init__(
        self,
        kube: Kube,
        *,
        concurrency: int,
        clock: Callable[[], datetime],
        dry_run: bool = False,
        pass_id: str = "",
        refs: Mapping[ObjKey, ObjRef] | None = None,
        keep_going: Callable[[], bool] | None = None,
    ) -> None:
        self.kube = kube
        self.refs = refs or {}
        # Checked before each object: a replica that lost its lease mid-pass
        # must stop writing at once (another may have taken over).
        self.keep_going = keep_going
        self.concurrency = max(1, concurrency)
        self.clock = clock
        self.dry_run = dry_run
        self.pass_id = pass_id

    def run(self, plan: Plan) -> ApplyReport:
        report = ApplyReport()
        groups = plan.by_owner()
        if not groups:
            return report
        if self.dry_run:
            for owner, actions in groups.items():
                for action in actions:
                    self._log(owner, action, DRY_RUN)
                    report.outcomes.append(Outcome(action, DRY_RUN))
            return report
        workers = min(self.concurrency, len(groups))
        progress = _Progress(len(groups), self.pass_id)
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="apply") as pool:
            for outcomes in pool.map(lambda item: self._run_owner(*item), groups.items()):
                report.outcomes.extend(outcomes)
                progress.step()
        return report

    def _log(self, owner: ObjKey, action: Action, result: str, error: str | None = None) -> None:
        level = logging.WARNING if result == FAILED else logging.INFO
        text = action.describe() + (f": {error}" if error else "")
        log.log(
            level,
            "[%s] %s -> %s",
            owner,
            text,
            result,
            extra={
                "object": str(owner),
                "kind": owner.kind,
                "action": action.verb,
                "result": result,
                "pass_id": self.pass_id,
            },
        )

    def _run_owner(self, owner: ObjKey, actions: list[Action]) -> list[Outcome]:
        if self.keep_going is not None and not self.keep_going():
            return [Outcome(a, SKIPPED) for a in actions]
        outcomes: list[Outcome] = []
        new_rv: dict[str, str] = {}  # our own writes bump the owner's resourceVersion
        pod_events: list[EventSpec] = []  # posted once, merged, after the pod writes
        try:
            self._run_actions(owner, actions, outcomes, new_rv, pod_events)
        finally:
            self._events(merge_pod_events(pod_events))
        return outcomes

    def _run_actions(
        self,
        owner: ObjKey,
        actions: list[Action],
        outcomes: list[Outcome],
        new_rv: dict[str, str],
        pod_events: list[EventSpec],
    ) -> None:
        for i, action in enumerate(actions):
            try:
                result = self._do(action, new_rv, pod_events)
            except _Failed as exc:
                self._log(owner, action, FAILED, str(exc))
                outcomes.append(Outcome(action, FAILED, str(exc), exc.reason, exc.conflict_pod))
                self._warn(owner, action, str(exc), exc.reason)
                outcomes.extend(Outcome(a, SKIPPED) for a in actions[i + 1 :])
                break
            self._log(owner, action, result)
            outcomes.append(Outcome(action, result))
            if result == CONFLICT:
                outcomes.extend(Outcome(a, SKIPPED) for a in actions[i + 1 :])
                break

    def _warn(self, owner: ObjKey, action: Action, error: str, reason: str) -> None:
        """Failures are reported on the object too, where `kubectl describe` shows them."""
        ref = self.refs.get(owner)
        if ref is None:
            return
        why = reason if reason == "PodConflict" else FAILURE_REASONS.get(action.verb, reason)
        component = REDIS_COMPONENT if owner.kind == "Redis" else XCA_COMPONENT
        post_event(
            self.kube,
            EventSpec(ref, "Warning", why, f"{action.describe()}: {error}", component),
            self.clock,
        )

    def _events(self, events: tuple[EventSpec, ...] | list[EventSpec]) -> None:
        for ev in events:
            post_event(self.kube, ev, self.clock)

    def _do(self, action: Action, new_rv: dict[str, str], pod_events: list[EventSpec]) -> str:
        kube = self.kube
        try:
            if isinstance(action, CreatePod):
                return self._create_pod(action, pod_events)
            if isinstance(action, DeletePod):
                try:
                    kube.delete("Pod", action.namespace, action.name, action.uid)
                except ApiError as exc:
                    if exc.status == 404:
                        return GONE
                    raise
                if action.event:
                    pod_events.append(action.event)
                return OK
            if isinstance(action, PatchFinalizers | PatchStatus):
                rv = new_rv.get(action.resource_version, action.resource_version)
                key = action.owner
                if isinstance(action, PatchFinalizers):
                    body = {
                        "metadata": {"finalizers": list(action.finalizers), "resourceVersion": rv}
                    }
                    sub = ""
                else:
                    body = {"metadata": {"resourceVersion": rv}, "status": dict(action.status)}
                    sub = "status"
                try:
                    out = kube.merge_patch(key.kind, key.namespace, key.name, body, sub)
                except ApiError as exc:
                    if exc.status == 404:
                        return GONE
                    if exc.status == 409:
                        return CONFLICT
                    raise
                new_rv[action.resource_version] = str(
                    (out.get("metadata") or {}).get("resourceVersion", rv)
                )
                if isinstance(action, PatchStatus):
                    self._events(action.events)
                return OK
        except ApiError as exc:
            reason = "InvalidObject" if exc.status == 422 else "ReconcileError"
            raise _Failed(f"{exc.status} {exc.reason}: {exc.message}", reason) from None
        except KubeError as exc:
            raise _Failed(str(exc), "ReconcileError") from None
        raise TypeError(f"unknown action {action!r}")

    def _create_pod(self, action: CreatePod, pod_events: list[EventSpec]) -> str:
        kube = self.kube
        target = action.target
        try:
            kube.create("Pod", target.namespace, action.manifest)
        except ApiError as exc:
            if exc.status != 409:
                raise
            # AlreadyExists: fine if it is ours (an earlier, interrupted pass).
            try:
                pod = kube.get("Pod", target.namespace, target.name)
            except ApiError as get_exc:
                if get_exc.status == 404:
                    return CONFLICT  # deleted meanwhile; next pass creates it
                raise
            refs = (pod.get("metadata") or {}).get("ownerReferences") or []
            if any(r.get("controller") and r.get("uid") == action.owner_uid for r in refs):
                return OK
            raise _Failed(
                f"pod {target.name} already exists and is not owned by this Redis",
                "PodConflict",
                target,
            ) from None
        if action.event:
            pod_events.append(action.event)
        return OK


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


# ------------------------------------------------------------ failure memory


def backoff_seconds(count: int, threshold: int, base: float, cap: float) -> float:
    """0 below the threshold, then base, 2*base, 4*base ... capped."""
    if count < threshold:
        return 0.0
    return min(cap, base * math.pow(2, count - threshold))


def next_failures(
    previous: Mapping[ObjKey, Failure],
    plan: Plan,
    report: ApplyReport,
    now: float,
    *,
    threshold: int,
    base: float,
    cap: float,
) -> tuple[dict[ObjKey, Failure], list[tuple[ObjKey, Failure]]]:
    """Carry failure counts across passes; never drop an object.

    Returns the new map and the objects whose count is at or past the
    threshold after this pass. Each of them gets a Warning event naming the
    count and the next attempt, so every failed retry under backoff is visible
    (retries are rare by then, so these events are too).
    """
    failed: dict[ObjKey, Outcome] = {}
    for outcome in report.outcomes:
        if outcome.result == FAILED:
            failed.setdefault(outcome.action.owner, outcome)
    out: dict[ObjKey, Failure] = {}
    backing_off: list[tuple[ObjKey, Failure]] = []
    for key, outcome in failed.items():
        count = (previous[key].count if key in previous else 0) + 1
        delay = backoff_seconds(count, threshold, base, cap)
        rec = Failure(count, outcome.error or "unknown error", outcome.reason, now + delay)
        out[key] = rec
        if count >= threshold:
            backing_off.append((key, rec))
    for key, rec in previous.items():
        # Backing off: only a status write may have run; the count stands.
        if key in plan.backing_off and key not in failed:
            out[key] = rec
    return out, backing_off
