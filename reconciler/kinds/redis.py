"""Redis: every rule of the kind, in the order a pass applies them.

A Redis asks for ``spec.num`` pods named ``<name>-<index>``, each running one
container with ``spec.image`` on ``spec.port``. For each object, a pass:
  1. being deleted: deletes its pods, then drops the finalizer once none remain;
  2. no finalizer yet: adds it before any pod exists;
  3. invalid spec: touches no pod, and names the field in status and an event;
  4. creates missing pods, deletes surplus ones, replaces one stale pod at a
     time while every other desired pod is Ready (stale: its containers differ
     from the spec's, whatever its annotation says), and puts back labels,
     annotation and controller reference changed by hand;
  5. writes the status as the pods will be after those actions, only when it
     differs from what is stored.
Pods it does not own are never touched, even when they hold a desired name.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from reconciler.actions import (
    Action,
    CreatePod,
    DeletePod,
    EventSpec,
    ObjRef,
    PatchFinalizers,
    PatchPodMetadata,
    PatchStatus,
    pod_event,
)
from reconciler.backoff import BACKING_OFF, STATUS_FIELD, Failure, Gate, from_status, to_status
from reconciler.constants import LABEL_INSTANCE, LABEL_MANAGED_BY, LABEL_NAME, MANAGED_BY
from reconciler.health import READY, Health
from reconciler.kinds.base import Kind, PlanInput
from reconciler.kinds.conditions import (
    Verdict,
    condition,
    is_true,
    observed_conditions,
    status_after,
    status_differs,
)
from reconciler.model import (
    Condition,
    Container,
    ObjKey,
    OwnerRef,
    Pod,
    PodLookup,
    ResourceType,
    mapping,
    meta_of,
    object_fields,
)

GROUP = "myapp.demo.kubebuilder.io"
VERSION = "v1"
RESOURCE = ResourceType(GROUP, VERSION, "Redis", "redis")
COMPONENT = "redis-controller"
FINALIZER = f"{GROUP}/pods"
TEMPLATE_HASH_ANNOTATION = f"{GROUP}/template-hash"

PORT_MIN = 6370
PORT_MAX = 6380
PORT_DEFAULT = 6379
NUM_MAX = 100
DELETING = "Deleting"  # the state shown while its pods go
PODS_UNKNOWN = "PodsUnknown"  # the Degraded reason while the pod LIST is refused
DRIFT = "Drift"  # the reason of the event that says a pod was put back
NAME_MAX = 63  # the name is each pod's app.kubernetes.io/instance label value
CONTAINER_NAME = "redis"
APP_NAME = "redis"  # the app.kubernetes.io/name of its pods

# A conservative image reference: [registry[:port]/]path[:tag][@digest].
IMAGE_PATTERN = (
    r"^[a-z0-9]([a-z0-9._/-]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9._-]+)*"
    r"(:[A-Za-z0-9_][A-Za-z0-9._-]{0,127})?(@sha256:[a-f0-9]{64})?$"
)
_IMAGE_RE = re.compile(IMAGE_PATTERN)


# ------------------------------------------------------------ the object


@dataclass(frozen=True)
class Redis:
    namespace: str
    name: str
    uid: str
    resource_version: str
    generation: int
    deletion_timestamp: str | None
    finalizers: tuple[str, ...]
    spec: Mapping[str, Any]
    status: Mapping[str, Any]
    failure: Failure | None = None  # status.backoff: consecutive failed passes

    @property
    def key(self) -> ObjKey:
        return ObjKey(RESOURCE.kind, self.namespace, self.name)


def from_api(obj: Mapping[str, Any]) -> Redis:
    """Decode a Redis; the spec is kept raw and validated by `validate_spec`,
    because objects can bypass the CRD schema."""
    meta = meta_of(obj)
    status = mapping(obj.get("status"))
    return Redis(
        **object_fields(meta),
        finalizers=tuple(f for f in meta.get("finalizers") or () if isinstance(f, str)),
        spec=mapping(obj.get("spec")),
        status=status,
        failure=from_status(status),
    )


# ------------------------------------------------------------ the spec


@dataclass(frozen=True)
class RedisSpec:
    port: int
    num: int
    image: str


@dataclass(frozen=True)
class FieldError:
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass(frozen=True)
class SpecCheck:
    """The typed spec, or the errors naming each bad field (then ``spec`` is None)."""

    spec: RedisSpec | None
    errors: tuple[FieldError, ...]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _port_error(port: Any) -> FieldError | None:
    if not _is_int(port):
        return FieldError("spec.port", f"must be an integer, got {port!r}")
    if not PORT_MIN <= port <= PORT_MAX:
        return FieldError("spec.port", f"must be between {PORT_MIN} and {PORT_MAX}, got {port}")
    return None


def _num_error(num: Any) -> FieldError | None:
    if not _is_int(num):
        return FieldError("spec.num", f"must be an integer, got {num!r}")
    if not 0 <= num <= NUM_MAX:
        return FieldError("spec.num", f"must be between 0 and {NUM_MAX}, got {num}")
    return None


def _image_error(image: Any) -> FieldError | None:
    if not isinstance(image, str):
        return FieldError("spec.image", f"must be a string, got {image!r}")
    if not _IMAGE_RE.match(image):
        return FieldError("spec.image", f"is not a valid image reference: {image!r}")
    return None


def _name_error(name: str) -> FieldError | None:
    if len(name) <= NAME_MAX:
        return None
    return FieldError(
        "metadata.name",
        f"must be at most {NAME_MAX} characters, got {len(name)}: it is the "
        f"{LABEL_INSTANCE} label value of each pod",
    )


def validate(redis: Redis, default_image: str) -> SpecCheck:
    """The spec's check, and the name's: the CRD refuses a name too long for a
    label value, but an object created before that rule can still exist."""
    check = validate_spec(redis.spec, default_image)
    name_error = _name_error(redis.name)
    if name_error is None:
        return check
    return SpecCheck(None, (name_error, *check.errors))


def validate_spec(spec: Mapping[str, Any], default_image: str) -> SpecCheck:
    """Re-check every field the rules rely on, independent of the CRD schema,
    so a bad object gets a message naming its field instead of pods the
    apiserver would reject."""
    port = spec.get("port", PORT_DEFAULT)
    num = spec.get("num", 0)
    image = spec.get("image") or default_image
    errors = tuple(
        e for e in (_port_error(port), _num_error(num), _image_error(image)) if e is not None
    )
    if errors:
        return SpecCheck(None, errors)
    return SpecCheck(RedisSpec(port=port, num=num, image=image), ())


# ------------------------------------------------------------ its pods


@lru_cache(maxsize=256)
def template_hash(spec: RedisSpec) -> str:
    """Hash of everything in the pod template that the spec controls. Cached:
    it is asked for each pod of each pass, and specs repeat."""
    doc = {"image": spec.image, "port": spec.port, "container": CONTAINER_NAME}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:10]


def template_hash_of(pod: Pod) -> str | None:
    return pod.annotations.get(TEMPLATE_HASH_ANNOTATION)


def pod_name(redis: Redis, index: int) -> str:
    return f"{redis.name}-{index}"


def pod_labels(redis: Redis) -> dict[str, str]:
    return {LABEL_NAME: APP_NAME, LABEL_INSTANCE: redis.name, LABEL_MANAGED_BY: MANAGED_BY}


def controller_ref(redis: Redis) -> OwnerRef:
    return OwnerRef(RESOURCE.api_version, RESOURCE.kind, redis.name, redis.uid, True, True)


def desired_container(spec: RedisSpec) -> Container:
    return Container(CONTAINER_NAME, spec.image, (spec.port,))


def pod_template(redis: Redis, spec: RedisSpec) -> dict[str, Any]:
    """A pod manifest of this Redis without its name. Its pods' manifests
    share it: a first pass over 10,000 Redis plans 30,000 creates, and a
    manifest of their own took 2.7 kB each."""
    container = desired_container(spec)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "namespace": redis.namespace,
            "labels": pod_labels(redis),
            "annotations": {TEMPLATE_HASH_ANNOTATION: template_hash(spec)},
            "ownerReferences": [controller_ref(redis).to_dict()],
        },
        "spec": _pod_spec(container),
    }


@lru_cache(maxsize=256)
def _pod_spec(container: Container) -> dict[str, Any]:
    """Shared by every manifest with this container, like the template: never
    mutated."""
    return {
        "containers": [
            {
                "name": container.name,
                "image": container.image,
                "imagePullPolicy": "IfNotPresent",
                "ports": [
                    {"name": "redis", "containerPort": port, "protocol": "TCP"}
                    for port in container.ports
                ],
            }
        ]
    }


def named(template: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The manifest of one pod: the template's, with its own metadata."""
    return {**template, "metadata": {"name": name, **template["metadata"]}}


