"""The objects our kinds make besides pods (a Redis's Service, budget and
claims), as observed, and the storage classes its claims are made of.

Decoded once, at the edge, like pods: what the planner compares (labels, the
controller, the fields of the spec its rules read) and nothing else. The
rest of a spec (a Service's cluster IPs, IP families, traffic policies) is
never read, and kept for 20,000 children it cost about 56 MB of RSS.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
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
# Read, never written: whether a claim's class lets it grow. Listed whole (a
# cluster has a handful) in a pass that sees a child whose type reads them
# (`ChildType.reads_classes`), and looked up like a child, under the
# namespace "".
STORAGE_CLASSES = ResourceType("storage.k8s.io", "v1", "StorageClass", "storageclasses")
EXPANSION_FIELD = "allowVolumeExpansion"


@dataclass(frozen=True)
class ChildType:
    """A type of object a kind makes besides pods, as the kind declares it
    (`Kind.children`), once: the engine lists, decodes and writes it from
    this, and `reconciler check` and `reconciler manifests` ask for the
    verbs its writes need (checks/needs.py)."""

    resource: ResourceType
    # The fields of its spec and status that the kind's rules read: the rest
    # is not kept.
    spec_read: tuple[str, ...]
    status_read: tuple[str, ...] = ()
    # Of a type that keeps what it holds at its top level (a ConfigMap's
    # data): those fields, read into its ``spec`` beside the spec's own.
    top_read: tuple[str, ...] = ()
    # Listed only in a pass where some object wants one (`Kind.child_names`):
    # a cluster with no object that wants one pays no LIST of them, and a
    # role from before they existed meets no 403.
    on_demand: bool = False
    # A sharded replica keeps those of its buckets' objects (by their
    # controller); False: every one is kept (a claim may outlive its owner,
    # and an owner made again under that name, in any bucket, mounts it).
    bucketed: bool = True
    # A pass that sees one of ours lists the storage classes.
    reads_classes: bool = False

    @property
    def kind(self) -> str:
        return self.resource.kind

    def decode(self, obj: Mapping[str, Any]) -> Child:
        return child_from_api(self, obj)


def plural(kind: str) -> str:
    """A kind as a user names many of them: Services, NetworkPolicies,
    StorageClasses."""
    if kind.endswith("y"):
        return kind[:-1] + "ies"
    return kind + ("es" if kind.endswith("s") else "s")


def child_from_api(child: ChildType, obj: Mapping[str, Any]) -> Child:
    """The type is given: the items of a LIST carry no kind."""
    meta = meta_of(obj)
    labels = mapping(meta.get("labels"))
    return Child(
        kind=child.kind,
        namespace=intern(str(meta.get("namespace", ""))),
        name=str(meta.get("name", "")),
        uid=intern(str(meta.get("uid", ""))),
        resource_version=str(meta.get("resourceVersion", "")),
        labels={intern(str(k)): intern(str(v)) for k, v in labels.items()},
        controller_uid=controller_of(meta).uid,
        owner_refs=owner_refs_of(meta),
        spec={**_read(child.spec_read, mapping(obj.get("spec"))), **_read(child.top_read, obj)},
        deletion_timestamp=meta.get("deletionTimestamp"),
        generation=_int(meta.get("generation")),
        status=_read(child.status_read, mapping(obj.get("status"))),
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
