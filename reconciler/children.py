"""The objects our kinds make besides pods (a Redis's Service, budget and
claims), as observed, and the storage classes its claims are made of.

Decoded once, at the edge, like pods: what the planner compares (labels, the
controller, the fields of the spec its rules read) and nothing else. The
rest of a spec (a Service's cluster IPs, IP families, traffic policies) is
never read, and kept for 20,000 children it cost about 56 MB of RSS.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from sys import intern
from typing import Any

from reconciler.model import (
    Child,
    ResourceType,
    controller_of,
    mapping,
    meta_of,
    owner_refs_of,
    shared,
)

SERVICES = ResourceType("", "v1", "Service", "services")
PDBS = ResourceType("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets")
CLAIMS = ResourceType("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims")
NETWORK_POLICIES = ResourceType("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies")
CHILD_TYPES: Mapping[str, ResourceType] = {
    r.kind: r for r in (SERVICES, PDBS, CLAIMS, NETWORK_POLICIES)
}
# Listed only in a pass where some object wants one (`Kind.child_names`): a
# cluster with no Redis that has storage (or a network policy) pays no LIST
# of them, and a role from before they existed meets no 403.
ON_DEMAND = frozenset({CLAIMS.kind, NETWORK_POLICIES.kind})
# Read, never written: whether a claim's class lets it grow. Listed whole (a
# cluster has a handful) in a pass that sees a claim of ours, and looked up
# like a child, under the namespace "".
STORAGE_CLASSES = ResourceType("storage.k8s.io", "v1", "StorageClass", "storageclasses")
EXPANSION_FIELD = "allowVolumeExpansion"

# A budget's policy for unhealthy pods: dropped by an apiserver that does not
# keep it (before 1.27, or its gate off).
POLICY_FIELD = "unhealthyPodEvictionPolicy"
# The fields of each kind's spec that its rules read: the rest is not kept.
SPEC_READ: Mapping[str, tuple[str, ...]] = {
    SERVICES.kind: ("selector", "ports"),
    PDBS.kind: ("selector", "maxUnavailable", "minAvailable", POLICY_FIELD),
    CLAIMS.kind: ("resources", "storageClassName", "volumeName"),
    NETWORK_POLICIES.kind: ("podSelector", "policyTypes", "ingress"),
}
# The fields of each kind's status that its rules read: the disruption
# controller's count, from which the Eviction API answers.
STATUS_READ: Mapping[str, tuple[str, ...]] = {
    SERVICES.kind: (),
    PDBS.kind: ("observedGeneration", "disruptionsAllowed", "currentHealthy", "desiredHealthy"),
    CLAIMS.kind: ("phase", "capacity", "conditions"),
    NETWORK_POLICIES.kind: (),
}


def plural(kind: str) -> str:
    """A kind as a user names many of them: Services, NetworkPolicies,
    StorageClasses."""
    if kind.endswith("y"):
        return kind[:-1] + "ies"
    return kind + ("es" if kind.endswith("s") else "s")


def child_from_api(kind: str, obj: Mapping[str, Any]) -> Child:
    """``kind`` is given: the items of a LIST carry none."""
    meta = meta_of(obj)
    labels = mapping(meta.get("labels"))
    return Child(
        kind=kind,
        namespace=intern(str(meta.get("namespace", ""))),
        name=str(meta.get("name", "")),
        uid=intern(str(meta.get("uid", ""))),
        resource_version=str(meta.get("resourceVersion", "")),
        labels={intern(str(k)): intern(str(v)) for k, v in labels.items()},
        controller_uid=controller_of(meta).uid,
        owner_refs=owner_refs_of(meta),
        spec=_read(SPEC_READ[kind], mapping(obj.get("spec"))),
        deletion_timestamp=meta.get("deletionTimestamp"),
        generation=_int(meta.get("generation")),
        status=_read(STATUS_READ[kind], mapping(obj.get("status"))),
    )


def storage_class_from_api(obj: Mapping[str, Any]) -> Child:
    """A StorageClass as a child of no one: its name, and in ``spec`` the one
    field a rule reads (a class keeps it at the top level)."""
    meta = meta_of(obj)
    return Child(
        kind=STORAGE_CLASSES.kind,
        namespace="",
        name=str(meta.get("name", "")),
        uid=intern(str(meta.get("uid", ""))),
        resource_version=str(meta.get("resourceVersion", "")),
        labels={},
        controller_uid=None,
        owner_refs=(),
        spec={EXPANSION_FIELD: obj.get(EXPANSION_FIELD) is True},
    )


def _read(fields: tuple[str, ...], found: Mapping[str, Any]) -> Mapping[str, Any]:
    return {k: shared(found[k]) for k in fields if k in found}


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def decoder(kind: str) -> Callable[[Mapping[str, Any]], Child]:
    return functools.partial(child_from_api, kind)