def pod_manifest(redis: Redis, spec: RedisSpec, index: int) -> dict[str, Any]:
    return named(pod_template(redis, spec), pod_name(redis, index))


def spec_drift(pod: Pod, spec: RedisSpec) -> str | None:
    """How the pod's containers differ from the spec's, or None if they match.

    Read from the pod itself, not from its template-hash annotation: an image
    set by hand (`kubectl set image`) leaves the annotation as it was, and an
    annotation edited by hand says nothing about what runs.
    """
    want = desired_container(spec)
    if len(pod.containers) != 1:
        return f"{len(pod.containers)} containers, want 1"
    have = pod.containers[0]
    diffs = [
        f"{what} is {got}, want {wanted}"
        for what, got, wanted in (
            ("container name", have.name, want.name),
            ("image", have.image, want.image),
            ("ports", list(have.ports), list(want.ports)),
        )
        if got != wanted
    ]
    return "; ".join(diffs) or None


def pod_index(redis_name: str, name: str) -> int | None:
    """The index in ``<redis>-<index>``, or None. Called per pod per pass: no regex."""
    prefix_len = len(redis_name) + 1
    if not name.startswith(redis_name) or name[prefix_len - 1 : prefix_len] != "-":
        return None
    tail = name[prefix_len:]
    if not tail.isascii() or not tail.isdigit() or (tail[0] == "0" and len(tail) > 1):
        return None
    return int(tail)


