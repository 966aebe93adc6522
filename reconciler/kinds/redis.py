"""Redis: every rule of the kind, in the order a pass applies them.

A Redis asks for ``spec.num`` pods named ``<name>-<index>``, each running a
container ``redis`` with ``spec.image``, serving on ``spec.port``. For each
object, a pass:
  1. being deleted: deletes its pods, then drops the finalizer once none remain;
  2. no finalizer yet: adds it before any pod exists;
  3. invalid spec: touches no pod, and names the field in status and an event;
  4. creates missing pods, deletes surplus and ended ones, replaces one stale
     pod at a time while every other desired pod is Ready (stale: made for
     another template, or its image changed by hand since it was created;
     never for what admission did to it), and puts back labels, annotation
     and controller reference changed by hand; none of it while
     ``spec.paused`` is true (its deletion still deletes its pods);
  5. writes the status as the pods will be after those actions, only when it
     differs from what is stored, naming the pods a rollout waits on and
     flagging one that stopped moving for longer than progress_deadline.
Pods it does not own are never touched, even when they hold a desired name.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from reconciler.actions import (
    Action,
    CreatePod,
    DeletePod,
    EventSpec,
    EvictPod,
    ObjRef,
    PatchFinalizers,
    PatchPodMetadata,
    PatchStatus,
    pod_event,
)
from reconciler.backoff import BACKING_OFF, STATUS_FIELD, Failure, Gate, from_status, to_status
from reconciler.constants import LABEL_INSTANCE, LABEL_MANAGED_BY, LABEL_NAME, MANAGED_BY
from reconciler.health import PAUSED, READY, Health
from reconciler.kinds import owned
from reconciler.kinds import redis_disruption as disruption
from reconciler.kinds import redis_placement as placement
from reconciler.kinds import redis_service as service
from reconciler.kinds.base import Kind, PlanInput
from reconciler.kinds.conditions import (
    Verdict,
    condition,
    holder_field,
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
    parse_time,
    rfc3339,
)

GROUP = "myapp.demo.kubebuilder.io"
VERSION = "v1"
RESOURCE = ResourceType(GROUP, VERSION, "Redis", "redis")
COMPONENT = "redis-controller"
FINALIZER = f"{GROUP}/pods"
TEMPLATE_HASH_ANNOTATION = f"{GROUP}/template-hash"
# The hash of the placement fields a pod was made with (redis_placement).
FIELDS_HASH_ANNOTATION = f"{GROUP}/pod-fields-hash"
# The image admission gave a pod in place of the one asked for, once announced.
ADMITTED_IMAGE_ANNOTATION = f"{GROUP}/admitted-image"

PORT_MIN = 6370
PORT_MAX = 6380
PORT_DEFAULT = 6379
NUM_MAX = 100
DELETING = "Deleting"  # the state shown while its pods go
PODS_UNKNOWN = "PodsUnknown"  # the Degraded reason while the pod LIST is refused
DRIFT = owned.DRIFT  # the reason of the event that says a pod was put back
SERVICE_FIELD = "service"  # status: the name of its Service, once it exists
ADMITTED = "ChangedAtAdmission"  # the reason of the event that says admission changed a pod
DEADLINE_EXCEEDED = "ProgressDeadlineExceeded"
REPLACING_ENDED = "ReplacingEndedPods"
PROGRESS_FIELD = "lastProgressTime"
# A pod still there this long after its grace period ran out is named as stuck.
STUCK_MARGIN = timedelta(seconds=30)
NAMED_MAX = 3  # pods named in a status message; the rest are counted
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
    bucket_label: str | None = None  # its shard bucket label, if any (engine/plan.py)

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
    paused: bool = False  # spec.paused: its pods are left as they are
    placement: placement.Placement = placement.NONE


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


def _paused_error(paused: Any) -> FieldError | None:
    if isinstance(paused, bool):
        return None
    return FieldError("spec.paused", f"must be true or false, got {paused!r}")


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
    paused = spec.get("paused", False)
    found = (_port_error(port), _num_error(num), _image_error(image), _paused_error(paused))
    errors = tuple(e for e in found if e is not None) + tuple(
        FieldError(path, message) for path, message in placement.field_errors(spec)
    )
    if errors:
        return SpecCheck(None, errors)
    fields = placement.placement_of(spec)
    return SpecCheck(RedisSpec(port, num, image, paused, fields), ())


# ------------------------------------------------------------ its pods


@lru_cache(maxsize=256)
def template_hash(spec: RedisSpec) -> str:
    """Hash of the pod spec we send, so that any change to it (of the Redis
    spec, or of this template in a new release) rolls the pods. Cached: it is
    asked for each pod of each pass, and specs repeat."""
    doc = [_pod_spec(desired_container(spec)), placement.fields_hash(spec.placement)]
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:10]


def template_hash_of(pod: Pod) -> str | None:
    return pod.annotations.get(TEMPLATE_HASH_ANNOTATION)


def pod_name(redis: Redis, index: int) -> str:
    return f"{redis.name}-{index}"


def desired_pod_names(redis: Redis) -> tuple[str, ...]:
    """``<name>-0`` to ``<name>-(num-1)``; none while ``spec.num`` is invalid."""
    num = redis.spec.get("num", 0)
    if _num_error(num) is not None:
        return ()
    return tuple([pod_name(redis, i) for i in range(num)])


def selector_labels(redis: Redis) -> dict[str, str]:
    """The labels that pick this Redis's pods out of a namespace."""
    return {LABEL_NAME: APP_NAME, LABEL_INSTANCE: redis.name}


