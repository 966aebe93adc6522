"""The observed state of the cluster, as frozen values the planner can trust.

Raw API objects are decoded here once, keeping only the fields the planner
reads, so that the planner never touches a dict of unknown shape and a
malformed object fails in one obvious place.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler.constants import TEMPLATE_HASH_ANNOTATION


@dataclass(frozen=True, order=True)
class ObjKey:
    """Identifies an object across passes (kind, namespace, name)."""

    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


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

    @property
    def key(self) -> ObjKey:
        return ObjKey("Redis", self.namespace, self.name)


@dataclass(frozen=True)
class Xca:
    namespace: str
    name: str
    uid: str
    resource_version: str
    generation: int
    deletion_timestamp: str | None
    status: Mapping[str, Any]

    @property
    def key(self) -> ObjKey:
        return ObjKey("Xca", self.namespace, self.name)


@dataclass(frozen=True)
class PodCondition:
    type: str
    status: str
    reason: str = ""


@dataclass(frozen=True)
class Pod:
    namespace: str
    name: str
    uid: str
    resource_version: str
    labels: Mapping[str, str]
    template_hash: str | None
    controller_uid: str | None
    deletion_timestamp: str | None
    phase: str
    controller_kind: str | None = None
    conditions: tuple[PodCondition, ...] = ()

    @property
    def key(self) -> ObjKey:
        return ObjKey("Pod", self.namespace, self.name)

    @property
    def terminating(self) -> bool:
        return self.deletion_timestamp is not None

    @property
    def ready(self) -> bool:
        return any(c.type == "Ready" and c.status == "True" for c in self.conditions)


@dataclass(frozen=True)
class Failure:
    """Memory of consecutive failed writes for one object.

    It is an input of the planner (like the cluster itself) so that backoff and
    the Degraded condition stay pure functions of what was observed.
    """

    count: int
    message: str
    reason: str = "ReconcileError"
    retry_at: float = 0.0


@dataclass(frozen=True)
class Snapshot:
    """One pass's view. ``None`` for a kind means its LIST failed this pass."""

    redis: tuple[Redis, ...] | None
    xcas: tuple[Xca, ...] | None
    pods: tuple[Pod, ...] | None
    failures: Mapping[ObjKey, Failure] = field(default_factory=dict)


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _generation(meta: Mapping[str, Any]) -> int:
    gen = meta.get("generation")
    return gen if isinstance(gen, int) else 0


def redis_from_api(obj: Mapping[str, Any]) -> Redis:
    meta = _meta(obj)
    return Redis(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        resource_version=str(meta.get("resourceVersion", "")),
        generation=_generation(meta),
        deletion_timestamp=meta.get("deletionTimestamp"),
        finalizers=tuple(f for f in meta.get("finalizers") or () if isinstance(f, str)),
        spec=_mapping(obj.get("spec")),
        status=_mapping(obj.get("status")),
    )


def xca_from_api(obj: Mapping[str, Any]) -> Xca:
    meta = _meta(obj)
    return Xca(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        resource_version=str(meta.get("resourceVersion", "")),
        generation=_generation(meta),
        deletion_timestamp=meta.get("deletionTimestamp"),
        status=_mapping(obj.get("status")),
    )


def _controller(meta: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(uid, kind) of the controlling ownerReference, if any."""
    for ref in meta.get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return str(ref.get("uid", "")), str(ref.get("kind", ""))
    return None, None


def pod_from_api(obj: Mapping[str, Any]) -> Pod:
    """Decode a pod; absent or partial status is normal (seed 000 crashed on it)."""
    meta = _meta(obj)
    status = _mapping(obj.get("status"))
    conditions = tuple(
        PodCondition(
            type=str(c.get("type", "")),
            status=str(c.get("status", "Unknown")),
            reason=str(c.get("reason") or ""),
        )
        for c in status.get("conditions") or ()
        if isinstance(c, Mapping) and c.get("type")
    )
    labels = {str(k): str(v) for k, v in _mapping(meta.get("labels")).items()}
    annotations = _mapping(meta.get("annotations"))
    owner_uid, owner_kind = _controller(meta)
    return Pod(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        resource_version=str(meta.get("resourceVersion", "")),
        labels=labels,
        template_hash=annotations.get(TEMPLATE_HASH_ANNOTATION),
        controller_uid=owner_uid,
        controller_kind=owner_kind,
        deletion_timestamp=meta.get("deletionTimestamp"),
        phase=str(status.get("phase") or "Unknown"),
        conditions=conditions,
    )
