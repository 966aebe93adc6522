"""The builders' values (tests/unit/builders.py) as the apiserver stores
them, for a `FakeKube` to hold what a test's snapshot shows: the fake
answers a write to an object it does not hold with a 404, as the apiserver
does, so the objects a plan writes to must be there."""

from __future__ import annotations

from typing import Any

from reconciler.kinds.base import Object
from reconciler.kinds.redis.identity import Redis
from reconciler.model import LABEL_BUCKET, Child, Pod
from tests.unit.fakes import FakeKube

Value = Object | Pod | Child


def _meta(value: Value, labels: dict[str, str]) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": value.name,
        "namespace": value.namespace,
        "uid": value.uid,
        "resourceVersion": value.resource_version,
        "labels": labels,
    }
    if value.generation:
        meta["generation"] = value.generation
    if value.deletion_timestamp:
        meta["deletionTimestamp"] = value.deletion_timestamp
    if isinstance(value, Redis | Pod) and value.finalizers:
        meta["finalizers"] = list(value.finalizers)
    if isinstance(value, Pod | Child):
        refs = _owner_refs(value)
        if refs:
            meta["ownerReferences"] = refs
    return meta


def _owner_refs(value: Pod | Child) -> list[dict[str, Any]]:
    """Its references, the controller one being ``controller_uid``'s (a
    builder may set that alone, to say another controls it)."""
    refs = [{**r.to_dict(), "controller": r.uid == value.controller_uid} for r in value.owner_refs]
    if value.controller_uid is not None and value.controller_uid not in {r["uid"] for r in refs}:
        kind = getattr(value, "controller_kind", None) or "Redis"
        refs.append(
            {
                "apiVersion": "v1",
                "kind": kind,
                "name": "other",
                "uid": value.controller_uid,
                "controller": True,
            }
        )
    return refs


def api_of(value: Value) -> tuple[str, dict[str, Any]]:
    """(kind, the object as stored): the metadata a write is checked against
    (uid, resourceVersion, finalizers) and what a merge patch merges into."""
    if isinstance(value, Pod):
        meta = _meta(value, dict(value.labels))
        meta["annotations"] = dict(value.annotations)
        return "Pod", {"metadata": meta, "status": {"phase": value.phase}}
    if isinstance(value, Child):
        body = {"metadata": _meta(value, dict(value.labels)), "spec": dict(value.spec)}
        return value.kind, {**body, "status": dict(value.status)}
    labels = {LABEL_BUCKET: value.bucket_label} if value.bucket_label else {}
    body = {"metadata": _meta(value, labels), "status": dict(value.status)}
    if isinstance(value, Redis):
        body["spec"] = dict(value.spec)
    return value.resource.kind, body


def holding(*values: Value, kube: FakeKube | None = None) -> FakeKube:
    """``kube`` (a new one if None), holding these values as well."""
    kube = kube if kube is not None else FakeKube()
    for value in values:
        kind, body = api_of(value)
        kube.objects[(kind, value.namespace, value.name)] = body
    return kube
