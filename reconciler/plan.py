"""The planner: (snapshot, config, now) -> actions. Pure: no I/O, no clock.

A converged cluster yields an empty plan. Everything a pass decides lives
here, so the rules are table-tested without a cluster.

Redis rules, in order, for each object:
  1. being deleted: delete its pods; drop the finalizer once none remain;
  2. no finalizer yet: add it before any pod exists;
  3. invalid spec: touch no pod, report the field in status and an event;
  4. create missing pods, delete surplus ones, replace one stale pod at a time
     while every other desired pod is Ready;
  5. status from the pods as they will be after those actions, written only
     when it differs from what is stored.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from reconciler.actions import (
    Action,
    CreatePod,
    DeletePod,
    EventSpec,
    ObjRef,
    PatchFinalizers,
    PatchStatus,
    Plan,
    pod_event,
)
from reconciler.config import Config
from reconciler.constants import (
    CONTAINER_NAME,
    FINALIZER,
    LABEL_INSTANCE,
    LABEL_MANAGED_BY,
    LABEL_NAME,
    MANAGED_BY,
    NUM_MAX,
    REDIS_API_VERSION,
    REDIS_COMPONENT,
    REDIS_KIND,
    TEMPLATE_HASH_ANNOTATION,
    XCA_API_VERSION,
    XCA_COMPONENT,
    XCA_KIND,
)
from reconciler.model import Condition, Failure, ObjKey, Pod, Redis, Snapshot, Xca
from reconciler.spec import RedisSpec, validate_redis_spec

CONDITION_TYPES = ("Ready", "Progressing", "Degraded")


def rfc3339(now: datetime) -> str:
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def template_hash(spec: RedisSpec) -> str:
    """Hash of everything in the pod template that the spec controls."""
    doc = {"image": spec.image, "port": spec.port, "container": CONTAINER_NAME}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:10]


def pod_manifest(redis: Redis, spec: RedisSpec, index: int) -> dict[str, Any]:
    name = f"{redis.name}-{index}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": redis.namespace,
            "labels": {
                LABEL_NAME: "redis",
                LABEL_INSTANCE: redis.name,
                LABEL_MANAGED_BY: MANAGED_BY,
            },
            "annotations": {TEMPLATE_HASH_ANNOTATION: template_hash(spec)},
            "ownerReferences": [
                {
                    "apiVersion": REDIS_API_VERSION,
                    "kind": REDIS_KIND,
                    "name": redis.name,
                    "uid": redis.uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "containers": [
                {
                    "name": CONTAINER_NAME,
                    "image": spec.image,
                    "imagePullPolicy": "IfNotPresent",
                    "ports": [{"name": "redis", "containerPort": spec.port, "protocol": "TCP"}],
                }
            ]
        },
    }


def _pod_index(redis_name: str, pod_name: str) -> int | None:
    """The index in ``<redis>-<index>``, or None. Called per pod per pass: no regex."""
    prefix_len = len(redis_name) + 1
    if not pod_name.startswith(redis_name) or pod_name[prefix_len - 1 : prefix_len] != "-":
        return None
    tail = pod_name[prefix_len:]
    if not tail.isascii() or not tail.isdigit() or (tail[0] == "0" and len(tail) > 1):
        return None
    return int(tail)


def _redis_ref(redis: Redis) -> ObjRef:
    return ObjRef(REDIS_API_VERSION, REDIS_KIND, redis.namespace, redis.name, redis.uid)


def _event(redis: Redis, type_: str, reason: str, message: str) -> EventSpec:
    return EventSpec(_redis_ref(redis), type_, reason, message, REDIS_COMPONENT)


def _pod_event(redis: Redis, reason: str, pod_name: str, why: str) -> EventSpec:
    return pod_event(_redis_ref(redis), reason, (pod_name,), why, REDIS_COMPONENT)


def _in_backoff(failure: Failure | None, config: Config, now: datetime) -> bool:
    return (
        failure is not None
        and failure.count >= config.failure_threshold
        and now.timestamp() < failure.retry_at
    )


# ---------------------------------------------------------------- Redis


class PodIndex:
    """Pods by controlling owner and by name, built once per pass.

    Looking pods up per Redis instead of scanning them keeps a pass linear in
    the number of objects (a scan per Redis is quadratic at 1000 Redis).
    """

    def __init__(self, pods: Iterable[Pod]) -> None:
        self.by_owner: dict[str, list[Pod]] = {}
        self.by_name: dict[tuple[str, str], Pod] = {}
        for pod in pods:
            if pod.controller_uid:
                self.by_owner.setdefault(pod.controller_uid, []).append(pod)
            self.by_name[(pod.namespace, pod.name)] = pod


@dataclass(frozen=True)
class _PodSet:
    """A Redis's pods, sorted into the groups the rules talk about."""

    owned: tuple[Pod, ...]  # controller ref is this Redis
    by_index: Mapping[int, Pod]  # owned, desired-shaped names, by index
    foreign: Mapping[str, Pod]  # pods holding a desired name but owned by another