@dataclass(frozen=True)
class PodSet:
    """A Redis's pods, sorted into the groups the rules talk about."""

    owned: tuple[Pod, ...]  # controller ref is this Redis
    by_index: Mapping[int, Pod]  # owned, with a name of the form <redis>-<index>
    index: PodLookup  # every pod, to see who holds a desired name


def pods_of(redis: Redis, index: PodLookup) -> PodSet:
    owned = index.owned_by(redis.uid)
    by_index: dict[int, Pod] = {}
    for pod in owned:
        idx = pod_index(redis.name, pod.name)
        if idx is not None:
            by_index[idx] = pod
    return PodSet(owned, by_index, index)


def _held_by_another(redis: Redis, podset: PodSet, name: str) -> bool:
    holder = podset.index.named(redis.namespace, name)
    return holder is not None and holder.controller_uid != redis.uid


# ------------------------------------------------------------ events


def ref(redis: Redis) -> ObjRef:
    return ObjRef(RESOURCE.api_version, RESOURCE.kind, redis.namespace, redis.name, redis.uid)


def _pod_event(redis: Redis, reason: str, name: str, why: str) -> EventSpec:
    return pod_event(ref(redis), reason, (name,), why, COMPONENT)


def _delete(redis: Redis, pod: Pod, why: str, event_why: str) -> DeletePod:
    event = _pod_event(redis, "DeletePod", pod.name, event_why)
    return DeletePod(redis.key, pod.namespace, pod.name, pod.uid, why, event)


# ------------------------------------------------------------ rule 1: deletion


def plan_deletion(redis: Redis, podset: PodSet) -> list[Action]:
    """Delete every pod it owns; release the finalizer once none is left."""
    actions: list[Action] = [
        _delete(redis, pod, "Redis deleted", "Redis deleted")
        for pod in podset.owned
        if not pod.terminating
    ]
    if not podset.owned and FINALIZER in redis.finalizers:
        remaining = tuple(f for f in redis.finalizers if f != FINALIZER)
        actions.append(
            PatchFinalizers(redis.key, redis.resource_version, remaining, "all pods gone")
        )
    return actions


# ------------------------------------------------------------ rule 2: finalizer


def finalizer_patch(redis: Redis) -> list[Action]:
    """Our finalizer first, so that no pod can exist unguarded."""
    if FINALIZER in redis.finalizers:
        return []
    finalizers = (*redis.finalizers, FINALIZER)
    why = "guard pods before creating them"
    return [PatchFinalizers(redis.key, redis.resource_version, finalizers, why)]


# ------------------------------------------------------------ rule 3: invalid spec