def pod_labels(redis: Redis) -> dict[str, str]:
    return {**selector_labels(redis), LABEL_MANAGED_BY: MANAGED_BY}


def controller_ref(redis: Redis) -> OwnerRef:
    return OwnerRef(RESOURCE.api_version, RESOURCE.kind, redis.name, redis.uid, True, True)


def desired_container(spec: RedisSpec) -> Container:
    """The server listens on the spec's port: the image's entrypoint passes
    these arguments to redis-server."""
    return Container(CONTAINER_NAME, spec.image, (spec.port,), ("--port", str(spec.port)))


def pod_template(redis: Redis, spec: RedisSpec) -> dict[str, Any]:
    """A pod manifest of this Redis without its name. Its pods' manifests
    share it: a first pass over 10,000 Redis plans 30,000 creates, and a
    manifest of their own took 2.7 kB each."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "namespace": redis.namespace,
            "labels": pod_labels(redis),
            "annotations": {
                TEMPLATE_HASH_ANNOTATION: template_hash(spec),
                FIELDS_HASH_ANNOTATION: placement.fields_hash(spec.placement),
            },
            "ownerReferences": [controller_ref(redis).to_dict()],
        },
        "spec": pod_spec(redis, spec),
    }


def pod_spec(redis: Redis, spec: RedisSpec) -> dict[str, Any]:
    """The container's spec with the placement fields added to it and to the
    pod's."""
    shared = _pod_spec(desired_container(spec))
    container = {**shared["containers"][0], **placement.container_fields(spec.placement)}
    fields = placement.pod_fields(spec.placement, selector_labels(redis))
    return {**shared, "containers": [container], "subdomain": redis.name, **fields}


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
                "args": list(container.args),
                "ports": [
                    {"name": "redis", "containerPort": port, "protocol": "TCP"}
                    for port in container.ports
                ],
                # Ready means the server accepts connections on its port.
                "readinessProbe": {
                    "tcpSocket": {"port": container.ports[0]},
                    "periodSeconds": 5,
                },
            }
        ]
    }


