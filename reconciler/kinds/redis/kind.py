"""The planner of one Redis, in the order a pass applies the rules, and the
`Kind` value that joins them:
  1. being deleted: deletes its pods, then drops the finalizer once none remain;
  2. no finalizer yet: adds it before any pod exists;
  3. invalid spec: touches no pod, and names the field in status and an event;
  4. its claims (`claims`, made before their pods), pod changes
     (`changes`), its Service and its budget, none of it while
     ``spec.paused`` is true (its deletion still deletes its pods);
  5. the status (`status`), written only when it differs from what is stored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from reconciler.actions import (
    Action,
    EvictPod,
    PatchFinalizers,
)
from reconciler.health import Health
from reconciler.kinds.base import Bound, Kind, PlanInput, Planned
from reconciler.kinds.conditions import (
    Verdict,
    condition,
    is_true,
    observed_conditions,
    status_after,
)
from reconciler.kinds.redis import disruption, images, network, server, service, storage
from reconciler.kinds.redis.budgeted import budget_plan, budget_wait, kept, within_budget
from reconciler.kinds.redis.changes import (
    PodChanges,
    landed_only,
    nothing_created,
    paused,
    pod_changes,
)
from reconciler.kinds.redis.child_plans import (
    SERVICE_FIELD,
    needed_kinds,
    policy_plan,
    policy_verdict,
    service_plan,
    unseen_verdict,
)
from reconciler.kinds.redis.claims import ClaimPlan, claim_plan, claims_verdict, resizing_verdict
from reconciler.kinds.redis.identity import (
    COMPONENT,
    FINALIZER,
    RESOURCE,
    Redis,
    from_api,
    owner_of,
)
from reconciler.kinds.redis.order import ORDER
from reconciler.kinds.redis.pods import PodSet, desired_pod_names, pods_of
from reconciler.kinds.redis.removal import delete
from reconciler.kinds.redis.settings import DEFAULTS, redis_settings
from reconciler.kinds.redis.spec import FieldError, RedisSpec, num_error, validate
from reconciler.kinds.redis.status import (
    DEADLINE_EXCEEDED,
    PROGRESS_FIELD,
    DesiredStatus,
    counts_after,
    deadline_verdicts,
    degraded_verdict,
    desired_status,
    paused_verdict,
    pods_detail,
    progress_of,
    progressing_verdict,
    ready_verdict,
    status_patch,
    with_detail,
)
from reconciler.model import (
    Child,
    rfc3339,
)

DELETING = "Deleting"  # the state shown while its pods go


PODS_UNKNOWN = "PodsUnknown"  # the Degraded reason while the pod LIST is refused


def plan_deletion(redis: Redis, podset: PodSet) -> list[Action]:
    """Delete every pod it owns; release the finalizer once none is left."""
    actions: list[Action] = [
        delete(redis, pod, "Redis deleted", "Redis deleted")
        for pod in podset.owned
        if not pod.terminating
    ]
    if not podset.owned and FINALIZER in redis.finalizers:
        remaining = tuple(f for f in redis.finalizers if f != FINALIZER)
        actions.append(
            PatchFinalizers(redis.key, redis.resource_version, remaining, "all pods gone")
        )
    return actions


def finalizer_patch(redis: Redis) -> list[Action]:
    """Our finalizer first, so that no pod can exist unguarded."""
    if FINALIZER in redis.finalizers:
        return []
    finalizers = (*redis.finalizers, FINALIZER)
    why = "guard pods before creating them"
    return [PatchFinalizers(redis.key, redis.resource_version, finalizers, why)]


INVALID_SPEC = "InvalidSpec"


def plan_invalid(
    redis: Redis, errors: tuple[FieldError, ...], podset: PodSet, inp: PlanInput
) -> list[Action]:
    """Leave the pods alone; say which field is wrong, once."""
    message = "invalid spec: " + "; ".join(str(e) for e in errors)
    return plan_refused(redis, INVALID_SPEC, message, podset, inp)


def plan_refused(
    redis: Redis, reason: str, message: str, podset: PodSet, inp: PlanInput
) -> list[Action]:
    """Leave the pods alone, and say why in the status (``reason``): what
    the spec asks for is never made."""
    refused = Verdict(False, reason, message)
    verdicts = {
        "Ready": refused,
        "Progressing": refused,
        "Degraded": Verdict(True, reason, message),
    }
    live = [p for p in podset.by_index.values() if not p.terminating]
    counts = {"replicas": len(live), "readyReplicas": sum(1 for p in live if p.ready)}
    return status_patch(redis, desired_status(redis, counts, verdicts, inp))


@dataclass(frozen=True)
class _Live:
    """What the plan of one live Redis worked out that its status reads: in
    the plan, and again in a pass where one of its writes fails (`said`,
    with the input as it stands then), without working it out twice."""

    redis: Redis
    spec: RedisSpec
    podset: PodSet
    claims: ClaimPlan
    changes: PodChanges  # as planned: none while paused, no create while closing
    budget: Child | None

    def said(self, inp: PlanInput) -> _Said:
        """Rule 5, and the pod and child writes the status counts. While held
        (backing off, or after a failed write), only the writes that landed
        are counted, and none is planned."""
        redis, spec, podset, claims = self.redis, self.spec, self.podset, self.claims
        asked = landed_only(self.changes, inp.landed) if inp.gate.hold else self.changes
        changes, refusal = within_budget(redis, self.budget, asked, inp)
        counted = changes if refusal is None else kept(changes, refusal.pod)
        counts = counts_after(spec, counted)
        progressing = resizing_verdict(
            progressing_verdict(redis, spec, podset, counted, counts), spec, claims
        )
        if spec.paused:
            progressing = paused_verdict(spec, counts)
        progress = progress_of(redis, counts, counted, inp)
        svc = service_plan(redis, spec, inp)
        policy = policy_plan(redis, spec, inp)
        held = redis.name if svc.held_by_another else None
        waiting = budget_wait(self.budget, asked, changes) if progress.stalled else ""
        detail = "; ".join(
            d
            for d in (
                refusal.note if refusal else waiting,
                *claims.notes,
                pods_detail(podset, counted, inp.now, server.waiting_hints(spec.server)),
            )
            if d
        )
        needed = needed_kinds(child_names(redis), claims.reads_classes)
        degraded = claims_verdict(
            unseen_verdict(
                degraded_verdict(changes.missing.conflicts, inp.gate, held),
                needed,
                inp,
                redis.status,
            ),
            claims,
        )
        verdicts = {
            "Ready": ready_verdict(spec, counts),
            "Progressing": with_detail(progressing, detail),
            "Degraded": policy_verdict(degraded, redis.name if policy.held_by_another else None),
        }
        verdicts = deadline_verdicts(verdicts, progress, redis_settings(inp).progress_deadline)
        fields = {
            "replicas": counts.replicas,
            "readyReplicas": counts.ready,
            "updatedReplicas": counts.updated,
            PROGRESS_FIELD: rfc3339(progress.at),
            SERVICE_FIELD: svc.shown,
            network.FIELD: policy.shown,
            disruption.REFUSED_FIELD: refusal.to_status() if refusal else None,
        }
        stored = disruption.refusal_of(redis.status)
        said = disruption.refused_event(owner_of(redis), stored, refusal)
        status = status_patch(redis, desired_status(redis, fields, verdicts, inp), said)
        return _Said(status, changes, (*svc.actions, *policy.actions))

    def status_after(self, inp: PlanInput) -> list[Action]:
        return self.said(inp).status


@dataclass(frozen=True)
class _Said:
    """The status of one pass, and the writes it counts."""

    status: list[Action]
    changes: PodChanges  # less the evictions a budget holds
    children: tuple[Action, ...]  # its Service's and NetworkPolicy's


def plan_live(redis: Redis, spec: RedisSpec, podset: PodSet, inp: PlanInput) -> Planned:
    """Rules 4 and 5; their order is `order.ORDER`'s."""
    claims = claim_plan(redis, spec, inp)
    changes = pod_changes(redis, spec, podset, claims.going)
    if spec.paused:
        changes = paused(changes)
    elif inp.namespace_terminating:
        changes = nothing_created(changes)
    budget = inp.pods.child(disruption.KIND, redis.namespace, redis.name)
    live = _Live(redis, spec, podset, claims, changes, budget)
    said = live.said(inp)
    if inp.gate.hold:
        return Planned(said.status, live.status_after)
    writes = [
        *claims.writes,
        *said.changes.actions,
        *said.children,
        *said.status,
        *said.changes.repairs,
        *budget_plan(redis, spec, inp),
    ]
    return Planned(writes, live.status_after)