def plan_invalid(
    redis: Redis, errors: tuple[FieldError, ...], podset: PodSet, inp: PlanInput
) -> list[Action]:
    """Leave the pods alone; say which field is wrong, once."""
    message = "invalid spec: " + "; ".join(str(e) for e in errors)
    invalid = Verdict(False, "InvalidSpec", message)
    verdicts = {
        "Ready": invalid,
        "Progressing": invalid,
        "Degraded": Verdict(True, "InvalidSpec", message),
    }
    live = [p for p in podset.by_index.values() if not p.terminating]
    counts = {"replicas": len(live), "readyReplicas": sum(1 for p in live if p.ready)}
    return _status_patch(redis, status_of(redis, counts, verdicts, inp))


# ------------------------------------------------------------ rule 4: pods


def surplus_pods(redis: Redis, spec: RedisSpec, podset: PodSet) -> list[DeletePod]:
    """Owned pods outside the desired set: beyond ``num``, or oddly named."""
    surplus: list[DeletePod] = []
    for pod in podset.owned:
        idx = pod_index(redis.name, pod.name)
        if pod.terminating or (idx is not None and idx < spec.num):
            continue
        surplus.append(_delete(redis, pod, "scale down", f"scale down to {spec.num}"))
    return surplus


def _create_reason(redis: Redis, index: int) -> str:
    """Why a pod is created, for its event: a rollout, a deletion, or scaling up."""
    progressing = observed_conditions(redis.status).get("Progressing") or {}
    if progressing.get("reason") == "RollingUpdate":
        return "spec changed"
    recorded = redis.status.get("replicas")
    if isinstance(recorded, int) and index < recorded:
        return "deleted by hand"
    return "scale up"


@dataclass(frozen=True)
class Missing:
    creates: tuple[CreatePod, ...]
    conflicts: tuple[str, ...]  # desired names held by a pod this Redis does not own


def missing_pods(redis: Redis, spec: RedisSpec, podset: PodSet) -> Missing:
    """Create each desired pod that does not exist, unless another holds its name
    (an owned pod still terminating holds it too, until it is gone)."""
    creates: list[CreatePod] = []
    conflicts: list[str] = []
    template: dict[str, Any] | None = None  # built once, for the first create
    involved: ObjRef | None = None
    for idx in range(spec.num):
        name = pod_name(redis, idx)
        if _held_by_another(redis, podset, name):
            conflicts.append(name)
        elif idx not in podset.by_index:
            template = template or pod_template(redis, spec)
            involved = involved or ref(redis)
            why = _create_reason(redis, idx)
            event = pod_event(involved, "CreatePod", (name,), why, COMPONENT)
            creates.append(CreatePod(redis.key, named(template, name), event))
    return Missing(tuple(creates), tuple(conflicts))


@dataclass(frozen=True)
class Rollout:
    stale: tuple[int, ...]  # desired indexes whose pod's containers differ from the spec's
    replace: DeletePod | None  # the one stale pod deleted this pass, if any


def _why_stale(pod: Pod, spec: RedisSpec, drift: str) -> str:
    """ "spec changed" when the pod was made for another spec; "drift" when it
    was made for this one and changed since (by hand)."""
    if template_hash_of(pod) == template_hash(spec):
        return f"drift ({drift})"
    return "spec changed"


def rolling_update(redis: Redis, spec: RedisSpec, desired: Mapping[int, Pod]) -> Rollout:
    """Replace the lowest stale pod, only while every other desired pod exists
    and is Ready, so that at most one pod is down for the update at any time
    (a desired name that is missing or held by another pod waits for that)."""
    drifts = {i: spec_drift(p, spec) for i, p in desired.items() if not p.terminating}
    stale = tuple(sorted(i for i, d in drifts.items() if d is not None))
    if not stale:
        return Rollout((), None)
    victim = stale[0]
    others_ready = all(
        i in desired and not desired[i].terminating and desired[i].ready
        for i in range(spec.num)
        if i != victim
    )
    if not others_ready:
        return Rollout(stale, None)
    why = _why_stale(desired[victim], spec, drifts[victim] or "")
    return Rollout(stale, _delete(redis, desired[victim], why, why))


