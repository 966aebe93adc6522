"""Xca: activated once, with an event; an active Xca costs nothing.

An Xca has no pods and no finalizer: its one write is the status patch that
marks it active. While it is backing off after failed writes, it gets none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from reconciler.actions import Action, EventSpec, PatchStatus
from reconciler.backoff import STATUS_FIELD, Failure, from_status, to_status
from reconciler.health import READY, Health
from reconciler.kinds.base import Kind, Object, PlanInput, StatusOnly
from reconciler.kinds.conditions import holder_field, status_after, status_changes
from reconciler.model import ResourceType, rfc3339

GROUP = "apps.xca.k8s.kb.cx"
VERSION = "v1beta1"
RESOURCE = ResourceType(GROUP, VERSION, "Xca", "xcas")
COMPONENT = "xca-controller"


@dataclass(frozen=True, kw_only=True, slots=True)
class Xca(Object):
    resource: ClassVar[ResourceType] = RESOURCE


def from_api(obj: Mapping[str, Any]) -> Xca:
    return Xca.decoded(obj)


def _record(xca: Xca, failure: Failure | None, holder: str | None) -> list[Action]:
    """Write the failure record (None clears it) and the holder unless they
    are stored already."""
    desired = {STATUS_FIELD: to_status(failure), **holder_field(holder)}
    changed = status_changes(xca.status, desired)
    if not changed:
        return []
    return [PatchStatus(xca.key, xca.resource_version, desired, changed=changed)]


def plan(xca: Xca, inp: PlanInput) -> list[Action]:
    if xca.deletion_timestamp:
        return []
    if inp.gate.hold:
        return _record(xca, inp.gate.failure, inp.holder)
    if xca.status.get("active") is True:
        return _record(xca, None, inp.holder)
    event = EventSpec(KIND.ref(xca), "Normal", "Activated", f"Xca {xca.name} activated", COMPONENT)
    status: dict[str, Any] = {
        "active": True,
        "last_update_time": rfc3339(inp.now),
        **holder_field(inp.holder),
    }
    if xca.failure is not None:
        status[STATUS_FIELD] = None
    return [PatchStatus(xca.key, xca.resource_version, status, (event,))]


def health(xca: Xca, actions: Sequence[Action]) -> Health:
    status = status_after(xca.status, actions, xca.key)
    failure = from_status(status)
    if failure is not None:
        return Health(failure.reason, failure.message, degraded=True)
    if status.get("active") is True:
        return Health(READY, "active")
    if xca.deletion_timestamp:
        return Health("Deleting", "being deleted", progressing=True)
    return Health("Activating", "not active yet", progressing=True)


KIND: Kind[Xca] = Kind(RESOURCE, COMPONENT, from_api, StatusOnly(plan), health)
