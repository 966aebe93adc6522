"""What `reconciler manifests` makes: the ClusterRole of what a pass needs, and for a
namespace-scoped install, cluster-wide only the reads of cluster-scoped
objects; the CRDs as shipped in crds/."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from reconciler.checks import manifests
from reconciler.checks.access import needed
from reconciler.checks.grants import Subject, service_account

ROOT = Path(__file__).resolve().parents[3]
BASTION = service_account("ops:bastion")


def test_the_crds_are_the_files_of_crds():
    printed = [d for d in yaml.safe_load_all(manifests.crds()) if d]
    shipped = [yaml.safe_load(p.read_text()) for p in sorted((ROOT / "crds").glob("*.yaml"))]
    assert printed == shipped and len(printed) == 2


def test_everywhere_is_the_cluster_role_and_one_cluster_role_binding():
    role, binding = manifests.rbac(BASTION)
    assert (role["kind"], binding["kind"]) == ("ClusterRole", "ClusterRoleBinding")
    assert len(role["rules"]) == len(needed().plain) + len(needed().named)
    assert binding["roleRef"]["name"] == role["metadata"]["name"] == "reconciler"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "bastion", "namespace": "ops"}
    ]


def test_some_namespaces_only_bind_in_each_and_read_cluster_scoped_objects_only():
    objects = manifests.rbac(Subject("Group", "platform"), ["a", "b", "a"])
    kinds = [(o["kind"], o["metadata"].get("namespace", "")) for o in objects]
    assert kinds == [
        ("ClusterRole", ""),
        ("ClusterRole", ""),
        ("ClusterRoleBinding", ""),
        ("RoleBinding", "a"),
        ("RoleBinding", "b"),
    ]
    reads, cluster_binding = objects[1], objects[2]
    assert cluster_binding["roleRef"]["name"] == reads["metadata"]["name"]
    granted = {(r["apiGroups"][0], r["resources"][0]): r["verbs"] for r in reads["rules"]}
    assert set(granted) == set(needed().cluster_scoped) | set(needed().named)
    assert all(set(v) <= {"get", "list"} for v in granted.values())
    assert granted[("", "namespaces")] == ["get"]  # a scoped pass GETs its namespaces, no LIST
    for binding in objects[3:]:
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "reconciler",
        }
        assert binding["subjects"] == [
            {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "platform"}
        ]


def test_the_lease_role_has_each_modes_verbs_in_the_lease_namespace():
    leader = manifests.leases(BASTION, "ops")
    shard = manifests.leases(BASTION, "ops", shard=True)
    assert leader[0]["rules"][0]["verbs"] == ["get", "create", "update"]
    assert shard[0]["rules"][0]["verbs"] == ["get", "list", "create", "update", "delete"]
    for role, binding in (leader, shard):
        assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "ops"
        assert binding["roleRef"]["name"] == role["metadata"]["name"]


def test_printed_yaml_reads_back_as_the_objects():
    objects = manifests.rbac(BASTION, ["a"])
    assert list(yaml.safe_load_all(manifests.dump(objects))) == objects


# Types copied from Kubernetes' own schemas (a Pod's, a LabelSelector, a
# Condition): `kubectl explain` reads theirs in the Kubernetes docs.
COPIED = {"affinity", "tolerations", "limits", "requests", "claims", "podSelector"}
COPIED |= {"namespaceSelector", "conditions"}
BUILTIN = {"apiVersion", "kind", "metadata"}  # described by the apiserver


def undescribed(node: dict[str, Any], path: str) -> list[str]:
    out = []
    for name, sub in (node.get("properties") or {}).items():
        if name in COPIED or (not path and name in BUILTIN):
            continue
        if "description" not in sub:
            out.append(f"{path}.{name}")
        out += undescribed(sub, f"{path}.{name}")
    if "items" in node:
        out += undescribed(node["items"], f"{path}[]")
    return out


def test_kubectl_explain_has_words_for_every_field_of_ours():
    for crd in [yaml.safe_load(p.read_text()) for p in sorted((ROOT / "crds").glob("*.yaml"))]:
        for version in crd["spec"]["versions"]:
            schema = version["schema"]["openAPIV3Schema"]
            assert undescribed(schema, "") == [], (crd["metadata"]["name"], version["name"])


def test_the_chart_ships_the_crds_of_crds():
    """Helm installs dist/chart/crds/ once and never upgrades them: a copy
    that differs from crds/ installs another schema than `make install`."""
    chart = sorted(p.name for p in (ROOT / "dist/chart/crds").glob("*.yaml"))
    assert chart == sorted(p.name for p in (ROOT / "crds").glob("*.yaml"))
    for name in chart:
        copied = (ROOT / "dist/chart/crds" / name).read_text()
        assert copied == (ROOT / "crds" / name).read_text(), name