def metadata_repair(redis: Redis, spec: RedisSpec, pod: Pod) -> PatchPodMetadata | None:
    """Put back our labels, our controller reference and, on a pod whose
    containers match the spec, the template-hash annotation. Labels and
    annotations of others are left alone."""
    labels = {k: v for k, v in pod_labels(redis).items() if pod.labels.get(k) != v}
    want_hash = template_hash(spec)
    fix_hash = spec_drift(pod, spec) is None and template_hash_of(pod) != want_hash
    annotations = {TEMPLATE_HASH_ANNOTATION: want_hash} if fix_hash else {}
    want_ref = controller_ref(redis)
    refs = None
    if want_ref not in pod.owner_refs:
        others = [r.to_dict() for r in pod.owner_refs if not r.controller]
        refs = (*others, want_ref.to_dict())
    what = [*labels, *annotations] + (["ownerReferences"] if refs is not None else [])
    if not what:
        return None
    why = f"drift: {', '.join(what)} changed by hand"
    event = EventSpec(ref(redis), "Normal", DRIFT, f"Restored pod {pod.name}: {why}", COMPONENT)
    return PatchPodMetadata(
        redis.key,
        pod.namespace,
        pod.name,
        pod.resource_version,
        labels,
        annotations,
        refs,
        why,
        event,
    )


@dataclass(frozen=True)
class PodChanges:
    """The pod writes of one pass, and what the status needs to know of them."""

    desired: Mapping[int, Pod]  # owned pods at desired indexes, before the changes
    surplus: tuple[DeletePod, ...]
    missing: Missing
    rollout: Rollout
    repairs: tuple[PatchPodMetadata, ...] = ()

    @property
    def actions(self) -> list[Action]:
        """The writes the status counts; the metadata repairs come after the
        status (a pod written meanwhile must not hold the status back)."""
        replace = [self.rollout.replace] if self.rollout.replace else []
        return [*self.surplus, *self.missing.creates, *replace]

    @property
    def deleted(self) -> frozenset[str]:
        replace = [self.rollout.replace] if self.rollout.replace else []
        return frozenset(d.name for d in (*self.surplus, *replace))


def pod_changes(redis: Redis, spec: RedisSpec, podset: PodSet) -> PodChanges:
    desired = {i: p for i, p in podset.by_index.items() if i < spec.num}
    rollout = rolling_update(redis, spec, desired)
    replaced = rollout.replace.name if rollout.replace else None
    repairs = (
        metadata_repair(redis, spec, p)
        for _, p in sorted(desired.items())
        if not p.terminating and p.name != replaced
    )
    return PodChanges(
        desired,
        tuple(surplus_pods(redis, spec, podset)),
        missing_pods(redis, spec, podset),
        rollout,
        tuple(r for r in repairs if r is not None),
    )


# ------------------------------------------------------------ rule 5: status


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
    """The first unfinished step: rollout, scaling up or down, pods becoming Ready."""
    num = spec.num
    observed = observed_conditions(redis.status).get("Progressing") or {}
    was_rolling = observed.get("reason") == "RollingUpdate"
    if changes.rollout.stale or (was_rolling and counts.updated < num):
        return Verdict(
            True, "RollingUpdate", f"{counts.updated}/{num} pods updated to the current spec"
        )
    if counts.replicas < num:
        return Verdict(True, "ScalingUp", f"{counts.replicas}/{num} pods exist")
    if changes.surplus or any(p.terminating for p in podset.owned):
        return Verdict(True, "ScalingDown", f"removing pods beyond {num}")
    if counts.ready < num:
        waiting = num - counts.ready
        return Verdict(True, "WaitingForReady", f"waiting for {waiting} of {num} pods to be Ready")
    return Verdict(False, "Complete", f"all {num} replicas updated and ready")


