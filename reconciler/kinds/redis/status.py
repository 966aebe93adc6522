"""Rule 5: the status as the pods will be once this pass's writes land:
counts, Ready/Progressing/Degraded with reason and message, the progress
deadline, and the one-line summary `kubectl get` shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from reconciler.actions import (
    Action,
    EventSpec,
    PatchStatus,
)
from reconciler.backoff import BACKING_OFF, STATUS_FIELD, Gate, to_status
from reconciler.health import PAUSED, READY
from reconciler.kinds.base import PlanInput
from reconciler.kinds.conditions import (
    Verdict,
    condition,
    holder_field,
    observed_conditions,
    status_changes,
)
from reconciler.kinds.redis import service
from reconciler.kinds.redis.changes import REPLACING_ENDED, PodChanges
from reconciler.kinds.redis.identity import COMPONENT, CONTAINER_NAME, Redis, ref
from reconciler.kinds.redis.pods import PodSet, spec_drift
from reconciler.kinds.redis.settings import redis_settings
from reconciler.kinds.redis.spec import RedisSpec
from reconciler.model import (
    Condition,
    Pod,
    parse_time,
)

DEADLINE_EXCEEDED = "ProgressDeadlineExceeded"


PROGRESS_FIELD = "lastProgressTime"


# A pod still there this long after its grace period ran out is named as stuck.
STUCK_MARGIN = timedelta(seconds=30)


NAMED_MAX = 3  # pods named in a status message; the rest are counted


@dataclass(frozen=True)
class Counts:
    """The desired pods as they will be once this pass's writes land."""

    replicas: int
    ready: int
    updated: int


def counts_after(spec: RedisSpec, changes: PodChanges) -> Counts:
    remaining = [
        p for p in changes.desired.values() if not p.terminating and p.name not in changes.deleted
    ]
    created = len(changes.missing.creates)
    return Counts(
        replicas=len(remaining) + created,
        ready=sum(1 for p in remaining if p.ready),
        updated=sum(1 for p in remaining if spec_drift(p, spec) is None) + created,
    )


def ready_verdict(spec: RedisSpec, counts: Counts) -> Verdict:
    ok = counts.ready == counts.updated == counts.replicas == spec.num
    reason = "AllReplicasReady" if ok else "ReplicasNotReady"
    return Verdict(ok, reason, f"{counts.ready}/{spec.num} replicas ready")


def progressing_verdict(
    redis: Redis, spec: RedisSpec, podset: PodSet, changes: PodChanges, counts: Counts
) -> Verdict:
    """The first unfinished step: rollout, ended pods replaced, scaling up or
    down, pods becoming Ready."""
    num = spec.num
    observed = observed_conditions(redis.status).get("Progressing") or {}
    was_rolling = observed.get("reason") == "RollingUpdate"
    if changes.rollout.stale or (was_rolling and counts.updated < num):
        return Verdict(
            True, "RollingUpdate", f"{counts.updated}/{num} pods updated to the current spec"
        )
    ended = [p.name for _, p in sorted(changes.desired.items()) if p.ended]
    if ended:  # deleted this pass, or still going
        return Verdict(True, REPLACING_ENDED, f"replacing ended pods: {', '.join(ended)}")
    if counts.replicas < num:
        return Verdict(True, "ScalingUp", f"{counts.replicas}/{num} pods exist")
    if changes.surplus or any(p.terminating for p in podset.owned):
        return Verdict(True, "ScalingDown", f"removing pods beyond {num}")
    if counts.ready < num:
        waiting = num - counts.ready
        return Verdict(True, "WaitingForReady", f"waiting for {waiting} of {num} pods to be Ready")
    return Verdict(False, "Complete", f"all {num} replicas updated and ready")


def paused_verdict(spec: RedisSpec, counts: Counts) -> Verdict:
    """Progressing=False while paused: nothing moves, so no deadline runs out."""
    num = spec.num
    message = (
        "paused (spec.paused): no pod is created, deleted or replaced; "
        f"{counts.replicas}/{num} pods exist, {counts.updated}/{num} updated to the current spec, "
        f"{counts.ready}/{num} ready"
    )
    return Verdict(False, PAUSED, message)