def _desired_count(redis: Redis) -> int:
    """How many names to check for foreign pods, before the spec is validated."""
    num = redis.spec.get("num")
    return min(num, NUM_MAX) if isinstance(num, int) and not isinstance(num, bool) else 0


def _pods_of(redis: Redis, index: PodIndex) -> _PodSet:
    owned = tuple(index.by_owner.get(redis.uid, ()))
    by_index: dict[int, Pod] = {}
    for pod in owned:
        idx = _pod_index(redis.name, pod.name)
        if idx is not None:
            by_index[idx] = pod
    foreign: dict[str, Pod] = {}
    for i in range(_desired_count(redis)):
        pod = index.by_name.get((redis.namespace, f"{redis.name}-{i}"))
        if pod is not None and pod.controller_uid != redis.uid:
            foreign[pod.name] = pod
    return _PodSet(owned, by_index, foreign)


def _plan_redis_deletion(redis: Redis, podset: _PodSet) -> list[Action]:
    actions: list[Action] = []
    for pod in podset.owned:
        if not pod.terminating:
            actions.append(
                DeletePod(
                    redis.key,
                    pod.namespace,
                    pod.name,
                    pod.uid,
                    "Redis deleted",
                    _pod_event(redis, "DeletePod", pod.name, "Redis deleted"),
                )
            )
    if not podset.owned and FINALIZER in redis.finalizers:
        remaining = tuple(f for f in redis.finalizers if f != FINALIZER)
        actions.append(
            PatchFinalizers(redis.key, redis.resource_version, remaining, "all pods gone")
        )
    return actions


def _condition(
    type_: str,
    ok: bool,
    reason: str,
    message: str,
    generation: int,
    observed: Mapping[str, Mapping[str, Any]],
    now: datetime,
) -> Condition:
    """Build a condition, keeping lastTransitionTime unless the status flips."""
    status = "True" if ok else "False"
    old = observed.get(type_)
    ltt = rfc3339(now)
    if old is not None and old.get("status") == status and old.get("lastTransitionTime"):
        ltt = str(old["lastTransitionTime"])
    return Condition(type_, status, reason, message, ltt, generation)


