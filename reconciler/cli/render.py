"""Human and JSON renderings of a plan and of a pass summary."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from reconciler.actions import (
    Action,
    CreateChild,
    CreatePod,
    DeleteChild,
    DeletePod,
    EvictPod,
    PatchChild,
    PatchFinalizers,
    PatchLabels,
    PatchPodMetadata,
    PatchStatus,
    Plan,
    Verb,
)
from reconciler.health import PAUSED, not_ready_json

SYMBOLS = {Verb.CREATE: "+", Verb.DELETE: "-"}


def _symbol(action: Action) -> str:
    return SYMBOLS.get(action.verb, "~")


def plan_text(plan: Plan) -> str:
    """Readable like `terraform plan`: grouped by object, one line an action;
    then each object that will still not be Ready, and why."""
    pending = plan.pending
    if not plan.actions:
        lines = ["No changes. The cluster matches the desired state."] if not pending else []
        lines += ["No changes to make now."] if pending else []
    else:
        lines = []
        for owner, actions in plan.by_owner().items():
            lines.append(f"{owner.kind} {owner}:")
            lines.extend(f"  {_symbol(a)} {a.describe()}" for a in actions)
        verbs = Counter(a.verb for a in plan.actions)
        creates, deletes = verbs[Verb.CREATE], verbs[Verb.DELETE]
        lines.append("")
        lines.append(
            f"Plan: {creates} to create, {deletes} to delete, "
            f"{len(plan.actions) - creates - deletes} to patch."
        )
    held = {k: h for k, h in pending.items() if h.state == PAUSED}
    moving = {k: h for k, h in pending.items() if h.state != PAUSED}
    if moving:
        lines.append("")
        lines.append("Not Ready yet:")
        lines.extend(f"  {k.kind} {k}: {h.state}: {h.message}" for k, h in moving.items())
    if held:
        lines.append("")
        lines.append("Paused (spec.paused: their pods are left as they are):")
        lines.extend(f"  {k.kind} {k}: {h.message}" for k, h in held.items())
    return "\n".join(lines)


def action_json(action: Action) -> dict[str, Any]:
    out: dict[str, Any] = {
        "owner": {
            "kind": action.owner.kind,
            "namespace": action.owner.namespace,
            "name": action.owner.name,
        },
        "kind": action.kind,
        "verb": action.verb,
        "target": str(action.target),
        "description": action.describe(),
    }
    match action:
        case CreatePod():
            out["manifest"] = action.manifest
        case DeletePod() | EvictPod():
            out["uid"] = action.uid
        case DeleteChild():
            out["uid"] = action.uid
        case PatchStatus():
            out["status"] = action.status
        case PatchFinalizers():
            out["finalizers"] = list(action.finalizers)
        case PatchPodMetadata():
            out["metadata"] = action.body(action.resource_version)["metadata"]
        case PatchLabels():
            out["labels"] = dict(action.labels)
        case CreateChild():
            out["manifest"] = action.manifest
        case PatchChild():
            out["patch"] = action.body
    return out


def plan_doc(plan: Plan) -> dict[str, Any]:
    """The plan as JSON-ready values (values JSON has no type for as strings)."""
    doc = {
        "actions": [action_json(a) for a in plan.actions],
        "backing_off": sorted(str(k) for k in plan.backing_off),
        "not_ready": not_ready_json(plan.health),
    }
    loaded: dict[str, Any] = json.loads(json.dumps(doc, default=str))
    return loaded


def plan_json(plan: Plan) -> str:
    return json.dumps(plan_doc(plan), indent=2)