def named(template: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The manifest of one pod: the template's, with its own metadata and
    hostname (``<pod>.<redis>.<namespace>.svc`` through the Service)."""
    spec = {**template["spec"], "hostname": name}
    return {**template, "metadata": {"name": name, **template["metadata"]}, "spec": spec}


def pod_manifest(redis: Redis, spec: RedisSpec, index: int) -> dict[str, Any]:
    return named(pod_template(redis, spec), pod_name(redis, index))


def own_container(pod: Pod) -> Container | None:
    """The container we asked for, by name: containers that admission added
    (a mesh's sidecar) are not ours to judge."""
    return next((c for c in pod.containers if c.name == CONTAINER_NAME), None)


def admitted_image(pod: Pod, spec: RedisSpec) -> str:
    """The image this pod should run: the spec's, or what admission made of it
    when the pod was created (recorded on the pod once seen)."""
    return pod.annotations.get(ADMITTED_IMAGE_ANNOTATION) or spec.image


def _made_for(pod: Pod, have: Container | None, spec: RedisSpec) -> bool:
    """Its container is what this spec asks for, and it was made with this
    spec's placement fields (the template-hash annotation aside)."""
    want = desired_container(spec)
    return (
        have is not None
        and pod.annotations.get(FIELDS_HASH_ANNOTATION) == placement.fields_hash(spec.placement)
        and have.image == admitted_image(pod, spec)
        and have.ports == want.ports
        and have.args == want.args
    )


def edited(pod: Pod) -> bool:
    """Its spec changed after it was created: the apiserver counts a pod's
    generation from 1 and raises it on every spec change, while what
    admission does to the create is part of generation 1. A server that does
    not count pod generations (0) cannot tell: the pod is taken as created."""
    return pod.generation > 1


def spec_drift(pod: Pod, spec: RedisSpec) -> str | None:
    """Why the pod must be replaced, or None if it is what we asked for.

    Made for another spec (or template): its template-hash annotation differs,
    and its container does not match (an annotation edited by hand on a
    matching pod is put back instead, by `metadata_repair`). Changed by hand
    since it was created (generation above 1): compared on the one field of
    our container that can change on a running pod, its image. Nothing else is
    compared, so whatever admission did at creation (a sidecar, a rewritten
    image, defaults) never makes a pod stale.
    """
    have = own_container(pod)
    if template_hash_of(pod) != template_hash(spec):
        return None if _made_for(pod, have, spec) else "spec changed"
    if have is None or not edited(pod):
        return None
    want = admitted_image(pod, spec)
    return None if have.image == want else f"image is {have.image}, want {want}"


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
    index: PodLookup  # our pods and those holding a desired name, to see who holds one


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


# A pod taken away from a Redis that runs: deleted, or evicted when it serves.
Removal = DeletePod | EvictPod


def _remove(redis: Redis, pod: Pod, why: str, event_why: str) -> Removal:
    """A Ready pod is evicted, so that every disruption budget that selects
    it is honoured (ours, or one its users made); a pod that serves nothing
    (not Ready, ended, terminating) is deleted: no budget counts it, and a
    refused eviction would only hold a fix back."""
    if not pod.ready or pod.terminating:
        return _delete(redis, pod, why, event_why)
    event = _pod_event(redis, "EvictPod", pod.name, event_why)
    return EvictPod(redis.key, pod.namespace, pod.name, pod.uid, why, event)


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


def surplus_pods(redis: Redis, spec: RedisSpec, podset: PodSet) -> list[Removal]:
    """Owned pods outside the desired set: beyond ``num``, or oddly named."""
    surplus: list[Removal] = []
    for pod in podset.owned:
        idx = pod_index(redis.name, pod.name)
        if pod.terminating or (idx is not None and idx < spec.num):
            continue
        surplus.append(_remove(redis, pod, "scale down", f"scale down to {spec.num}"))
    return surplus


def _create_reason(redis: Redis, index: int) -> str:
    """Why a pod is created, for its event: a rollout, an ended pod, a
    deletion, or scaling up."""
    progressing = observed_conditions(redis.status).get("Progressing") or {}
    if progressing.get("reason") == "RollingUpdate":
        return "spec changed"
    if progressing.get("reason") == REPLACING_ENDED:
        return "replaces a pod that ended"
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
    replace: tuple[Removal, ...]  # the stale pods deleted or evicted this pass


# Why a stale pod that is not Ready goes without waiting for the others.
UNREADY_STALE = "not Ready, so replaced without waiting"


def _why_stale(pod: Pod, spec: RedisSpec, drift: str) -> str:
    """ "spec changed" when the pod was made for another spec; "drift" when it
    was made for this one and changed since (by hand)."""
    if template_hash_of(pod) == template_hash(spec):
        return f"drift ({drift})"
    return "spec changed"


def _others_ready(spec: RedisSpec, desired: Mapping[int, Pod], victim: int) -> bool:
    return all(
        i in desired and not desired[i].terminating and desired[i].ready
        for i in range(spec.num)
        if i != victim
    )


def rolling_update(redis: Redis, spec: RedisSpec, desired: Mapping[int, Pod]) -> Rollout:
    """Stale pods that are not Ready (crashing, not pulling, unschedulable)
    all go at once: they serve nothing, so replacing them costs no
    availability (a Deployment counts them against maxUnavailable the same
    way), and waiting for them to turn Ready would wait forever when the new
    spec is the fix. Otherwise the lowest stale pod goes, only while every
    other desired pod exists and is Ready, so that at most one serving pod is
    down for the update at any time. An ended pod is replaced by
    `ended_pods` instead."""
    drifts = {
        i: spec_drift(p, spec) for i, p in desired.items() if not p.terminating and not p.ended
    }
    stale = tuple(sorted(i for i, d in drifts.items() if d is not None))
    unready = [i for i in stale if not desired[i].ready]
    if unready:
        return Rollout(stale, tuple(_replace(redis, spec, desired[i], drifts[i]) for i in unready))
    if not stale or not _others_ready(spec, desired, stale[0]):
        return Rollout(stale, ())
    return Rollout(stale, (_replace(redis, spec, desired[stale[0]], drifts[stale[0]]),))


def _replace(redis: Redis, spec: RedisSpec, pod: Pod, drift: str | None) -> Removal:
    why = _why_stale(pod, spec, drift or "")
    why = why if pod.ready else f"{why}; {UNREADY_STALE}"
    return _remove(redis, pod, why, why)


def admitted_change(pod: Pod, spec: RedisSpec) -> str | None:
    """The image admission put in place of ours, if not yet recorded: a pod
    made for this spec and not changed since, whose container runs another
    image than the spec's (a mirror, a pinned digest)."""
    have = own_container(pod)
    if have is None or edited(pod) or template_hash_of(pod) != template_hash(spec):
        return None
    if have.image == spec.image or pod.annotations.get(ADMITTED_IMAGE_ANNOTATION) == have.image:
        return None
    return have.image


def _repair_event(
    redis: Redis, pod: Pod, spec: RedisSpec, what: list[str], admitted: str | None
) -> EventSpec:
    """Drift put back, or else the first sight of what admission changed."""
    if what:
        why = f"drift: {', '.join(what)} changed by hand"
        return EventSpec(ref(redis), "Normal", DRIFT, f"Restored pod {pod.name}: {why}", COMPONENT)
    message = f"Pod {pod.name}: image is {admitted}, asked {spec.image}: changed at admission"
    return EventSpec(ref(redis), "Normal", ADMITTED, message, COMPONENT)


def _hashes_to_repair(pod: Pod, spec: RedisSpec) -> dict[str, str]:
    """A hash annotation edited by hand, while the other shows the pod was
    made for this spec: the template hash of a pod whose container and
    placement fields match, or the fields hash of one whose template hash
    does."""
    want_hash, want_fields = template_hash(spec), placement.fields_hash(spec.placement)
    if template_hash_of(pod) == want_hash:
        if pod.annotations.get(FIELDS_HASH_ANNOTATION) != want_fields:
            return {FIELDS_HASH_ANNOTATION: want_fields}
        return {}
    if _made_for(pod, own_container(pod), spec):
        return {TEMPLATE_HASH_ANNOTATION: want_hash}
    return {}


def metadata_repair(redis: Redis, spec: RedisSpec, pod: Pod) -> PatchPodMetadata | None:
    """Put back our labels, our controller reference and, on a pod whose
    container matches the spec, the template-hash annotation; record once the
    image admission gave the pod. Labels and annotations of others are left
    alone."""
    labels = {k: v for k, v in pod_labels(redis).items() if pod.labels.get(k) != v}
    annotations = _hashes_to_repair(pod, spec)
    want_ref = controller_ref(redis)
    refs = None
    if want_ref not in pod.owner_refs:
        others = [r.to_dict() for r in pod.owner_refs if not r.controller]
        refs = (*others, want_ref.to_dict())
    what = [*labels, *annotations] + (["ownerReferences"] if refs is not None else [])
    admitted = admitted_change(pod, spec)
    if not what and admitted is None:
        return None
    event = _repair_event(redis, pod, spec, what, admitted)
    if admitted is not None:
        annotations[ADMITTED_IMAGE_ANNOTATION] = admitted
    why = f"drift: {', '.join(what)} changed by hand" if what else "changed at admission"
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


def why_ended(pod: Pod) -> str:
    """The pod's own account of its end: its reason and message (an
    eviction), else its container's (OOMKilled, Error)."""
    if pod.reason:
        return f"{pod.reason}: {pod.message}" if pod.message else pod.reason
    ended = next((str(s) for s in pod.container_states if not s.waiting and s.reason), "")
    return f"{pod.phase} ({ended})" if ended else pod.phase


def ended_pods(redis: Redis, desired: Mapping[int, Pod]) -> tuple[DeletePod, ...]:
    """Desired pods that ended (Failed or Succeeded): their containers never
    run again, so they are deleted, and a later pass creates their names
    anew, as a StatefulSet does."""
    return tuple(
        _delete(redis, p, f"ended: {why_ended(p)}", why_ended(p))
        for _, p in sorted(desired.items())
        if p.ended and not p.terminating
    )


@dataclass(frozen=True)
class PodChanges:
    """The pod writes of one pass, and what the status needs to know of them."""

    desired: Mapping[int, Pod]  # owned pods at desired indexes, before the changes
    surplus: tuple[Removal, ...]
    missing: Missing
    rollout: Rollout
    repairs: tuple[PatchPodMetadata, ...] = ()
    ended: tuple[DeletePod, ...] = ()

    @property
    def actions(self) -> list[Action]:
        """The writes the status counts; the metadata repairs come after the
        status (a pod written meanwhile must not hold the status back)."""
        return [*self.surplus, *self.ended, *self.missing.creates, *self.rollout.replace]

    @property
    def deleted(self) -> frozenset[str]:
        return frozenset(d.name for d in (*self.surplus, *self.ended, *self.rollout.replace))


def pod_changes(redis: Redis, spec: RedisSpec, podset: PodSet) -> PodChanges:
    desired = {i: p for i, p in podset.by_index.items() if i < spec.num}
    rollout = rolling_update(redis, spec, desired)
    replaced = {d.name for d in rollout.replace}
    repairs = (
        metadata_repair(redis, spec, p)
        for _, p in sorted(desired.items())
        if not p.terminating and not p.ended and p.name not in replaced
    )
    return PodChanges(
        desired,
        tuple(surplus_pods(redis, spec, podset)),
        missing_pods(redis, spec, podset),
        rollout,
        tuple(r for r in repairs if r is not None),
        ended_pods(redis, desired),
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


def _age(seconds: float) -> str:
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
    return f"{pod.name} terminating for {_age(since)}: {held}"


def waiting_on(pod: Pod) -> str | None:
    """Why a pod is not Ready, from its own status, when the reason is a
    problem rather than a start in progress: a container waiting on an image
    or a restart, or no node for it."""
    states = sorted(pod.container_states, key=lambda s: s.name != CONTAINER_NAME)
    waiting = next((s for s in states if s.waiting and s.reason not in STARTING), None)
    if waiting is not None:
        return str(waiting)
    scheduled = pod.condition("PodScheduled")
    if scheduled is not None and scheduled.status == "False" and scheduled.reason:
        detail = scheduled.message
        return f"{scheduled.reason}: {detail}" if detail else scheduled.reason
    return None


# Container waiting reasons of a pod that is starting normally.
STARTING = frozenset({"ContainerCreating", "PodInitializing", ""})


def pods_detail(podset: PodSet, changes: PodChanges, now: datetime) -> str:
    """The pods a rollout waits on, and why, for the status message: stuck
    terminating pods and desired pods whose own status names a problem."""
    notes: list[str] = []
    for pod in sorted(podset.owned, key=lambda p: p.name):
        if pod.terminating:
            note = stuck_terminating(pod, now)
        elif pod.name in changes.deleted or pod.ready:
            note = None
        else:
            why = waiting_on(pod)
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
    deadline = timedelta(seconds=inp.config.progress_deadline)
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
    message = f"no progress for {_age(deadline)}: {progressing.message}"
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
    else Paused, else Ready, else the step in progress."""
    degraded, ready, progressing = verdicts["Degraded"], verdicts["Ready"], verdicts["Progressing"]
    if degraded.ok:
        return degraded
    if progressing.reason == PAUSED:
        return progressing
    if ready.ok:
        return Verdict(True, READY, ready.message)
    return progressing if progressing.ok else ready


@dataclass(frozen=True)
class DesiredStatus:
    body: dict[str, Any]
    degraded: Condition


def status_of(
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


def _status_patch(
    redis: Redis, desired: DesiredStatus, more: tuple[EventSpec, ...] = ()
) -> list[Action]:
    """Write the status only when it would change (a converged pass writes
    nothing); ``more`` are events that say what changed in it."""
    if not status_differs(redis.status, desired.body):
        return []
    events = _degraded_event(redis, desired.degraded) + more
    return [PatchStatus(redis.key, redis.resource_version, desired.body, events)]


# ------------------------------------------------------------ the planner


def plan_live(redis: Redis, spec: RedisSpec, podset: PodSet, inp: PlanInput) -> list[Action]:
    """Rules 4 and 5. While held (backing off, or after a failed write), only
    the status is written, counting the pods as they are."""
    changes = pod_changes(redis, spec, podset)
    if inp.gate.hold:
        changes = _landed(changes, inp.landed)
    elif spec.paused:
        changes = _paused(changes)
    elif inp.namespace_terminating:
        changes = _nothing_created(changes)
    refusal = refusal_now(redis, changes, inp)
    counted = changes if refusal is None else _kept(changes, refusal.pod)
    counts = counts_after(spec, counted)
    progressing = progressing_verdict(redis, spec, podset, counted, counts)
    if spec.paused:
        progressing = paused_verdict(spec, counts)
    progress = progress_of(redis, counts, counted, inp)
    svc = service_plan(redis, spec, inp)
    held = redis.name if svc.held_by_another else None
    detail = "; ".join(
        d for d in (refusal.note if refusal else "", pods_detail(podset, counted, inp.now)) if d
    )
    verdicts = {
        "Ready": ready_verdict(spec, counts),
        "Progressing": with_detail(progressing, detail),
        "Degraded": degraded_verdict(changes.missing.conflicts, inp.gate, held),
    }
    verdicts = deadline_verdicts(verdicts, progress, inp.config.progress_deadline)
    fields = {
        "replicas": counts.replicas,
        "readyReplicas": counts.ready,
        "updatedReplicas": counts.updated,
        PROGRESS_FIELD: rfc3339(progress.at),
        SERVICE_FIELD: svc.shown,
        disruption.REFUSED_FIELD: refusal.to_status() if refusal else None,
    }
    stored = disruption.refusal_of(redis.status)
    said = disruption.refused_event(owner_of(redis), stored, refusal)
    status = _status_patch(redis, status_of(redis, fields, verdicts, inp), said)
    if inp.gate.hold:
        return status
    budget = budget_plan(redis, spec, inp)
    return changes.actions + list(svc.actions) + list(budget) + status + list(changes.repairs)


def refusal_now(redis: Redis, changes: PodChanges, inp: PlanInput) -> disruption.Refusal | None:
    """The eviction a budget refused: just now (the status written after
    it), or in an earlier pass, while this one asks for the same pod again."""
    if inp.refused is not None:
        return disruption.Refusal(*inp.refused)
    evicting = frozenset(a.name for a in changes.actions if isinstance(a, EvictPod))
    return disruption.expected(disruption.refusal_of(redis.status), evicting)


def _kept(changes: PodChanges, pod: str) -> PodChanges:
    """The changes as they will land when the eviction of ``pod`` is refused."""

    def kept(removals: tuple[Removal, ...]) -> tuple[Removal, ...]:
        return tuple(r for r in removals if not (isinstance(r, EvictPod) and r.name == pod))

    rollout = Rollout(changes.rollout.stale, kept(changes.rollout.replace))
    return replace(changes, surplus=kept(changes.surplus), rollout=rollout)


def budget_plan(
    redis: Redis, spec: RedisSpec, inp: PlanInput
) -> tuple[disruption.BudgetWrite, ...]:
    """Its budget's writes: none while the budgets could not all be listed,
    while paused, or in a namespace being deleted."""
    if disruption.KIND not in inp.children or spec.paused or inp.namespace_terminating:
        return ()
    found = inp.pods.child(disruption.KIND, redis.namespace, redis.name)
    return disruption.plan_budget(owner_of(redis), found, spec.num)


def owner_of(redis: Redis) -> owned.Owner:
    return owned.Owner(
        redis.key,
        redis.uid,
        ref(redis),
        pod_labels(redis),
        selector_labels(redis),
        controller_ref(redis).to_dict(),
        COMPONENT,
    )


def service_plan(redis: Redis, spec: RedisSpec, inp: PlanInput) -> service.ServicePlan:
    """Its Service's write, if any. Nothing while the Services could not all
    be listed (the status keeps the name it shows), while held after a
    failure, or while paused (the Service stays as it is)."""
    if service.KIND not in inp.children:
        stored = redis.status.get(SERVICE_FIELD)
        return service.ServicePlan((), stored if isinstance(stored, str) else None)
    found = inp.pods.child(service.KIND, redis.namespace, redis.name)
    planned = service.plan_service(owner_of(redis), found, spec.port)
    if spec.paused or inp.gate.hold or inp.namespace_terminating:
        return service.ServicePlan(
            (), None if found is None else planned.shown, planned.held_by_another
        )
    return planned


def _paused(changes: PodChanges) -> PodChanges:
    """spec.paused: no pod is created, deleted, replaced or repaired; what
    would have been done is still counted (the stale pods) for the status."""
    return PodChanges(
        changes.desired,
        (),
        Missing((), changes.missing.conflicts),
        Rollout(changes.rollout.stale, ()),
    )


def _nothing_created(changes: PodChanges) -> PodChanges:
    """In a namespace being deleted: deletes only (a rollout would need a create)."""
    missing = Missing((), changes.missing.conflicts)
    rollout = Rollout(changes.rollout.stale, ())
    return replace(changes, missing=missing, rollout=rollout)


def _landed(changes: PodChanges, landed: frozenset[tuple[str, ObjKey]]) -> PodChanges:
    """The pod changes that already happened this pass: counted, not planned."""

    def done(action: Action | None) -> bool:
        return action is not None and (action.verb, action.target) in landed

    creates = tuple(c for c in changes.missing.creates if done(c))
    replaced = tuple(d for d in changes.rollout.replace if done(d))
    return PodChanges(
        changes.desired,
        tuple(d for d in changes.surplus if done(d)),
        Missing(creates, changes.missing.conflicts),
        Rollout(changes.rollout.stale, replaced),
        tuple(r for r in changes.repairs if done(r)),
        tuple(d for d in changes.ended if done(d)),
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


def child_names(redis: Redis) -> tuple[tuple[str, str], ...]:
    """Its Service, and its budget while it has two pods or more."""
    names = [(service.KIND, redis.name)]
    num = redis.spec.get("num", 0)
    if _num_error(num) is None and num >= disruption.MIN_PODS:
        names.append((disruption.KIND, redis.name))
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
    )


KIND: Kind[Redis] = Kind(
    RESOURCE,
    COMPONENT,
    from_api,
    plan,
    health,
    plan_unseen=plan_unseen,
    owns_pods=True,
    pod_names=desired_pod_names,
    child_names=child_names,
)