def planned(redis: Redis, inp: PlanInput) -> Planned:
    podset = pods_of(redis, inp.pods)
    if redis.deletion_timestamp:
        return Planned(plan_deletion(redis, podset))
    check = validate(redis, redis_settings(inp).image)
    guard = [] if inp.namespace_terminating else finalizer_patch(redis)
    if check.spec is None:
        invalid = Bound(plan_invalid, (redis, check.errors, podset))
        return Planned(guard + invalid(inp), invalid)
    not_allowed = images.refused(check.spec, redis_settings(inp).allowed_images)
    if not_allowed:
        message = "; ".join(not_allowed)
        refused = Bound(plan_refused, (redis, images.REASON, message, podset))
        return Planned(guard + refused(inp), refused)
    live = plan_live(redis, check.spec, podset, inp)
    return replace(live, actions=guard + live.actions)


def plan_unseen(redis: Redis, inp: PlanInput, why: str) -> list[Action]:
    """The pod LIST was refused: no pod is created or deleted on a partial
    view, and the status says so rather than stand as the last pass left it.
    Only Degraded changes (for this generation): the counts, Ready and
    Progressing are the last ones seen, and observedGeneration stays, since
    this generation was not acted on. An invalid spec keeps its InvalidSpec,
    which needs no pods to be true, and a Redis being deleted says Deleting."""
    if redis.deletion_timestamp or validate(redis, redis_settings(inp).image).spec is None:
        return []
    message = f"pods could not be listed, so none are created or deleted: {why}"
    observed = observed_conditions(redis.status)
    degraded = condition(
        "Degraded", Verdict(True, PODS_UNKNOWN, message), redis.generation, observed, inp.now
    )
    others = [c for t, c in observed.items() if t != "Degraded"]
    body = {
        "state": PODS_UNKNOWN,
        "message": message,
        "conditions": [*others, degraded.to_dict()],
    }
    return status_patch(redis, DesiredStatus(body, degraded))