def age(seconds: float) -> str:
    """A duration as kubectl shows ages, roughly: 90s, 3m, 5h."""
    if seconds < 120:
        return f"{int(seconds)}s"
    if seconds < 2 * 3600:
        return f"{int(seconds // 60)}m"
    return f"{int(seconds // 3600)}h"


def stuck_terminating(pod: Pod, now: datetime) -> str | None:
    """What holds a pod still there past its grace period and a margin: the
    deletionTimestamp is when the grace period ends."""
    ends = parse_time(pod.deletion_timestamp)
    if ends is None or now < ends + STUCK_MARGIN:
        return None
    since = (now - ends).total_seconds() + (pod.deletion_grace_seconds or 0)
    held = (
        f"held by finalizer {', '.join(pod.finalizers)}"
        if pod.finalizers
        else "its node has not confirmed that its containers stopped"
    )
    return f"{pod.name} terminating for {age(since)}: {held}"


EMPTY: Mapping[str, str] = {}  # no hints


def waiting_on(pod: Pod, hints: Mapping[str, str] = EMPTY) -> str | None:
    """Why a pod is not Ready, from its own status, when the reason is a
    problem rather than a start in progress: a container waiting on an image,
    a restart or its configuration (``hints`` adds what the spec says of that
    reason: the Secret its password comes from), or no node for it."""
    states = sorted(pod.container_states, key=lambda s: s.name != CONTAINER_NAME)
    waiting = next((s for s in states if s.waiting and s.reason not in STARTING), None)
    if waiting is not None:
        hint = hints.get(waiting.reason)
        return f"{waiting} ({hint})" if hint else str(waiting)
    scheduled = pod.condition("PodScheduled")
    if scheduled is not None and scheduled.status == "False" and scheduled.reason:
        detail = scheduled.message
        return f"{scheduled.reason}: {detail}" if detail else scheduled.reason
    return None


# Container waiting reasons of a pod that is starting normally.
STARTING = frozenset({"ContainerCreating", "PodInitializing", ""})


def pods_detail(
    podset: PodSet, changes: PodChanges, now: datetime, hints: Mapping[str, str] = EMPTY
) -> str:
    """The pods a rollout waits on, and why, for the status message: stuck
    terminating pods and desired pods whose own status names a problem."""
    notes: list[str] = []
    for pod in sorted(podset.owned, key=lambda p: p.name):
        if pod.terminating:
            note = stuck_terminating(pod, now)
        elif pod.name in changes.deleted or pod.ready:
            note = None
        else:
            why = waiting_on(pod, hints)
            note = f"{pod.name} not Ready: {why}" if why else None
        if note is not None:
            notes.append(note)
    shown = "; ".join(notes[:NAMED_MAX])
    more = len(notes) - NAMED_MAX
    return f"{shown}; and {more} more" if more > 0 else shown


def with_detail(verdict: Verdict, detail: str) -> Verdict:
    if not verdict.ok or not detail:
        return verdict
    return Verdict(verdict.ok, verdict.reason, f"{verdict.message}; {detail}")


@dataclass(frozen=True)
class Progress:
    """When the pods last moved, and whether a progressing Redis has waited
    longer than progress_deadline since: the time lives in the status, so
    that one-shot passes and the daemon agree."""

    at: datetime
    stalled: bool


def progress_of(redis: Redis, counts: Counts, changes: PodChanges, inp: PlanInput) -> Progress:
    """Moved: a pod written this pass, counts that differ from the stored
    ones, a new generation, or no record yet."""
    status = redis.status
    last = parse_time(status.get(PROGRESS_FIELD))
    stored = (status.get("replicas"), status.get("readyReplicas"), status.get("updatedReplicas"))
    moved = (
        last is None
        or bool(changes.actions)
        or status.get("observedGeneration") != redis.generation
        or stored != (counts.replicas, counts.ready, counts.updated)
    )
    if moved or last is None:  # the second, for the type checker
        return Progress(inp.now, False)
    deadline = timedelta(seconds=redis_settings(inp).progress_deadline)
    return Progress(last, inp.now - last > deadline)


