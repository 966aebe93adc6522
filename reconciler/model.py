"""The observed cluster as frozen values: keys, resource types, pods.

Raw API objects are decoded once, at the edge, keeping only the fields the
planner reads, so that the planner never touches a dict of unknown shape and a
malformed object fails in one obvious place. What is specific to one of our
kinds (Redis, Xca) lives with that kind's rules in `reconciler.kinds`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypedDict


@dataclass(frozen=True, order=True)
class ObjKey:
    """Identifies an object across passes (kind, namespace, name)."""

    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class ResourceType:
    """Where a kind lives in the API: enough for the client to build its paths."""

    group: str  # "" for the core group
    version: str
    kind: str
    plural: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def path_prefix(self) -> str:
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"


PODS = ResourceType("", "v1", "Pod", "pods")
NAMESPACES = ResourceType("", "v1", "Namespace", "namespaces")


@dataclass(frozen=True)
class Condition:
    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: str = ""
    observed_generation: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": self.type,
            "status": self.status,
            "reason": self.reason,
            "message": self.message,
            "lastTransitionTime": self.last_transition_time,
        }
        if self.observed_generation is not None:
            out["observedGeneration"] = self.observed_generation
        return out


@dataclass(frozen=True)
class PodCondition:
    type: str
    status: str
    reason: str = ""


@dataclass(frozen=True)
class Container:
    """The parts of a container a pod's owner decides, to see drift."""

    name: str
    image: str
    ports: tuple[int, ...] = ()  # containerPort of each declared port


@dataclass(frozen=True)
class OwnerRef:
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool = False
    block_owner_deletion: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": self.controller,
            "blockOwnerDeletion": self.block_owner_deletion,
        }


@dataclass(frozen=True)
class Pod:
    namespace: str
    name: str
    uid: str
    resource_version: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    controller_uid: str | None
    deletion_timestamp: str | None
    phase: str
    controller_kind: str | None = None
    conditions: tuple[PodCondition, ...] = ()
    containers: tuple[Container, ...] = ()
    owner_refs: tuple[OwnerRef, ...] = ()

    @property
    def key(self) -> ObjKey:
        return ObjKey(PODS.kind, self.namespace, self.name)

    @property
    def terminating(self) -> bool:
        return self.deletion_timestamp is not None

    @property
    def ready(self) -> bool:
        return any(c.type == "Ready" and c.status == "True" for c in self.conditions)


# ------------------------------------------------------------ decoding helpers


def rfc3339(at: datetime) -> str:
    """A time as the API stores it in seconds-precision fields
    (lastTransitionTime, events, our status.backoff.retryAfter)."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def meta_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return mapping(obj.get("metadata"))


def mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def generation_of(meta: Mapping[str, Any]) -> int:
    gen = meta.get("generation")
    return gen if isinstance(gen, int) else 0


class ObjectFields(TypedDict):
    """The metadata every object of our kinds is decoded with."""

    namespace: str
    name: str
    uid: str
    resource_version: str
    generation: int
    deletion_timestamp: str | None


def object_fields(meta: Mapping[str, Any]) -> ObjectFields:
    return ObjectFields(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        resource_version=str(meta.get("resourceVersion", "")),
        generation=generation_of(meta),
        deletion_timestamp=meta.get("deletionTimestamp"),
    )


@dataclass(frozen=True)
class Controller:
    """The controlling ownerReference of an object, if any."""

    uid: str | None
    kind: str | None


def controller_of(meta: Mapping[str, Any]) -> Controller:
    for ref in meta.get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return Controller(str(ref.get("uid", "")), str(ref.get("kind", "")))
    return Controller(None, None)


def owner_refs_of(meta: Mapping[str, Any]) -> tuple[OwnerRef, ...]:
    return tuple(
        OwnerRef(
            str(r.get("apiVersion", "")),
            str(r.get("kind", "")),
            str(r.get("name", "")),
            str(r.get("uid", "")),
            r.get("controller") is True,
            r.get("blockOwnerDeletion") is True,
        )
        for r in meta.get("ownerReferences") or ()
        if isinstance(r, Mapping)
    )


def containers_of(spec: Mapping[str, Any]) -> tuple[Container, ...]:
    return tuple(
        Container(
            str(c.get("name", "")),
            str(c.get("image", "")),
            tuple(
                p["containerPort"]
                for p in c.get("ports") or ()
                if isinstance(p, Mapping) and isinstance(p.get("containerPort"), int)
            ),
        )
        for c in spec.get("containers") or ()
        if isinstance(c, Mapping)
    )


def pod_from_api(obj: Mapping[str, Any]) -> Pod:
    """Decode a pod; an absent or partial status is normal (a pod not yet
    scheduled has no conditions), so every field has a fallback."""
    meta = meta_of(obj)
    status = mapping(obj.get("status"))
    conditions = tuple(
        PodCondition(
            type=str(c["type"]),
            status=str(c.get("status", "Unknown")),
            reason=str(c.get("reason") or ""),
        )
        for c in status.get("conditions") or ()
        if isinstance(c, Mapping) and c.get("type")
    )
    controller = controller_of(meta)
    return Pod(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        resource_version=str(meta.get("resourceVersion", "")),
        labels={str(k): str(v) for k, v in mapping(meta.get("labels")).items()},
        annotations={str(k): str(v) for k, v in mapping(meta.get("annotations")).items()},
        controller_uid=controller.uid,
        controller_kind=controller.kind,
        deletion_timestamp=meta.get("deletionTimestamp"),
        phase=str(status.get("phase") or "Unknown"),
        conditions=conditions,
        containers=containers_of(mapping(obj.get("spec"))),
        owner_refs=owner_refs_of(meta),
    )


class PodIndex:
    """Pods by controlling owner and by name, built once per pass.

    Looking pods up per owner instead of scanning them keeps a pass linear in
    the number of objects (a scan per Redis is quadratic at 1000 Redis).
    """

    def __init__(self, pods: Iterable[Pod]) -> None:
        self.by_owner: dict[str, list[Pod]] = {}
        self.by_name: dict[tuple[str, str], Pod] = {}
        for pod in pods:
            if pod.controller_uid:
                self.by_owner.setdefault(pod.controller_uid, []).append(pod)
            self.by_name[(pod.namespace, pod.name)] = pod

    def owned_by(self, uid: str) -> tuple[Pod, ...]:
        return tuple(self.by_owner.get(uid, ()))

    def named(self, namespace: str, name: str) -> Pod | None:
        return self.by_name.get((namespace, name))
