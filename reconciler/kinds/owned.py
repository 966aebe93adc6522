"""What every object one of our kinds makes besides pods (a Service, a
disruption budget) takes from its owner, and the one rule they share: the
labels we set are ours, the labels others add are theirs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.actions import ObjRef
from reconciler.model import Child, ObjKey

DRIFT = "Drift"  # the reason of the event that says something was put back


@dataclass(frozen=True)
class Owner:
    key: ObjKey
    uid: str
    ref: ObjRef  # for events
    labels: Mapping[str, str]  # ours, on the child too
    selector: Mapping[str, str]  # its pods' labels
    owner_ref: Mapping[str, Any]
    component: str


def metadata(owner: Owner, name: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": owner.key.namespace,
        "labels": dict(owner.labels),
        "ownerReferences": [dict(owner.owner_ref)],
    }


def labels_patch(owner: Owner, child: Child) -> dict[str, Any]:
    """The labels of ours the child lacks or has changed, as a merge patch."""
    labels = {k: v for k, v in owner.labels.items() if child.labels.get(k) != v}
    return {"metadata": {"labels": labels}} if labels else {}


def what_drifted(patch: Mapping[str, Any]) -> str:
    """ "labels, ports, selector": the parts a merge patch puts back."""
    parts = [*(["labels"] if "metadata" in patch else []), *sorted(patch.get("spec") or {})]
    return ", ".join(parts)
