"""Posting core/v1 Events with aggregation by count.

The event name is derived from (object uid, type, reason, message), so the
same event reported again finds its earlier copy (409) and bumps ``count`` and
``lastTimestamp`` instead of adding a new object every pass, as kubelet does.
"""

from __future__ import annotations

import hashlib
import logging
import socket
from collections.abc import Callable
from datetime import datetime
from typing import Any

from reconciler.actions import EventSpec
from reconciler.kube import EVENTS, ApiError, Kube, KubeError
from reconciler.model import rfc3339

log = logging.getLogger(__name__)
HOST = socket.gethostname()


def event_name(spec: EventSpec) -> str:
    digest = hashlib.sha256(
        "\0".join((spec.involved.uid, spec.type, spec.reason, spec.message)).encode()
    ).hexdigest()[:16]
    return f"{spec.involved.name}.{digest}"


def event_body(spec: EventSpec, now: datetime) -> dict[str, Any]:
    ts = rfc3339(now)
    ref = spec.involved
    return {
        "apiVersion": EVENTS.api_version,
        "kind": EVENTS.kind,
        "metadata": {"name": event_name(spec), "namespace": ref.namespace},
        "involvedObject": {
            "apiVersion": ref.api_version,
            "kind": ref.kind,
            "namespace": ref.namespace,
            "name": ref.name,
            "uid": ref.uid,
        },
        "type": spec.type,
        "reason": spec.reason,
        "message": spec.message[:1024],
        "source": {"component": spec.component, "host": HOST},
        "reportingComponent": spec.component,
        "reportingInstance": HOST,
        "firstTimestamp": ts,
        "lastTimestamp": ts,
        "count": 1,
    }


def post_event(kube: Kube, spec: EventSpec, clock: Callable[[], datetime]) -> bool:
    """Best effort: an event that cannot be posted is logged, never fatal."""
    now = clock()
    body = event_body(spec, now)
    ns, name = spec.involved.namespace, body["metadata"]["name"]
    try:
        try:
            kube.create(EVENTS, ns, body)
        except ApiError as exc:
            if exc.status != 409:
                raise
            old = kube.get(EVENTS, ns, name)
            kube.merge_patch(
                EVENTS,
                ns,
                name,
                {
                    "count": int(old.get("count") or 1) + 1,
                    "lastTimestamp": body["lastTimestamp"],
                    "metadata": {"resourceVersion": old["metadata"]["resourceVersion"]},
                },
            )
        return True
    except KubeError as exc:
        log.warning("[%s/%s] could not post event %s: %s", ns, spec.involved.name, spec.reason, exc)
        return False
