"""A pod decoded from the dict the apiserver's JSON makes (a GET, a page of
JSON decoded in full): every field optional, as in `json_wire` and
`protowire`, which read the same fields from bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.model import (
    Container,
    ContainerState,
    Pod,
    PodCondition,
    controller_of,
    generation_of,
    mapping,
    meta_of,
    owner_refs_of,
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
            tuple(str(a) for a in c.get("args") or ()),
        )
        for c in spec.get("containers") or ()
        if isinstance(c, Mapping)
    )


def container_state(name: str, state: Mapping[str, Any]) -> ContainerState | None:
    """A container's state, if it is not running; None while it runs."""
    for key, waiting in (("waiting", True), ("terminated", False)):
        detail = state.get(key)
        if isinstance(detail, Mapping):
            reason = str(detail.get("reason") or "")
            return ContainerState(name, waiting, reason, str(detail.get("message") or ""))
    return None


def container_states_of(status: Mapping[str, Any]) -> tuple[ContainerState, ...]:
    states = (
        container_state(str(c.get("name", "")), mapping(c.get("state")))
        for c in status.get("containerStatuses") or ()
        if isinstance(c, Mapping)
    )
    return tuple(s for s in states if s is not None)


def _grace(meta: Mapping[str, Any]) -> int | None:
    value = meta.get("deletionGracePeriodSeconds")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def pod_from_api(obj: Mapping[str, Any]) -> Pod:
    """Decode a pod; an absent or partial status is normal (a pod not yet
    scheduled has no conditions), so every field has a fallback."""
    meta = meta_of(obj)
    status = mapping(obj.get("status"))
    conditions = tuple(
        PodCondition(
            type=str(c["type"]),
            status=str(c.get("status") or "Unknown"),
            reason=str(c.get("reason") or ""),
            message=str(c.get("message") or ""),
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
        generation=generation_of(meta),
        deletion_grace_seconds=_grace(meta),
        finalizers=tuple(str(f) for f in meta.get("finalizers") or ()),
        reason=str(status.get("reason") or ""),
        message=str(status.get("message") or ""),
        container_states=container_states_of(status),
    )