def deadline_verdicts(
    verdicts: dict[str, Verdict], progress: Progress, deadline: float
) -> dict[str, Verdict]:
    """Past the deadline, a rollout that still progresses is called stuck:
    Progressing=False and, unless something worse is, Degraded, both with
    ProgressDeadlineExceeded and the step it is stuck at."""
    progressing = verdicts["Progressing"]
    if not progress.stalled or not progressing.ok:
        return verdicts
    message = f"no progress for {age(deadline)}: {progressing.message}"
    stuck = Verdict(False, DEADLINE_EXCEEDED, message)
    degraded = verdicts["Degraded"]
    if not degraded.ok:
        degraded = Verdict(True, DEADLINE_EXCEEDED, message)
    return {**verdicts, "Progressing": stuck, "Degraded": degraded}


def degraded_verdict(
    conflicts: tuple[str, ...], gate: Gate, service_held: str | None = None
) -> Verdict:
    """A conflict first (it needs a person), then backoff, then a failure of
    this pass. Otherwise the status is planned as it will be once this pass's
    writes land: if one fails, the status written after it says so."""
    failure = gate.failure if gate.hold else None
    if conflicts:
        names = ", ".join(conflicts)
        return Verdict(
            True, "PodConflict", f"pods not owned by this Redis hold desired names: {names}"
        )
    if service_held is not None:
        message = (
            f"service {service_held} is not owned by this Redis, so its pods get no stable "
            "names; delete or rename it"
        )
        return Verdict(True, service.CONFLICT, message)
    if failure is not None and gate.backing_off:
        retry = (to_status(failure) or {})["retryAfter"]
        message = (
            f"backing off until {retry} after {failure.count} consecutive failures: "
            f"{failure.message}"
        )
        return Verdict(True, BACKING_OFF, message)
    if failure is not None:
        return Verdict(True, failure.reason, failure.message)
    return Verdict(False, "AsExpected", "no problems seen")


def summary_of(verdicts: Mapping[str, Verdict]) -> Verdict:
    """One word and one line for `kubectl get`: the Degraded reason if any,
    else Paused, else the step in progress, else Ready. A step outranks
    Ready: while surplus pods go or claims grow, the desired pods are Ready,
    yet `Ready` in the column would say nothing is left to do."""
    degraded, ready, progressing = verdicts["Degraded"], verdicts["Ready"], verdicts["Progressing"]
    if degraded.ok:
        return degraded
    if progressing.reason == PAUSED or progressing.ok:
        return progressing
    return Verdict(True, READY, ready.message) if ready.ok else ready


@dataclass(frozen=True)
class DesiredStatus:
    body: dict[str, Any]
    degraded: Condition


def desired_status(
    redis: Redis, fields: Mapping[str, object], verdicts: Mapping[str, Verdict], inp: PlanInput
) -> DesiredStatus:
    """The status to store: counts and other fields, one condition per verdict, and the failure
    record while the object is held (cleared, by a null in the merge patch,
    once its writes are planned again)."""
    observed = observed_conditions(redis.status)
    gen = redis.generation
    conds = {t: condition(t, v, gen, observed, inp.now) for t, v in verdicts.items()}
    summary = summary_of(verdicts)
    body: dict[str, Any] = {
        "observedGeneration": gen,
        **fields,
        "state": summary.reason,
        "message": summary.message,
        "conditions": [c.to_dict() for c in conds.values()],
        **holder_field(inp.holder),
    }
    if inp.gate.hold or redis.failure is not None:
        body[STATUS_FIELD] = to_status(inp.gate.failure if inp.gate.hold else None)
    return DesiredStatus(body, conds["Degraded"])


def _degraded_event(redis: Redis, degraded: Condition) -> tuple[EventSpec, ...]:
    """Warn only when the Degraded condition changes, so a stuck object is not
    re-announced every pass."""
    if degraded.status != "True":
        return ()
    old = observed_conditions(redis.status).get("Degraded") or {}
    if (old.get("status"), old.get("reason"), old.get("message")) == (
        "True",
        degraded.reason,
        degraded.message,
    ):
        return ()
    return (EventSpec(ref(redis), "Warning", degraded.reason, degraded.message, COMPONENT),)


def status_patch(
    redis: Redis, desired: DesiredStatus, more: tuple[EventSpec, ...] = ()
) -> list[Action]:
    """Write the status only when it would change (a converged pass writes
    nothing); ``more`` are events that say what changed in it."""
    changed = status_changes(redis.status, desired.body)
    if not changed:
        return []
    events = _degraded_event(redis, desired.degraded) + more
    return [PatchStatus(redis.key, redis.resource_version, desired.body, events, changed)]
