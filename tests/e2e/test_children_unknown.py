"""A status that says what it could not see, on the real apiserver: a
reconciler whose role may not list PersistentVolumeClaims (RBAC from before
claims existed) leaves each Redis with storage Degraded=ChildrenUnknown,
naming the kind and the refusal, and makes no claim; the permission given
back, the Redis converges and the reason goes. And a claim that an earlier
Redis of the same name owns (its garbage collector's to delete) is neither
mounted nor adopted: the new Redis's pod waits for it to go, and says so."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import ROLE, Kubectl, NotYet, Reconciler, kubeconfig_for, wait_for
from .test_real_clusters import condition, events, status
from .test_redis import pods, settled
from .test_storage import NAME, claims, mounted, storage_yaml

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).parents[2]
CLAIMS = "persistentvolumeclaims"
REASON = "ChildrenUnknown"


def shipped_role(name: str, *, without: str | None = None) -> dict[str, Any]:
    """The shipped ClusterRole under another name, less every rule's
    ``without`` resource."""
    docs = yaml.safe_load_all((ROOT / "config" / "rbac" / "rbac.yaml").read_text())
    roles = (d for d in docs if d and d["kind"] == "ClusterRole")
    role = next(d for d in roles if d["metadata"]["name"] == ROLE)
    role["metadata"] = {"name": name}
    rules = []
    for rule in role["rules"]:
        resources = [r for r in rule.get("resources", []) if r != without]
        if resources or "nonResourceURLs" in rule:
            rules.append({**rule, "resources": resources} if "resources" in rule else rule)
    role["rules"] = rules
    return role


@pytest.fixture
def bot(kubectl: Kubectl, ns: str, tmp_path: Path) -> Iterator[tuple[Reconciler, str]]:
    """A reconciler run as a ServiceAccount bound to the shipped ClusterRole
    less claims, and the name of that role (to give them back)."""
    name = f"e2e-unseen-{uuid.uuid4().hex[:8]}"
    kubectl.apply(yaml.safe_dump(shipped_role(name, without=CLAIMS)))
    try:
        kubectl.run("create", "serviceaccount", "bot", "-n", ns)
        kubectl.run(
            "create", "clusterrolebinding", name, f"--clusterrole={name}",
            f"--serviceaccount={ns}:bot",
        )  # fmt: skip
        token = kubectl.run("create", "token", "bot", "-n", ns, "--duration=10m").stdout.strip()
        yield Reconciler(kubeconfig_for(kubectl, tmp_path / "bot", {"token": token})), name
    finally:
        kubectl.run("delete", "clusterrolebinding", name, check=False)
        kubectl.run("delete", "clusterrole", name, check=False)


def degraded(kubectl: Kubectl, ns: str) -> dict[str, Any]:
    return next(c for c in status(kubectl, ns)["conditions"] if c["type"] == "Degraded")


def test_a_role_without_claims_says_so_in_the_status_and_converges_once_given_them(
    kubectl: Kubectl, ns: str, bot: tuple[Reconciler, str]
):
    reconciler, role = bot
    kubectl.apply(storage_yaml(ns, num=2))
    for _ in range(2):  # the first pass adds the finalizer; both are refused claims
        result = reconciler.sync(ns, expect=1)
        assert "LIST PersistentVolumeClaim: 403" in result.stderr + json.dumps(result.summary)
    found = degraded(kubectl, ns)
    assert (found["status"], found["reason"]) == ("True", REASON)
    message = found["message"]
    assert message.startswith("could not list PersistentVolumeClaims: 403 Forbidden"), message
    assert CLAIMS in message and "\n" not in message
    assert "eyJ" not in message  # the apiserver's words, never the token
    assert status(kubectl, ns)["state"] == REASON
    assert claims(kubectl, ns) == {}  # none made on a view it did not get
    assert condition(status(kubectl, ns), "Ready")[0] == "False"  # its pods wait on claims
    assert len(events(kubectl, ns, REASON)) == 1  # said once, not each pass

    kubectl.apply(yaml.safe_dump(shipped_role(role)))  # the claims given back
    wait_for(lambda: reconciler.sync(ns, expect=None).code == 0, what="a pass that sees claims")
    reconciler.converge(ns, settle=lambda: settled(kubectl, ns), passes=30)
    assert sorted(claims(kubectl, ns)) == [f"data-{NAME}-{i}" for i in range(2)]
    assert mounted(kubectl, ns) == {f"{NAME}-{i}": f"data-{NAME}-{i}" for i in range(2)}
    found = degraded(kubectl, ns)
    assert (found["status"], found["reason"]) == ("False", "AsExpected")
    assert status(kubectl, ns)["state"] == "Ready"


HOLD = "e2e-hold"  # the label of a claim the garbage collector may not delete yet
HELD = f"has(oldObject.metadata.labels) && '{HOLD}' in oldObject.metadata.labels"


def gc_held(ns: str, name: str) -> str:
    """A ValidatingAdmissionPolicy, and its binding, that refuse the DELETE
    of a claim labelled HOLD in ``ns``: the garbage collector's too, so a
    claim owned by a deleted Redis stays until the test lets it go."""
    match = {"resourceRules": [{
        "apiGroups": [""], "apiVersions": ["v1"], "operations": ["DELETE"],
        "resources": [CLAIMS],
    }]}  # fmt: skip
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": match,
            "matchConditions": [{"name": "held", "expression": HELD}],
            "validations": [{"expression": "false", "message": "held by the e2e test"}],
        },
    }
    selector = {"matchLabels": {"kubernetes.io/metadata.name": ns}}
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": selector},
        },
    }
    return yaml.safe_dump_all([policy, binding])


def owner_uids(claim: dict[str, Any]) -> list[str]:
    return [r["uid"] for r in claim["metadata"].get("ownerReferences") or ()]


def redis_uid(kubectl: Kubectl, ns: str) -> str:
    return str(kubectl.json("get", "redis", NAME, "-n", ns)["metadata"]["uid"])


def test_a_claim_an_earlier_redis_of_the_same_name_owns_is_waited_for_not_adopted(
    kubectl: Kubectl, reconciler: Reconciler, ns: str
):
    retention = {"persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete"}}
    kubectl.apply(storage_yaml(ns, num=1, **retention))
    reconciler.converge(ns, settle=lambda: settled(kubectl, ns), passes=30)
    earlier = redis_uid(kubectl, ns)
    claim = f"data-{NAME}-0"
    old = claims(kubectl, ns)[claim]
    assert owner_uids(old) == [earlier]
    held = f"e2e-gc-hold-{uuid.uuid4().hex[:8]}"
    kubectl.apply(gc_held(ns, held))
    try:
        # Sure to hold: a DELETE of a held claim is refused (admission may
        # take a moment to see the new policy).
        kubectl.run("label", "pvc", claim, "-n", ns, f"{HOLD}=1")
        wait_for(
            lambda: kubectl.run("delete", "pvc", claim, "-n", ns, "--dry-run=server",
                                check=False).returncode != 0,
            what="the policy to hold the claim",
        )  # fmt: skip
        kubectl.run("delete", "redis", NAME, "-n", ns, "--wait=false")
        reconciler.sync(ns)  # deletes its pod, then releases the finalizer
        wait_for(lambda: not pods(kubectl, ns) or NotYet("pods"), what="pods gone")
        reconciler.sync(ns)
        wait_for(
            lambda: not kubectl.json("get", "redis", "-n", ns)["items"] or NotYet("redis"),
            what="the Redis gone",
        )
        kubectl.apply(storage_yaml(ns, num=1, **retention))  # the same name, a new uid
        now = redis_uid(kubectl, ns)
        assert now != earlier
        for _ in range(3):
            reconciler.sync(ns)
        assert pods(kubectl, ns) == {}  # no pod started on data about to be deleted
        kept = claims(kubectl, ns)[claim]
        assert kept["metadata"]["uid"] == old["metadata"]["uid"]
        assert owner_uids(kept) == [earlier]  # not adopted
        progressing = next(
            c for c in status(kubectl, ns)["conditions"] if c["type"] == "Progressing"
        )
        said = f"claim {claim} belongs to an earlier Redis of this name (uid {earlier})"
        assert said in progressing["message"], progressing
        assert f"pod {NAME}-0 waits for it to go" in progressing["message"]
    finally:
        kubectl.run("delete", "validatingadmissionpolicybinding", held, check=False)
        kubectl.run("delete", "validatingadmissionpolicy", held, check=False)
    # Let go, the garbage collector deletes it (it retries with backoff: the
    # test deletes it as the collector would, rather than wait on that).
    kubectl.run("delete", "pvc", claim, "-n", ns, "--wait=false", check=False)
    wait_for(
        lambda: kubectl.run("get", "pvc", claim, "-n", ns, check=False).returncode != 0,
        what="the earlier claim gone",
    )
    reconciler.converge(ns, settle=lambda: settled(kubectl, ns), passes=30)
    made = claims(kubectl, ns)[claim]
    assert made["metadata"]["uid"] != old["metadata"]["uid"]
    assert owner_uids(made) == [now]
    assert mounted(kubectl, ns) == {f"{NAME}-0": claim}
    assert status(kubectl, ns)["state"] == "Ready"
