"""Status conditions as the API conventions describe them, for any kind.

A condition's lastTransitionTime changes only when its status flips, so that
a status rewritten with the same meaning compares equal and is not written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from reconciler.actions import Action, PatchStatus
from reconciler.model import Condition, ObjKey, rfc3339


@dataclass(frozen=True)
class Verdict:
    """What a condition says: is it true, and why."""

    ok: bool
    reason: str
    message: str


def observed_conditions(status: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The stored conditions by type; malformed entries are ignored."""
    out: dict[str, Mapping[str, Any]] = {}
    for c in status.get("conditions") or ():
        if isinstance(c, Mapping) and isinstance(c.get("type"), str):
            out[c["type"]] = c
    return out


def condition(
    type_: str,
    verdict: Verdict,
    generation: int,
    observed: Mapping[str, Mapping[str, Any]],
    now: datetime,
) -> Condition:
    """Build a condition, keeping lastTransitionTime unless the status flips."""
    status = "True" if verdict.ok else "False"
    old = observed.get(type_)
    ltt = rfc3339(now)
    if old is not None and old.get("status") == status and old.get("lastTransitionTime"):
        ltt = str(old["lastTransitionTime"])
    return Condition(type_, status, verdict.reason, verdict.message, ltt, generation)


def status_changes(observed: Mapping[str, Any], desired: Mapping[str, Any]) -> tuple[str, ...]:
    """The fields a merge patch of ``desired`` would change in the stored status."""
    return tuple(sorted(k for k, v in desired.items() if observed.get(k) != v))


SHARD_FIELD = "shard"


def holder_field(holder: str | None) -> dict[str, Any]:
    """status.shard: the replica that holds the object's bucket, so `kubectl
    get -o wide` shows who works on it. An unsharded pass leaves it alone, as
    it leaves the bucket label: a `sync` beside sharded replicas that removed
    it would undo their write every time it runs."""
    return {SHARD_FIELD: holder} if holder is not None else {}


def status_after(
    status: Mapping[str, Any], actions: Sequence[Action], key: ObjKey
) -> dict[str, Any]:
    """The stored status with this object's status patches merged in (a null
    removes a field, as in the merge patch itself)."""
    merged = dict(status)
    for action in actions:
        if isinstance(action, PatchStatus) and action.owner == key:
            merged.update(action.status)
    return {k: v for k, v in merged.items() if v is not None}


def is_true(conditions: Mapping[str, Mapping[str, Any]], type_: str) -> bool:
    return (conditions.get(type_) or {}).get("status") == "True"
