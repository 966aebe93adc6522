"""A Redis object as decoded, and what names it and its pods: the group,
the finalizer and annotations, labels, owner references, pod names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from sys import intern
from typing import Any, ClassVar

from reconciler.actions import (
    ObjRef,
)
from reconciler.constants import LABEL_INSTANCE, LABEL_MANAGED_BY, LABEL_NAME, MANAGED_BY
from reconciler.kinds import owned
from reconciler.kinds.base import Object
from reconciler.model import (
    OwnerRef,
    ResourceType,
    mapping,
    meta_of,
    shared,
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


CONTAINER_NAME = "redis"


APP_NAME = "redis"  # the app.kubernetes.io/name of its pods


@dataclass(frozen=True, kw_only=True, slots=True)
class Redis(Object):
    resource: ClassVar[ResourceType] = RESOURCE
    finalizers: tuple[str, ...]
    spec: Mapping[str, Any]


def from_api(obj: Mapping[str, Any]) -> Redis:
    """Decode a Redis; the spec is kept raw and validated by `validate_spec`,
    because objects can bypass the CRD schema."""
    finalizers = meta_of(obj).get("finalizers") or ()
    return Redis.decoded(
        obj,
        finalizers=tuple(intern(f) for f in finalizers if isinstance(f, str)),
        spec=mapping(shared(obj.get("spec"))),
    )


def pod_name(redis: Redis, index: int) -> str:
    return f"{redis.name}-{index}"


def selector_labels(redis: Redis) -> dict[str, str]:
    """The labels that pick this Redis's pods out of a namespace."""
    return {LABEL_NAME: APP_NAME, LABEL_INSTANCE: redis.name}


def pod_labels(redis: Redis) -> dict[str, str]:
    return {**selector_labels(redis), LABEL_MANAGED_BY: MANAGED_BY}


def controller_ref(redis: Redis) -> OwnerRef:
    return OwnerRef(RESOURCE.api_version, RESOURCE.kind, redis.name, redis.uid, True, True)


def pod_index(redis_name: str, name: str) -> int | None:
    """The index in ``<redis>-<index>``, or None. Called per pod per pass: no regex."""
    prefix_len = len(redis_name) + 1
    if not name.startswith(redis_name) or name[prefix_len - 1 : prefix_len] != "-":
        return None
    tail = name[prefix_len:]
    if not tail.isascii() or not tail.isdigit() or (tail[0] == "0" and len(tail) > 1):
        return None
    return int(tail)


def ref(redis: Redis) -> ObjRef:
    return ObjRef(RESOURCE.api_version, RESOURCE.kind, redis.namespace, redis.name, redis.uid)


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
