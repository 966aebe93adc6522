"""The template of a new kind: an object whose status says it was seen.

Copy this file to ``kinds/<kind>.py`` (or a package, as ``kinds/redis/``),
rename ``Example``, and follow docs/architecture.md, "Adding a kind". It is
a real kind, not registered: mypy checks it against `Kind`, and
tests/unit/kinds/test_skeleton.py registers it as a third kind and runs
passes of it through the engine, so the template cannot drift from what the
engine asks of a kind.

What it already does right, and a new kind should keep: status.observedGeneration
and the Ready, Progressing and Degraded conditions (lastTransitionTime kept until
a condition flips); a status written only when it differs; the failure record
while the object backs off; status.shard under a sharded replica; nothing
written for an object being deleted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from reconciler.actions import Action, PatchStatus
from reconciler.backoff import STATUS_FIELD, from_status, to_status
from reconciler.health import READY, Health
from reconciler.kinds.base import Kind, Object, PlanInput, StatusOnly
from reconciler.kinds.conditions import (
    Verdict,
    condition,
    holder_field,
    observed_conditions,
    status_after,
    status_changes,
)
from reconciler.model import ResourceType, mapping

# Its place in the API: its CRD in crds/ must say the same, and
# config/rbac/rbac.yaml (what `reconciler manifests rbac` prints) grant what
# a pass does with it.
RESOURCE = ResourceType("example.com", "v1alpha1", "Example", "examples")
COMPONENT = "example-controller"  # the source of its events
OBSERVED = "Observed"  # the reason of its Ready condition


@dataclass(frozen=True, kw_only=True, slots=True)
class Example(Object):
    """The fields its rules read, decoded once (`from_api`): those of every
    object (`Object`), and its own."""

    resource: ClassVar[ResourceType] = RESOURCE
    spec: Mapping[str, Any]


def from_api(obj: Mapping[str, Any]) -> Example:
    return Example.decoded(obj, spec=mapping(obj.get("spec")))


def desired_status(example: Example, inp: PlanInput) -> dict[str, Any]:
    """The whole status this pass would store. A kind with rules writes
    what they found here: each condition a `Verdict`."""
    observed = observed_conditions(example.status)
    verdicts = {
        "Ready": Verdict(True, OBSERVED, f"generation {example.generation} observed"),
        "Progressing": Verdict(False, OBSERVED, "nothing to do"),
        "Degraded": Verdict(False, OBSERVED, "nothing failed"),
    }
    conditions = [
        condition(kind, verdict, example.generation, observed, inp.now).to_dict()
        for kind, verdict in verdicts.items()
    ]
    return {
        "observedGeneration": example.generation,
        "conditions": conditions,
        STATUS_FIELD: None,
        **holder_field(inp.holder),
    }


def plan(example: Example, inp: PlanInput) -> list[Action]:
    if example.deletion_timestamp:
        return []  # a kind with a finalizer releases it here, once its work is undone
    if inp.gate.hold:  # backing off: only the failure record is written
        record = {STATUS_FIELD: to_status(inp.gate.failure), **holder_field(inp.holder)}
        return _patch(example, record)
    return _patch(example, desired_status(example, inp))


def _patch(example: Example, status: Mapping[str, Any]) -> list[Action]:
    """A status patch, only if it would change what is stored (a null removes
    a field, so a null for a field that is not there changes nothing)."""
    wanted = {k: v for k, v in status.items() if v is not None or k in example.status}
    changed = status_changes(example.status, wanted)
    if not changed:
        return []
    return [PatchStatus(example.key, example.resource_version, wanted, changed=changed)]


def health(example: Example, actions: Sequence[Action]) -> Health:
    """Read from the status as it will be stored once ``actions`` land."""
    status = status_after(example.status, actions, example.key)
    failure = from_status(status)
    if failure is not None:
        return Health(failure.reason, failure.message, degraded=True)
    if example.deletion_timestamp:
        return Health("Deleting", "being deleted", progressing=True)
    if status.get("observedGeneration") == example.generation:
        return Health(READY, f"generation {example.generation} observed")
    return Health("Pending", "not observed yet", progressing=True)


# Its planner reads no pods: a kind that does gives `plan_unseen` and
# `pod_names` (see kinds/redis/kind.py), and `owns_pods=True` if it makes
# them; `child_names` if it makes other objects; `settings` for keys of its
# own (kinds/redis/settings.py).
KIND: Kind[Example] = Kind(RESOURCE, COMPONENT, from_api, StatusOnly(plan), health)
