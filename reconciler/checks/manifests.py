"""What `reconciler manifests` prints: the CRDs, the ClusterRole made from
`access.needed()` (what a pass asks, derived from the kinds), and the Lease Role,
each bound to a given subject.

Printed by the installed binary, so a cluster admin applies them from any
directory (`reconciler manifests rbac --serviceaccount ops:bastion | kubectl
apply -f -`), as `flux install --export` does. The CRDs are the package's
copy of crds/ (reconciler/crds is a link to it, and the build copies what
it links to): one source. config/rbac and config/leader-election are what
this prints for the shipped ServiceAccount (tests/unit/test_manifests.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib import resources
from typing import Any

import yaml

from reconciler.checks.access import ROLE, needed
from reconciler.checks.grants import RBAC_GROUP, Subject, binding_name
from reconciler.client.kube import LEASES
from reconciler.run import lease_access

# Only the reads of cluster-scoped objects a pass limited to some namespaces
# makes; bound cluster-wide beside a RoleBinding per namespace to ROLE.
CLUSTER_READS = f"{ROLE}-cluster-reads"
LEASE_ROLE = "reconciler-leader-election"
LABELS = {
    "app.kubernetes.io/name": "reconciler",
    "app.kubernetes.io/component": "controller",
    "app.kubernetes.io/part-of": "reconciler",
}
# Verbs in the order a person reads them: reads, then writes.
_VERB_ORDER = ("get", "list", "create", "update", "patch", "delete")


def crds() -> str:
    """The CRDs as shipped, comments and all."""
    files = sorted(
        (f for f in (resources.files("reconciler") / "crds").iterdir() if f.name.endswith(".yaml")),
        key=lambda f: f.name,
    )
    return "---\n".join(f.read_text() for f in files)


def rbac(subject: Subject, namespaces: Iterable[str] = ()) -> list[dict[str, Any]]:
    """The ClusterRole bound to ``subject`` in every namespace; or, given
    ``namespaces``, bound in each of those (a RoleBinding, which grants its
    namespaced rules there) beside a small ClusterRole of the cluster-scoped
    reads, bound cluster-wide."""
    role = _object("ClusterRole", ROLE, rules=rules())
    scoped = list(dict.fromkeys(namespaces))
    if not scoped:
        return [role, _binding("ClusterRoleBinding", "ClusterRole", ROLE, subject)]
    reads = _object("ClusterRole", CLUSTER_READS, rules=cluster_read_rules())
    bindings = [_binding("RoleBinding", "ClusterRole", ROLE, subject, ns) for ns in scoped]
    return [
        role,
        reads,
        _binding("ClusterRoleBinding", "ClusterRole", CLUSTER_READS, subject),
        *bindings,
    ]


def leases(subject: Subject, namespace: str, shard: bool = False) -> list[dict[str, Any]]:
    """The Role of the Leases in ``namespace`` (leader election's verbs, or
    sharding's), bound to ``subject``."""
    verbs = lease_access.SHARD_VERBS if shard else lease_access.LEADER_VERBS
    rule = {"apiGroups": [LEASES.group], "resources": [LEASES.plural], "verbs": list(verbs)}
    role = _object("Role", LEASE_ROLE, namespace, rules=[rule])
    return [role, _binding("RoleBinding", "Role", LEASE_ROLE, subject, namespace)]


def rules() -> list[dict[str, Any]]:
    """What a pass needs as RBAC rules, one per resource, in table order."""
    found = needed()
    plain = [_rule(group, resource, verbs) for (group, resource), verbs in found.plain.items()]
    named = [
        _rule(group, resource, verbs, names)
        for (group, resource), (verbs, names) in found.named.items()
    ]
    return plain + named


def cluster_read_rules() -> list[dict[str, Any]]:
    """What a pass with -n reads outside its namespaces."""
    found = needed()
    scoped = found.cluster_scoped.items()
    plain = [_rule(group, resource, verbs) for (group, resource), verbs in scoped]
    named = [
        _rule(group, resource, verbs, names)
        for (group, resource), (verbs, names) in found.named.items()
    ]
    return plain + named


class _Dumper(yaml.SafeDumper):
    """Block style, but a list of plain values on one line, as
    config/rbac writes them: ``verbs: [get, list]``."""


def _list(dumper: yaml.SafeDumper, data: list[Any]) -> yaml.Node:
    flow = all(not isinstance(item, dict | list) for item in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


_Dumper.add_representer(list, _list)


def dump(objects: list[dict[str, Any]]) -> str:
    return yaml.dump_all(objects, Dumper=_Dumper, sort_keys=False, width=100)


def _rule(
    group: str, resource: str, verbs: frozenset[str], names: frozenset[str] = frozenset()
) -> dict[str, Any]:
    rule: dict[str, Any] = {"apiGroups": [group], "resources": [resource]}
    if names:
        rule["resourceNames"] = sorted(names)
    rule["verbs"] = sorted(verbs, key=_VERB_ORDER.index)
    return rule


def _object(kind: str, name: str, namespace: str = "", **body: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {
        "apiVersion": f"{RBAC_GROUP}/v1",
        "kind": kind,
        "metadata": {**meta, "labels": dict(LABELS)},
        **body,
    }


def _binding(
    kind: str, role_kind: str, role: str, subject: Subject, namespace: str = ""
) -> dict[str, Any]:
    ref = {"apiGroup": RBAC_GROUP, "kind": role_kind, "name": role}
    name = binding_name(role, subject)
    return _object(kind, name, namespace, roleRef=ref, subjects=[subject.rbac()])
