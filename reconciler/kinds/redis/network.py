"""Who may connect to a Redis: while ``spec.networkPolicy`` is set, a
NetworkPolicy of the Redis's name, owned by it, lets only the peers of
``allowFrom`` reach ``spec.port`` (and those of ``metricsFrom`` the
exporter's port). Everything else is refused by the cluster's network
plugin once the policy selects the pods.

Unset, nothing is made: a policy changes who reaches the pods, and only
the user knows their clients. Unsetting it deletes ours (by uid), which
the status names while it exists; the claims' rule holds here too, so a
cluster with no such Redis pays no LIST of policies. A policy of that name
that is not ours is never touched, and the status says so.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.actions import CreateChild, DeleteChild, EventSpec, PatchChild
from reconciler.children import NETWORK_POLICIES, ChildType
from reconciler.kinds.owned import DRIFT, Owner, labels_patch, metadata, what_drifted
from reconciler.kinds.redis import server
from reconciler.kinds.redis.placement import quoted
from reconciler.model import Child

# Listed only when some Redis asks for a policy.
CHILD = ChildType(NETWORK_POLICIES, ("podSelector", "policyTypes", "ingress"), on_demand=True)
KIND = CHILD.kind
FIELD = "networkPolicy"  # in the spec, and in the status: the policy's name
PEERS_MAX = 50  # the CRD's maxItems of each list
SELECTORS = ("podSelector", "namespaceSelector")
CREATED = "CreateNetworkPolicy"
CONFLICT = "NetworkPolicyConflict"
SET = ("podSelector", "policyTypes", "ingress")  # the parts of its spec we set


@dataclass(frozen=True)
class Access:
    """spec.networkPolicy, checked: its peer lists as canonical JSON, so the
    spec that holds them stays hashable."""

    allow_from: str
    metrics_from: str = "[]"

    @property
    def peers(self) -> list[Any]:
        found: list[Any] = json.loads(self.allow_from)
        return found

    @property
    def metrics_peers(self) -> list[Any]:
        found: list[Any] = json.loads(self.metrics_from)
        return found


def _peer_error(peer: Any) -> str | None:
    if not isinstance(peer, Mapping) or set(peer) - set(SELECTORS):
        return f"must be a podSelector and/or a namespaceSelector, got {quoted(peer)}"
    if not any(k in peer for k in SELECTORS):
        return "needs a podSelector or a namespaceSelector"
    if not all(isinstance(v, Mapping) for v in peer.values()):
        return f"selectors must be objects, got {quoted(peer)}"
    return None


def _peers_errors(path: str, found: Any) -> list[tuple[str, str]]:
    if not isinstance(found, list):
        return [(path, f"must be a list of peers, got {quoted(found)}")]
    if len(found) > PEERS_MAX:
        return [(path, f"must have at most {PEERS_MAX} peers, got {len(found)}")]
    errors = ((f"{path}[{i}]", _peer_error(p)) for i, p in enumerate(found))
    return [(p, e) for p, e in errors if e is not None]


def field_errors(spec: Mapping[str, Any]) -> list[tuple[str, str]]:
    """spec.networkPolicy as the CRD checks it."""
    found = spec.get(FIELD)
    if found is None:
        return []
    path = f"spec.{FIELD}"
    if not isinstance(found, Mapping):
        return [(path, f"must be an object, got {quoted(found)}")]
    if "allowFrom" not in found:
        return [(f"{path}.allowFrom", "is required within spec.networkPolicy")]
    return [
        *_peers_errors(f"{path}.allowFrom", found["allowFrom"]),
        *_peers_errors(f"{path}.metricsFrom", found.get("metricsFrom", [])),
    ]


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def access_of(spec: Mapping[str, Any]) -> Access | None:
    found = spec.get(FIELD)
    if not isinstance(found, Mapping):
        return None
    return Access(_canonical(found["allowFrom"]), _canonical(found.get("metricsFrom", [])))


def wanted(spec: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    """Whether a pass must see this Redis's policy: it asks for one, or its
    status names one that may still be there to delete."""
    return spec.get(FIELD) is not None or isinstance(status.get(FIELD), str)


def desired_spec(owner: Owner, access: Access, port: int, exporter: bool) -> dict[str, Any]:
    """Ingress only: the pods still reach whatever they reach, and the
    metrics port only from ``metricsFrom`` (no one, if it is empty)."""
    rules: list[dict[str, Any]] = [
        {"from": access.peers, "ports": [{"protocol": "TCP", "port": port}]}
    ]
    if exporter and access.metrics_peers:
        metrics = {"protocol": "TCP", "port": server.METRICS_PORT}
        rules.append({"from": access.metrics_peers, "ports": [metrics]})
    return {
        "podSelector": {"matchLabels": dict(owner.selector)},
        "policyTypes": ["Ingress"],
        "ingress": rules,
    }


def manifest(owner: Owner, want: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": NETWORK_POLICIES.api_version,
        "kind": KIND,
        "metadata": metadata(owner, owner.key.name),
        "spec": dict(want),
    }


def drift(owner: Owner, found: Child, want: Mapping[str, Any]) -> dict[str, Any]:
    """The merge patch that puts back what we set: each part we set, whole
    (a merge patch replaces a list; labels of a selector we did not set are
    removed by null)."""
    patch = labels_patch(owner, found)
    spec: dict[str, Any] = {}
    for key in SET:
        if _canonical(found.spec.get(key)) != _canonical(want[key]):
            spec[key] = want[key]
    if "podSelector" in spec:
        stored = found.spec.get("podSelector")
        stored = stored if isinstance(stored, Mapping) else {}
        extra = {k: None for k in stored.get("matchLabels") or {} if k not in owner.selector}
        spec["podSelector"] = {
            "matchLabels": {**owner.selector, **extra},
            "matchExpressions": None,
        }
    if spec:
        patch["spec"] = spec
    return patch


@dataclass(frozen=True)
class PolicyPlan:
    """Its write of this pass, if any; the name the status shows (ours
    exists, or is made by this plan); and whether another's holds the name."""

    actions: tuple[CreateChild | PatchChild | DeleteChild, ...] = ()
    shown: str | None = None
    held_by_another: bool = False