def _observed_conditions(status: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    out: dict[str, Mapping[str, Any]] = {}
    for c in status.get("conditions") or ():
        if isinstance(c, Mapping) and isinstance(c.get("type"), str):
            out[c["type"]] = c
    return out


def _status_differs(observed: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    return any(observed.get(k) != v for k, v in desired.items())


def _degraded_event(
    redis: Redis, observed: Mapping[str, Mapping[str, Any]], degraded: Condition
) -> tuple[EventSpec, ...]:
    """Warn only when the Degraded condition changes, so a stuck object is not
    re-announced every pass."""
    if degraded.status != "True":
        return ()
    old = observed.get("Degraded") or {}
    if (old.get("status"), old.get("reason"), old.get("message")) == (
        "True",
        degraded.reason,
        degraded.message,
    ):
        return ()
    return (_event(redis, "Warning", degraded.reason, degraded.message),)


def _create_reason(index: int, status: Mapping[str, Any], observed_conds: Mapping[str, Any]) -> str:
    progressing = observed_conds.get("Progressing") or {}
    if progressing.get("reason") == "RollingUpdate":
        return "spec changed"
    recorded = status.get("replicas")
    if isinstance(recorded, int) and index < recorded:
        return "deleted by hand"
    return "scale up"


def _plan_redis_live(
    redis: Redis,
    spec: RedisSpec,
    podset: _PodSet,
    failure: Failure | None,
    backing_off: bool,
    now: datetime,
) -> list[Action]:
    actions: list[Action] = []
    observed_conds = _observed_conditions(redis.status)
    want_hash = template_hash(spec)
    pod_actions: list[Action] = []

    # Surplus: owned pods outside the desired set (scale down, odd names).
    deleted: set[str] = set()
    for pod in podset.owned:
        idx = _pod_index(redis.name, pod.name)
        if pod.terminating or (idx is not None and idx < spec.num):
            continue
        pod_actions.append(
            DeletePod(
                redis.key,
                pod.namespace,
                pod.name,
                pod.uid,
                "scale down",
                _pod_event(redis, "DeletePod", pod.name, f"scale down to {spec.num}"),
            )
        )
        deleted.add(pod.name)

    # Missing: create, unless a foreign or terminating pod holds the name.
    created: set[str] = set()
    conflicts: list[str] = []
    for idx in range(spec.num):
        name = f"{redis.name}-{idx}"
        if name in podset.foreign:
            conflicts.append(name)
            continue
        if idx in podset.by_index:
            continue
        why = _create_reason(idx, redis.status, observed_conds)
        pod_actions.append(
            CreatePod(
                redis.key,
                pod_manifest(redis, spec, idx),
                _pod_event(redis, "CreatePod", name, why),
            )
        )
        created.add(name)

    # Rolling update: one stale pod at a time, only while all others are Ready.
    live = {i: p for i, p in podset.by_index.items() if i < spec.num}
    stale = sorted(i for i, p in live.items() if not p.terminating and p.template_hash != want_hash)
    rolled = False
    if stale and not created and not conflicts:
        victim = stale[0]
        others_ready = all(
            i in live and not live[i].terminating and live[i].ready
            for i in range(spec.num)
            if i != victim
        )
        if others_ready:
            pod = live[victim]
            pod_actions.append(
                DeletePod(
                    redis.key,
                    pod.namespace,
                    pod.name,
                    pod.uid,
                    "spec changed",
                    _pod_event(redis, "DeletePod", pod.name, "spec changed"),
                )
            )
            deleted.add(pod.name)
            rolled = True

    # Status as it will be once these actions land.
    remaining = [p for i, p in live.items() if not p.terminating and p.name not in deleted]
    replicas = len(remaining) + len(created)
    ready = sum(1 for p in remaining if p.ready)
    updated = sum(1 for p in remaining if p.template_hash == want_hash) + len(created)
    terminating = any(p.terminating for p in podset.owned)
    scaling_down = bool(deleted - ({live[stale[0]].name} if rolled else set()))

    was_rolling = (observed_conds.get("Progressing") or {}).get("reason") == "RollingUpdate"
    if stale or rolled or (was_rolling and updated < spec.num):
        prog = ("RollingUpdate", f"{updated}/{spec.num} pods updated to the current spec")
    elif replicas < spec.num:
        prog = ("ScalingUp", f"{replicas}/{spec.num} pods exist")
    elif scaling_down or terminating:
        prog = ("ScalingDown", f"removing pods beyond {spec.num}")
    elif ready < spec.num:
        prog = ("WaitingForReady", f"{ready}/{spec.num} pods ready")
    else:
        prog = None

    if conflicts:
        degraded = (
            True,
            "PodConflict",
            "pods not owned by this Redis hold desired names: " + ", ".join(conflicts),
        )
    elif backing_off and failure is not None:
        degraded = (
            True,
            "BackingOff",
            f"{failure.count} consecutive failures, retrying later: {failure.message}",
        )
    elif failure is not None:
        degraded = (True, failure.reason, failure.message)
    else:
        degraded = (False, "AsExpected", "no problems seen")

    gen = redis.generation
    all_ready = ready == spec.num and updated == spec.num and replicas == spec.num
    conds = (
        _condition(
            "Ready",
            all_ready,
            "AllReplicasReady" if all_ready else "ReplicasNotReady",
            f"{ready}/{spec.num} replicas ready",
            gen,
            observed_conds,
            now,
        ),
        _condition(
            "Progressing",
            prog is not None,
            prog[0] if prog else "Complete",
            prog[1] if prog else f"all {spec.num} replicas updated and ready",
            gen,
            observed_conds,
            now,
        ),
        _condition("Degraded", degraded[0], degraded[1], degraded[2], gen, observed_conds, now),
    )
    desired = {
        "observedGeneration": gen,
        "replicas": replicas,
        "readyReplicas": ready,
        "updatedReplicas": updated,
        "conditions": [c.to_dict() for c in conds],
    }

    if not backing_off:
        actions.extend(pod_actions)
    if _status_differs(redis.status, desired):
        actions.append(
            PatchStatus(
                redis.key,
                redis.resource_version,
                desired,
                _degraded_event(redis, observed_conds, conds[2]),
            )
        )
    return actions


def _plan_redis_invalid(
    redis: Redis, errors: Iterable[object], podset: _PodSet, now: datetime
) -> list[Action]:
    """Leave the pods alone; say which field is wrong, once."""
    message = "invalid spec: " + "; ".join(str(e) for e in errors)
    observed_conds = _observed_conditions(redis.status)
    gen = redis.generation
    live = [p for p in podset.by_index.values() if not p.terminating]
    conds = (
        _condition("Ready", False, "InvalidSpec", message, gen, observed_conds, now),
        _condition("Progressing", False, "InvalidSpec", message, gen, observed_conds, now),
        _condition("Degraded", True, "InvalidSpec", message, gen, observed_conds, now),
    )
    desired = {
        "observedGeneration": gen,
        "replicas": len(live),
        "readyReplicas": sum(1 for p in live if p.ready),
        "conditions": [c.to_dict() for c in conds],
    }
    if not _status_differs(redis.status, desired):
        return []
    return [
        PatchStatus(
            redis.key,
            redis.resource_version,
            desired,
            _degraded_event(redis, observed_conds, conds[2]),
        )
    ]


def plan_redis(
    redis: Redis,
    pods: Sequence[Pod] | PodIndex,
    config: Config,
    now: datetime,
    failure: Failure | None = None,
) -> list[Action]:
    index = pods if isinstance(pods, PodIndex) else PodIndex(pods)
    podset = _pods_of(redis, index)
    if redis.deletion_timestamp:
        return _plan_redis_deletion(redis, podset)
    actions: list[Action] = []
    if FINALIZER not in redis.finalizers:
        actions.append(
            PatchFinalizers(
                redis.key,
                redis.resource_version,
                (*redis.finalizers, FINALIZER),
                "guard pods before creating them",
            )
        )
    spec, errors = validate_redis_spec(redis.spec, config.image)
    if spec is None:
        return actions + _plan_redis_invalid(redis, errors, podset, now)
    backing_off = _in_backoff(failure, config, now)
    return actions + _plan_redis_live(redis, spec, podset, failure, backing_off, now)


def orphan_pods(redises: Sequence[Redis], pods: Sequence[Pod]) -> list[Action]:
    """Delete our pods whose controlling Redis no longer exists.

    Safe only with complete LISTs; pods are listed before Redis objects, so a
    pod's owner, created before the pod, is always in the Redis LIST.
    """
    known = {r.uid for r in redises}
    actions: list[Action] = []
    for pod in pods:
        if (
            pod.labels.get(LABEL_MANAGED_BY) == MANAGED_BY
            and pod.controller_kind == REDIS_KIND
            and pod.controller_uid
            and pod.controller_uid not in known
            and not pod.terminating
        ):
            actions.append(DeletePod(pod.key, pod.namespace, pod.name, pod.uid, "owner gone"))
    return actions


# ---------------------------------------------------------------- Xca


def plan_xca(xca: Xca, now: datetime) -> list[Action]:
    """Seed 003: activate once; an active Xca costs nothing."""
    if xca.deletion_timestamp or xca.status.get("active") is True:
        return []
    ref = ObjRef(XCA_API_VERSION, XCA_KIND, xca.namespace, xca.name, xca.uid)
    event = EventSpec(ref, "Normal", "Activated", f"Xca {xca.name} activated", XCA_COMPONENT)
    status = {"active": True, "last_update_time": rfc3339(now)}
    return [PatchStatus(xca.key, xca.resource_version, status, (event,))]


# ---------------------------------------------------------------- pass


def plan(snapshot: Snapshot, config: Config, now: datetime) -> Plan:
    """Plan one pass. A kind whose LIST failed (None) gets no writes, and
    neither does anything that depends on it."""
    actions: list[Action] = []
    backing_off: set[ObjKey] = set()
    if snapshot.redis is not None and snapshot.pods is not None:
        index = PodIndex(snapshot.pods)
        for redis in sorted(snapshot.redis, key=lambda r: r.key):
            failure = snapshot.failures.get(redis.key)
            if _in_backoff(failure, config, now):
                backing_off.add(redis.key)
            actions.extend(plan_redis(redis, index, config, now, failure))
        actions.extend(orphan_pods(snapshot.redis, snapshot.pods))
    if snapshot.xcas is not None:
        for xca in sorted(snapshot.xcas, key=lambda x: x.key):
            if _in_backoff(snapshot.failures.get(xca.key), config, now):
                backing_off.add(xca.key)
                continue
            actions.extend(plan_xca(xca, now))
    return Plan(tuple(actions), frozenset(backing_off))
