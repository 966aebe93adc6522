"""A Redis's headless Service: stable names for its pods.

Each pod is ``<pod>.<redis>.<namespace>.svc`` (the pods set ``hostname`` and
``subdomain``), and the Service's EndpointSlices list the Ready pods, so
clients need no pod IP. The Service is owned by the Redis (a controller
reference), so the garbage collector deletes it with the Redis.

What we set is kept as we set it: the labels that are ours, the selector
and the port. Labels and annotations others add, and every field the
apiserver fills in (clusterIPs, ipFamilies, sessionAffinity), are left
alone, so a pass never fights another controller over the Service.
A Service of that name that is not this Redis's is never touched: the status
says so, as for a pod.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.actions import CreateChild, EventSpec, PatchChild
from reconciler.children import SERVICES, ChildType
from reconciler.kinds.owned import DRIFT, Owner, labels_patch, metadata, what_drifted
from reconciler.kinds.redis import server
from reconciler.model import Child

CHILD = ChildType(SERVICES, ("selector", "ports"))
KIND = CHILD.kind
PORT_NAME = "redis"  # the port's name on the Service and on the container
CONFLICT = "ServiceConflict"  # the Degraded reason while another holds its name
CREATED = "CreateService"  # the reason of the event that says it was made


@dataclass(frozen=True)
class ServicePlan:
    """The Service write of this pass, if any; the name to show in the status
    (the Service exists, or is created by this plan); and whose Service
    holds the name, when it is not ours."""

    actions: tuple[CreateChild | PatchChild, ...]
    shown: str | None
    held_by_another: bool = False


def ports(port: int, metrics: bool = False) -> list[dict[str, Any]]:
    """The server's port, and the exporter's when its pods have one."""
    found = [{"name": PORT_NAME, "port": port, "targetPort": PORT_NAME, "protocol": "TCP"}]
    if metrics:
        name = server.METRICS_PORT_NAME
        found.append(
            {"name": name, "port": server.METRICS_PORT, "targetPort": name, "protocol": "TCP"}
        )
    return found


def manifest(owner: Owner, port: int, metrics: bool = False) -> dict[str, Any]:
    return {
        "apiVersion": SERVICES.api_version,
        "kind": KIND,
        "metadata": metadata(owner, owner.key.name),
        "spec": {
            "clusterIP": "None",
            "selector": dict(owner.selector),
            "ports": ports(port, metrics),
            # Only Ready pods have names that resolve: a client never gets
            # one that refuses connections.
            "publishNotReadyAddresses": False,
        },
    }


def _ports_as_set(found: Any) -> list[dict[str, Any]]:
    """The stored ports, as far as we set them (the apiserver adds nothing
    to a headless Service's ports, but an edit may)."""
    keys = ("name", "port", "targetPort", "protocol")
    return [{k: p.get(k) for k in keys} for p in found or () if isinstance(p, Mapping)]


def drift(owner: Owner, service: Child, port: int, metrics: bool = False) -> dict[str, Any]:
    """The merge patch that puts back what we set; empty when nothing drifted."""
    patch = labels_patch(owner, service)
    spec: dict[str, Any] = {}
    selector = service.spec.get("selector") or {}
    if selector != owner.selector:
        extra = {k: None for k in selector if k not in owner.selector}
        spec["selector"] = {**owner.selector, **extra}
    if _ports_as_set(service.spec.get("ports")) != ports(port, metrics):
        spec["ports"] = ports(port, metrics)
    if spec:
        patch["spec"] = spec
    return patch


def _why(patch: Mapping[str, Any], found: Child) -> tuple[str, str]:
    """Why the patch, and the verb of its event: ports we set, that differ
    only in number or in the exporter's, follow the spec; anything else was
    changed by hand."""
    stored = _ports_as_set(found.spec.get("ports"))
    ours = {PORT_NAME, server.METRICS_PORT_NAME}
    ports_only = set(patch) == {"spec"} and set(patch["spec"]) == {"ports"}
    if ports_only and all(p["name"] in ours and p["targetPort"] == p["name"] for p in stored):
        return "ports follow spec.port and spec.exporter", "Updated"
    return f"drift: {what_drifted(patch)} changed by hand", "Restored"


def plan_service(
    owner: Owner, found: Child | None, port: int, metrics: bool = False
) -> ServicePlan:
    """Create it, put back what drifted, or leave another's Service alone.
    ``metrics``: its pods run the exporter, whose port the Service names."""
    name = owner.key.name
    if found is None:
        message = f"Created service {name}: stable names for its pods"
        event = EventSpec(owner.ref, "Normal", CREATED, message, owner.component)
        return ServicePlan((CreateChild(owner.key, manifest(owner, port, metrics), event),), name)
    if found.controller_uid != owner.uid:
        return ServicePlan((), None, held_by_another=True)
    if found.terminating:
        return ServicePlan((), None)  # gone soon: the next pass creates it anew
    patch = drift(owner, found, port, metrics)
    if not patch:
        return ServicePlan((), name)
    why, said = _why(patch, found)
    event = EventSpec(owner.ref, "Normal", DRIFT, f"{said} service {name}: {why}", owner.component)
    return ServicePlan(
        (PatchChild(owner.key, found.key, found.resource_version, patch, why, event),), name
    )