def _event(owner: Owner, reason: str, message: str) -> EventSpec:
    return EventSpec(owner.ref, "Normal", reason, message, owner.component)


def plan_policy(owner: Owner, found: Child | None, want: Mapping[str, Any] | None) -> PolicyPlan:
    """Create, put back or delete ours (``want`` None: the spec asks for
    none); never touch another's."""
    name = owner.key.name
    if found is not None and found.controller_uid != owner.uid:
        return PolicyPlan(held_by_another=want is not None)
    if found is None:
        if want is None:
            return PolicyPlan()
        said = f"Created network policy {name}: only spec.networkPolicy's peers may connect"
        create = CreateChild(owner.key, manifest(owner, want), _event(owner, CREATED, said))
        return PolicyPlan((create,), name)
    if found.terminating:
        return PolicyPlan()
    if want is None:
        why = "spec.networkPolicy removed"
        return PolicyPlan((DeleteChild(owner.key, found.key, found.uid, why),))
    patch = drift(owner, found, want)
    if not patch:
        return PolicyPlan((), name)
    why = f"{what_drifted(patch)} differ from spec.networkPolicy"
    event = _event(owner, DRIFT, f"Updated network policy {name}: {why}")
    write = PatchChild(owner.key, found.key, found.resource_version, patch, why, event)
    return PolicyPlan((write,), name)


def conflict_message(name: str) -> str:
    return (
        f"network policy {name} is not owned by this Redis, so spec.networkPolicy is not "
        "applied; delete or rename it"
    )
