"""What someone who may only create pods in one namespace can make us do.

They plant pods labelled as ours whose controller reference names a Redis by
whatever they like: a second request after CR/LF, a space, `?`, `#`, `/`,
`..`. The apiserver takes such a reference (it checks no name in it), and
the garbage collector leaves a reference to a version it does not serve.
Passes over their namespace and over all namespaces must then change
nothing anywhere else, and must leave the planted pods alone, saying why.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import Kubectl, Reconciler, kubeconfig_for, wait_for

# A version of our group that no CRD serves: the garbage collector cannot
# look the owner up, so the pod stays for the reconciler to judge.
UNSERVED = "myapp.demo.kubebuilder.io/v9"


def smuggled(other: str) -> str:
    return (
        "x HTTP/1.1\r\nHost: x\r\n\r\n"
        f"DELETE /apis/networking.k8s.io/v1/namespaces/{other}/networkpolicies/deny-all"
    )


def owner_names(other: str) -> list[str]:
    return [
        smuggled(other),
        f"x HTTP/1.1\r\nHost: x\r\n\r\nDELETE /api/v1/namespaces/{other}/pods/victim",
        "a b",
        "a?labelSelector=x",
        "a#b",
        f"../../../../api/v1/namespaces/{other}/pods/victim",
        "..",
        "a/b",
    ]


def planted_pod(ns: str, index: int, owner: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"planted-{index}",
            "namespace": ns,
            "labels": {
                "app.kubernetes.io/managed-by": "reconciler",
                "app.kubernetes.io/instance": "x",
            },
            "ownerReferences": [
                {
                    "apiVersion": UNSERVED,
                    "kind": "Redis",
                    "name": owner,
                    "uid": str(uuid.uuid4()),
                    "controller": True,
                }
            ],
        },
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


def pod_creator(kubectl: Kubectl, ns: str, tmp_path: Path) -> Kubectl:
    """A ServiceAccount of ``ns`` that may create pods there and nothing else."""
    kubectl.run("create", "serviceaccount", "planter", "-n", ns)
    kubectl.run("create", "role", "planter", "--verb=create", "--resource=pods", "-n", ns)
    kubectl.run(
        "create",
        "rolebinding",
        "planter",
        "--role=planter",
        f"--serviceaccount={ns}:planter",
        "-n",
        ns,
    )
    token = kubectl.run("create", "token", "planter", "-n", ns, "--duration=10m").stdout.strip()
    return Kubectl(kubeconfig_for(kubectl, tmp_path / "planter", {"token": token}))


@pytest.fixture
def other(kubectl: Kubectl, reconciler: Reconciler) -> Iterator[str]:
    """The namespace the planted requests aim at."""
    from tests.e2e.conftest import delete_namespace

    name = f"e2e-other-{uuid.uuid4().hex[:8]}"
    kubectl.run("create", "namespace", name)
    yield name
    delete_namespace(kubectl, reconciler, name)


def victims(kubectl: Kubectl, other: str) -> dict[str, tuple[str, str]]:
    """The uid and resourceVersion of each object of ``other`` we must not touch."""
    found = {}
    for what in ("networkpolicy/deny-all", "pod/victim", "redis/keep"):
        meta = kubectl.json("get", what, "-n", other)["metadata"]
        found[what] = (meta["uid"], meta["resourceVersion"])
    return found


@pytest.mark.serial("passes over all namespaces, which write other tests' objects")
def test_planted_owner_names_change_nothing_elsewhere(
    kubectl: Kubectl, reconciler: Reconciler, ns: str, other: str, tmp_path: Path
):
    policy = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "deny-all", "namespace": other},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"]},
    }
    victim = planted_pod(other, 0, "unused")
    victim["metadata"] = {"name": "victim", "namespace": other}
    keep = {
        "apiVersion": "myapp.demo.kubebuilder.io/v1",
        "kind": "Redis",
        "metadata": {"name": "keep", "namespace": other},
        "spec": {"num": 1},
    }
    kubectl.apply(yaml.safe_dump_all([policy, victim, keep]))
    reconciler.converge(other)
    before = victims(kubectl, other)

    planter = pod_creator(kubectl, ns, tmp_path)
    names = owner_names(other)
    for i, name in enumerate(names):
        planter.run("create", "-f", "-", stdin=json.dumps(planted_pod(ns, i, name)))

    one = reconciler.sync(ns)
    every = reconciler.sync(None, expect=None)
    assert victims(kubectl, other) == before
    planted = kubectl.json("get", "pods", "-n", ns)["items"]
    assert sorted(p["metadata"]["name"] for p in planted) == [
        f"planted-{i}" for i in range(len(names))
    ]
    assert not any(p["metadata"].get("deletionTimestamp") for p in planted)
    for result in (one, every):
        said = "\n".join(result.summary["warnings"])
        assert said.count("its controller reference names") >= len(names), said
        assert "\r" not in said and "\n" not in "".join(result.summary["warnings"])

    def warned() -> bool:
        events = kubectl.json("get", "events", "-n", ns)["items"]
        told = {
            e["involvedObject"]["name"] for e in events if e["reason"] == "OwnerReferenceRefused"
        }
        return told == {f"planted-{i}" for i in range(len(names))}

    wait_for(warned, what="a Warning event on each planted pod")