def child_names(redis: Redis) -> tuple[tuple[str, str], ...]:
    """Its Service, its budget while it has two pods or more, with storage
    the claim of each desired pod, and its NetworkPolicy while it asks for
    one or its status names one."""
    names = [(service.KIND, redis.name)]
    num = redis.spec.get("num", 0)
    if num_error(num) is None and num >= disruption.MIN_PODS:
        names.append((disruption.KIND, redis.name))
    if redis.spec.get("storage") is not None:
        names += [(storage.KIND, storage.claim_name(pod)) for pod in desired_pod_names(redis)]
    if network.wanted(redis.spec, redis.status):
        names.append((network.KIND, redis.name))
    return tuple(names)


def health(redis: Redis, actions: Sequence[Action]) -> Health:
    """Read from the status as it will be stored: the planner wrote its
    summary there."""
    if redis.deletion_timestamp:
        return Health(DELETING, "deleting its pods, then releasing the finalizer", False, True)
    status = status_after(redis.status, actions, redis.key)
    conds = observed_conditions(status)
    return Health(
        str(status.get("state") or "Unknown"),
        str(status.get("message") or "no status written yet"),
        is_true(conds, "Degraded"),
        is_true(conds, "Progressing"),
        (conds.get("Progressing") or {}).get("reason") == DEADLINE_EXCEEDED,
        waiting=_asked_again(status, actions),
    )


def _asked_again(status: Mapping[str, Any], actions: Sequence[Action]) -> bool:
    """A refused eviction asked again: a budget we cannot read refuses it
    (another's, which may hold it for hours), so no pass of ours hurries
    it. One our own budget holds is not asked (`within_budget`): the
    disruption controller is about to count a pod, so it is progress."""
    refused = disruption.refusal_of(status)
    return refused is not None and any(
        isinstance(a, EvictPod) and a.name == refused.pod for a in actions
    )


KIND: Kind[Redis] = Kind(
    RESOURCE,
    COMPONENT,
    from_api,
    planned,
    health,
    plan_unseen=plan_unseen,
    order=ORDER,
    owns_pods=True,
    pod_names=desired_pod_names,
    children=(service.CHILD, disruption.CHILD, storage.CHILD, network.CHILD),
    child_names=child_names,
    settings=DEFAULTS,
)
