"""The objects our kinds make besides pods (a Redis's Service), as observed.

Decoded once, at the edge, like pods: what the planner compares (labels, the
controller, the spec as stored) and nothing else. The spec is kept as the
apiserver returned it, since each kind's rules read a different part of it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from reconciler.model import (
    Child,
    ResourceType,
    controller_of,
    mapping,
    meta_of,
    owner_refs_of,
)

SERVICES = ResourceType("", "v1", "Service", "services")
PDBS = ResourceType("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets")
CHILD_TYPES: Mapping[str, ResourceType] = {r.kind: r for r in (SERVICES, PDBS)}


def child_from_api(kind: str, obj: Mapping[str, Any]) -> Child:
    """``kind`` is given: the items of a LIST carry none."""
    meta = meta_of(obj)
    labels = mapping(meta.get("labels"))
    return Child(
        kind=kind,
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        resource_version=str(meta.get("resourceVersion", "")),
        labels={str(k): str(v) for k, v in labels.items()},
        controller_uid=controller_of(meta).uid,
        owner_refs=owner_refs_of(meta),
        spec=mapping(obj.get("spec")),
        deletion_timestamp=meta.get("deletionTimestamp"),
    )


def decoder(kind: str) -> Callable[[Mapping[str, Any]], Child]:
    return functools.partial(child_from_api, kind)
