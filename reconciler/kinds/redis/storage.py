"""A Redis's data: one PersistentVolumeClaim per pod index, ``data-<pod>``,
mounted where the image's Redis writes (``/data``), as a StatefulSet's
volumeClaimTemplates give each pod its own.

The data follows the name: a pod replaced for any reason (a rollout, an
eviction, a hand delete, a lost node) mounts the claim of its index again,
and no pass ever makes a second claim for an index. What happens to the
claims is the user's choice, StatefulSet's retention policy:
  - ``whenDeleted: Delete``: each claim is owned by the Redis and goes with it
    through the garbage collector; ``Retain`` (the default): no owner, so it
    stays, and a Redis made again under that name mounts it again;
  - ``whenScaled: Delete``: the claim of an index at or above ``num`` is
    deleted once its pod is gone; ``Retain`` (the default): it is mounted
    again on a scale-up.
This module reads the spec and says what a claim and a pod are made of;
`claims` plans their writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.children import CLAIMS, ChildType
from reconciler.kinds.owned import Owner
from reconciler.kinds.redis.placement import quoted
from reconciler.kinds.redis.quantity import SIZE_MAX, to_bytes, written

# Listed only when some Redis has storage; kept whole by a sharded replica (a
# claim outlives its Redis, and one made again under that name, in any
# bucket, mounts it); the storage classes say whether one may grow.
CHILD = ChildType(
    CLAIMS,
    ("resources", "storageClassName", "volumeName"),
    ("phase", "capacity", "conditions"),
    on_demand=True,
    bucketed=False,
    reads_classes=True,
)
KIND = CHILD.kind
VOLUME = "data"  # the pod's volume, and the prefix of its claim's name
MOUNT_PATH = "/data"  # the Redis image's working directory: its RDB and AOF files
RETAIN, DELETE = "Retain", "Delete"
POLICY_FIELD = "persistentVolumeClaimRetentionPolicy"
GRACE_FIELD = "terminationGracePeriodSeconds"
GRACE_DEFAULT = 30  # a pod's own default: said, it changes nothing


@dataclass(frozen=True)
class Storage:
    """spec.storage, checked: ``size`` as written and in bytes."""

    size: str
    size_bytes: int
    class_name: str | None = None
    when_deleted: str = RETAIN
    when_scaled: str = RETAIN


def claim_name(pod: str) -> str:
    return f"{VOLUME}-{pod}"


def _policy_errors(found: Any) -> tuple[list[tuple[str, str]], dict[str, str]]:
    path = f"spec.storage.{POLICY_FIELD}"
    if found is None:
        return [], {}
    if not isinstance(found, Mapping):
        return [(path, f"must be an object, got {quoted(found)}")], {}
    errors, chosen = [], {}
    for key in ("whenDeleted", "whenScaled"):
        value = found.get(key, RETAIN)
        if value not in (RETAIN, DELETE):
            errors.append((f"{path}.{key}", f"must be {RETAIN} or {DELETE}, got {quoted(value)}"))
        else:
            chosen[key] = value
    return errors, chosen


def _size_error(size: Any) -> str | None:
    """As the CRD: its quantity pattern, above zero, at most SIZE_MAX."""
    if size is None:
        return "is required within spec.storage"
    if isinstance(size, bool) or not isinstance(size, (str, int)):
        return f"must be a quantity such as 1Gi, got {quoted(size)}"
    found = to_bytes(str(size)) if written(size) else None
    if found is None or found <= 0:
        return f"must be a quantity above zero such as 1Gi, got {quoted(size)}"
    if found > (to_bytes(SIZE_MAX) or 0):
        return f"must be at most {SIZE_MAX} bytes, got {quoted(size)}"
    return None


def field_errors(spec: Mapping[str, Any]) -> list[tuple[str, str]]:
    """spec.storage and the grace period, as the CRD checks them (an object
    stored past its schema still gets a message naming the field)."""
    errors = _grace_errors(spec.get(GRACE_FIELD))
    found = spec.get("storage")
    if found is None:
        return errors
    if not isinstance(found, Mapping):
        return [*errors, ("spec.storage", f"must be an object, got {quoted(found)}")]
    size_error = _size_error(found.get("size"))
    if size_error is not None:
        errors.append(("spec.storage.size", size_error))
    name = found.get("storageClassName")
    if name is not None and (not isinstance(name, str) or not name):
        errors.append(("spec.storage.storageClassName", f"must be a name, got {quoted(name)}"))
    return errors + _policy_errors(found.get(POLICY_FIELD))[0]


def _grace_errors(grace: Any) -> list[tuple[str, str]]:
    if grace is None or (isinstance(grace, int) and not isinstance(grace, bool) and grace >= 0):
        return []
    return [(f"spec.{GRACE_FIELD}", f"must be a whole number of seconds, got {quoted(grace)}")]


def storage_of(spec: Mapping[str, Any]) -> Storage | None:
    """spec.storage of a spec that `field_errors` passed; None without one."""
    found = spec.get("storage")
    if not isinstance(found, Mapping):
        return None
    size = str(found["size"])
    chosen = _policy_errors(found.get(POLICY_FIELD))[1]
    return Storage(
        size,
        to_bytes(size) or 0,
        found.get("storageClassName"),
        chosen.get("whenDeleted", RETAIN),
        chosen.get("whenScaled", RETAIN),
    )


def grace_of(spec: Mapping[str, Any]) -> int | None:
    """The pods' grace period when it is not their default (None)."""
    grace = spec.get(GRACE_FIELD)
    return None if grace is None or grace == GRACE_DEFAULT else int(grace)


def pod_fields(storage: Storage | None, grace: int | None) -> dict[str, Any]:
    """What these fields make of each pod, for the hash a pod is made with:
    the claim it mounts (not its size: a claim grows in place) and the
    grace period. Empty when neither is set, so that a Redis without them
    keeps the pods an earlier release made."""
    fields: dict[str, Any] = {}
    if storage is not None:
        fields["data"] = {"mountPath": MOUNT_PATH, "class": storage.class_name}
    if grace is not None:
        fields[GRACE_FIELD] = grace
    return fields


def claim_manifest(owner: Owner, storage: Storage, name: str) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": owner.key.namespace,
        "labels": dict(owner.labels),
    }
    if storage.when_deleted == DELETE:
        meta["ownerReferences"] = [dict(owner.owner_ref)]
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": storage.size}},
    }
    if storage.class_name:
        spec["storageClassName"] = storage.class_name
    return {"apiVersion": CLAIMS.api_version, "kind": KIND, "metadata": meta, "spec": spec}