def degraded_verdict(conflicts: tuple[str, ...], gate: Gate) -> Verdict:
    """A conflict first (it needs a person), then backoff, then a failure of
    this pass. Otherwise the status is planned as it will be once this pass's
    writes land: if one fails, the status written after it says so."""
    failure = gate.failure if gate.hold else None
    if conflicts:
        names = ", ".join(conflicts)
        return Verdict(
            True, "PodConflict", f"pods not owned by this Redis hold desired names: {names}"
        )
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
    else Ready, else the step in progress."""
    degraded, ready, progressing = verdicts["Degraded"], verdicts["Ready"], verdicts["Progressing"]
    if degraded.ok:
        return degraded
    if ready.ok:
        return Verdict(True, READY, ready.message)
    return progressing if progressing.ok else ready


@dataclass(frozen=True)
class DesiredStatus:
    body: dict[str, Any]
    degraded: Condition


def status_of(
    redis: Redis, counts: Mapping[str, int], verdicts: Mapping[str, Verdict], inp: PlanInput
) -> DesiredStatus:
    """The status to store: counts, one condition per verdict, and the failure
    record while the object is held (cleared, by a null in the merge patch,
    once its writes are planned again)."""
    observed = observed_conditions(redis.status)
    gen = redis.generation
    conds = {t: condition(t, v, gen, observed, inp.now) for t, v in verdicts.items()}
    summary = summary_of(verdicts)
    body: dict[str, Any] = {
        "observedGeneration": gen,
        **counts,
        "state": summary.reason,
        "message": summary.message,
        "conditions": [c.to_dict() for c in conds.values()],
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


def _status_patch(redis: Redis, desired: DesiredStatus) -> list[Action]:
    """Write the status only when it would change (a converged pass writes nothing)."""
    if not status_differs(redis.status, desired.body):
        return []
    events = _degraded_event(redis, desired.degraded)
    return [PatchStatus(redis.key, redis.resource_version, desired.body, events)]


# ------------------------------------------------------------ the planner


def plan_live(redis: Redis, spec: RedisSpec, podset: PodSet, inp: PlanInput) -> list[Action]:
    """Rules 4 and 5. While held (backing off, or after a failed write), only
    the status is written, counting the pods as they are."""
    changes = pod_changes(redis, spec, podset)
    if inp.gate.hold:
        changes = _landed(changes, inp.landed)
    elif inp.namespace_terminating:
        changes = _nothing_created(changes)
    counts = counts_after(spec, changes)
    verdicts = {
        "Ready": ready_verdict(spec, counts),
        "Progressing": progressing_verdict(redis, spec, podset, changes, counts),
        "Degraded": degraded_verdict(changes.missing.conflicts, inp.gate),
    }
    fields = {
        "replicas": counts.replicas,
        "readyReplicas": counts.ready,
        "updatedReplicas": counts.updated,
    }
    status = _status_patch(redis, status_of(redis, fields, verdicts, inp))
    if inp.gate.hold:
        return status
    return changes.actions + status + list(changes.repairs)


def _nothing_created(changes: PodChanges) -> PodChanges:
    """In a namespace being deleted: deletes only (a rollout would need a create)."""
    missing = Missing((), changes.missing.conflicts)
    rollout = Rollout(changes.rollout.stale, None)
    return PodChanges(changes.desired, changes.surplus, missing, rollout, changes.repairs)


def _landed(changes: PodChanges, landed: frozenset[tuple[str, ObjKey]]) -> PodChanges:
    """The pod changes that already happened this pass: counted, not planned."""

    def done(action: Action | None) -> bool:
        return action is not None and (action.verb, action.target) in landed

    creates = tuple(c for c in changes.missing.creates if done(c))
    replace = changes.rollout.replace
    return PodChanges(
        changes.desired,
        tuple(d for d in changes.surplus if done(d)),
        Missing(creates, changes.missing.conflicts),
        Rollout(changes.rollout.stale, replace if done(replace) else None),
        tuple(r for r in changes.repairs if done(r)),
    )


def plan(redis: Redis, inp: PlanInput) -> list[Action]:
    podset = pods_of(redis, inp.pods)
    if redis.deletion_timestamp:
        return plan_deletion(redis, podset)
    check = validate(redis, inp.config.image)
    guard = [] if inp.namespace_terminating else finalizer_patch(redis)
    if check.spec is None:
        return guard + plan_invalid(redis, check.errors, podset, inp)
    return guard + plan_live(redis, check.spec, podset, inp)


def plan_unseen(redis: Redis, inp: PlanInput, why: str) -> list[Action]:
    """The pod LIST was refused: no pod is created or deleted on a partial
    view, and the status says so rather than stand as the last pass left it.
    Only Degraded changes (for this generation): the counts, Ready and
    Progressing are the last ones seen, and observedGeneration stays, since
    this generation was not acted on. An invalid spec keeps its InvalidSpec,
    which needs no pods to be true, and a Redis being deleted says Deleting."""
    if redis.deletion_timestamp or validate(redis, inp.config.image).spec is None:
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
    return _status_patch(redis, DesiredStatus(body, degraded))


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
    )


KIND: Kind[Redis] = Kind(
    RESOURCE, COMPONENT, from_api, plan, health, plan_unseen=plan_unseen, owns_pods=True
)
