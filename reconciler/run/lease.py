"""A coordination.k8s.io/v1 Lease, decoded once, and the one way to read and write it.

The leader elector and the shard members hold Leases by the same rules: read
a record, compare it, write it back with its resourceVersion. Both go through
`Leases`, so neither builds a Lease dict by hand nor digs in one; what this
type does not model (another tool's labels, spec fields of a newer release)
is carried through from the object as it was read, as client-go's LeaseLock
keeps the ObjectMeta it got.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from reconciler.client.interface import Client
from reconciler.client.kube import LEASES

# The spec fields `Lease` models, by their wire names.
HOLDER = "holderIdentity"
DURATION = "leaseDurationSeconds"
ACQUIRED = "acquireTime"
RENEWED = "renewTime"
TRANSITIONS = "leaseTransitions"


@dataclass(frozen=True)
class Lease:
    """One Lease's identity and record; `body` is the object as read."""

    name: str
    holder: str = ""
    duration: int | None = None
    acquired: str | None = None
    renewed: str | None = None
    transitions: int | None = None
    version: str = ""  # resourceVersion; empty until the apiserver stored it
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    body: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def decode(cls, obj: Mapping[str, Any]) -> Lease:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        return cls(
            name=str(meta.get("name") or ""),
            holder=str(spec.get(HOLDER) or ""),
            duration=_int_or_none(spec.get(DURATION)),
            acquired=spec.get(ACQUIRED),
            renewed=spec.get(RENEWED),
            transitions=_int_or_none(spec.get(TRANSITIONS)),
            version=str(meta.get("resourceVersion") or ""),
            labels=dict(meta.get("labels") or {}),
            annotations=dict(meta.get("annotations") or {}),
            body=obj,
        )

    def encode(self, namespace: str) -> dict[str, Any]:
        """The object to send: what was read, with this record in place."""
        meta = dict(self.body.get("metadata") or {})
        meta.update(name=self.name, namespace=namespace)
        _put(meta, "labels", dict(self.labels) or None)
        _put(meta, "annotations", dict(self.annotations) or None)
        _put(meta, "resourceVersion", self.version or None)
        spec = dict(self.body.get("spec") or {})
        _put(spec, HOLDER, self.holder if self.holder or HOLDER in spec else None)
        _put(spec, DURATION, self.duration)
        _put(spec, ACQUIRED, self.acquired)
        _put(spec, RENEWED, self.renewed)
        _put(spec, TRANSITIONS, self.transitions)
        return {
            **self.body,
            "apiVersion": LEASES.api_version,
            "kind": LEASES.kind,
            "metadata": meta,
            "spec": spec,
        }

    def duration_or(self, default: float) -> float:
        """How long the holder's claim lasts unrenewed (the default when unset)."""
        return float(self.duration or default)

    def record(self) -> tuple[object, ...]:
        """What changes whenever anyone writes the Lease."""
        return (self.version, self.holder, self.renewed, self.transitions, self.duration)

    def held_by(self, holder: str, now: str, duration: int) -> Lease:
        """Renewed by its holder, or taken by another: client-go's record."""
        if holder == self.holder:
            return replace(self, duration=duration, renewed=now)
        return replace(
            self,
            holder=holder,
            duration=duration,
            acquired=now,
            renewed=now,
            transitions=(self.transitions or 0) + 1,
        )


def _int_or_none(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        return int(value)
    except ValueError:
        return None


def _put(into: dict[str, Any], key: str, value: object) -> None:
    """Set a field, or clear it if it was there and is unset now."""
    if value is None:
        into.pop(key, None)
    else:
        into[key] = value


class Leases:
    """The Lease requests of one namespace, in typed values."""

    def __init__(self, kube: Client, namespace: str) -> None:
        self.kube, self.namespace = kube, namespace

    def get(self, name: str) -> Lease:
        return Lease.decode(self.kube.get(LEASES, self.namespace, name))

    def list(self, selector: str) -> builtins.list[Lease]:
        found: builtins.list[dict[str, Any]] = self.kube.list(LEASES, self.namespace, selector)
        return [Lease.decode(obj) for obj in found]

    def create(self, lease: Lease) -> Lease:
        return Lease.decode(self.kube.create(LEASES, self.namespace, lease.encode(self.namespace)))

    def replace(self, lease: Lease) -> Lease:
        """A PUT guarded by the resourceVersion the Lease was read at."""
        body = lease.encode(self.namespace)
        return Lease.decode(self.kube.replace(LEASES, self.namespace, lease.name, body))

    def delete(self, lease: Lease) -> None:
        """Deleted only if nobody wrote it since it was read."""
        self.kube.delete(LEASES, self.namespace, lease.name, resource_version=lease.version)
