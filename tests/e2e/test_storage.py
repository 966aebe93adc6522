"""A Redis that keeps its data, on a real apiserver, controller-manager
(binder, expander, claim protection, garbage collector) and the local
cluster's provisioner: a claim per pod that outlives rollouts, hand deletes
and evictions; StatefulSet's retention on scale-down and deletion; growth;
what admission refuses; and a class that cannot grow or does not exist,
named in the status."""

from __future__ import annotations

import json
from typing import Any

import pytest

from .conftest import Kubectl, NotYet, Reconciler, wait_for
from .test_disruption import evict
from .test_real_clusters import condition, events, status, stays_converged
from .test_redis import pods, settled

pytestmark = pytest.mark.e2e

NAME = "redis-sample"


def storage_yaml(ns: str, num: int = 3, size: str = "1Gi", **storage: Any) -> str:
    spec = {"num": num, "storage": {"size": size, **storage}}
    doc = {
        "apiVersion": "myapp.demo.kubebuilder.io/v1",
        "kind": "Redis",
        "metadata": {"name": NAME, "namespace": ns},
        "spec": spec,
    }
    return json.dumps(doc)


def claims(kubectl: Kubectl, ns: str) -> dict[str, dict[str, Any]]:
    """`kubectl get pvc`, by name: the live ones."""
    items = kubectl.json("get", "pvc", "-n", ns)["items"]
    return {c["metadata"]["name"]: c for c in items if not c["metadata"].get("deletionTimestamp")}


def claim_uids(kubectl: Kubectl, ns: str) -> dict[str, str]:
    return {n: c["metadata"]["uid"] for n, c in claims(kubectl, ns).items()}


def mounted(kubectl: Kubectl, ns: str) -> dict[str, str]:
    """Each pod's claim, as mounted at /data."""
    out = {}
    for name, p in pods(kubectl, ns).items():
        (mount,) = [m for m in p["spec"]["containers"][0]["volumeMounts"] if m["name"] == "data"]
        assert mount["mountPath"] == "/data"
        (volume,) = [v for v in p["spec"]["volumes"] if v["name"] == "data"]
        out[name] = volume["persistentVolumeClaim"]["claimName"]
    return out


def bound(kubectl: Kubectl, ns: str, size: str = "1Gi") -> bool | NotYet:
    behind = [
        f"{n} {c['status'].get('phase')} {c['status'].get('capacity')}"
        for n, c in sorted(claims(kubectl, ns).items())
        if c["status"].get("phase") != "Bound" or c["status"]["capacity"]["storage"] != size
    ]
    return NotYet(", ".join(behind)) if behind else True


def converged(kubectl: Kubectl, reconciler: Reconciler, ns: str) -> None:
    reconciler.converge(ns, settle=lambda: settled(kubectl, ns), passes=30)


def scale(kubectl: Kubectl, ns: str, patch: dict[str, Any]) -> None:
    kubectl.run("patch", "redis", NAME, "-n", ns, "--type=merge", "-p", json.dumps(patch))


def json_patch(kubectl: Kubectl, ns: str, op: dict[str, Any], check: bool = True) -> Any:
    """`kubectl patch --type=json` of the Redis, one operation."""
    patch = json.dumps([op])
    return kubectl.run("patch", "redis", NAME, "-n", ns, "--type=json", "-p", patch, check=check)


def test_each_pod_gets_its_own_claim_and_keeps_it_through_rollout_delete_and_eviction(
    kubectl: Kubectl, reconciler: Reconciler, ns: str
):
    kubectl.apply(storage_yaml(ns))
    converged(kubectl, reconciler, ns)
    wanted = {f"{NAME}-{i}": f"data-{NAME}-{i}" for i in range(3)}
    assert mounted(kubectl, ns) == wanted
    assert bound(kubectl, ns) is True
    found = claims(kubectl, ns)
    assert {c["spec"]["storageClassName"] for c in found.values()} == {"standard"}
    assert all("ownerReferences" not in c["metadata"] for c in found.values())  # Retain
    assert events(kubectl, ns, "CreateClaim")
    before = claim_uids(kubectl, ns)
    # A rollout replaces every pod; a hand delete and an eviction, one each.
    scale(kubectl, ns, {"spec": {"port": 6378}})
    converged(kubectl, reconciler, ns)
    kubectl.run("delete", "pod", f"{NAME}-1", "-n", ns, "--wait=false")
    converged(kubectl, reconciler, ns)
    ok, why = evict(kubectl, ns, f"{NAME}-2")  # the budget allows one pod away
    assert ok, why
    converged(kubectl, reconciler, ns)
    assert mounted(kubectl, ns) == wanted
    assert claim_uids(kubectl, ns) == before
    assert all(
        p["spec"]["containers"][0]["ports"][0]["containerPort"] == 6378
        for p in pods(kubectl, ns).values()
    )
    stays_converged(kubectl, reconciler, ns)


@pytest.mark.parametrize("policy", ["Retain", "Delete"])
def test_scale_down_and_up_under_each_whenscaled(
    kubectl: Kubectl, reconciler: Reconciler, ns: str, policy: str
):
    retention = {"persistentVolumeClaimRetentionPolicy": {"whenScaled": policy}}
    kubectl.apply(storage_yaml(ns, **retention))
    converged(kubectl, reconciler, ns)
    before = claim_uids(kubectl, ns)
    scale(kubectl, ns, {"spec": {"num": 1}})
    converged(kubectl, reconciler, ns)
    kept = {f"data-{NAME}-0"} if policy == "Delete" else set(before)
    wait_for(lambda: set(claim_uids(kubectl, ns)) == kept, what=f"claims {sorted(kept)}")
    scale(kubectl, ns, {"spec": {"num": 3}})
    converged(kubectl, reconciler, ns)
    after = claim_uids(kubectl, ns)
    assert set(after) == set(before)
    same = {n for n in after if after[n] == before[n]}
    assert same == (kept if policy == "Delete" else set(before))
    stays_converged(kubectl, reconciler, ns)


def test_whendeleted_delete_claims_go_with_the_redis(
    kubectl: Kubectl, reconciler: Reconciler, ns: str
):
    retention = {"persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete"}}
    kubectl.apply(storage_yaml(ns, num=2, **retention))
    converged(kubectl, reconciler, ns)
    for c in claims(kubectl, ns).values():
        (ref,) = c["metadata"]["ownerReferences"]
        assert (ref["kind"], ref["name"]) == ("Redis", NAME)
    kubectl.run("delete", "redis", NAME, "-n", ns, "--wait=false")
    reconciler.sync(ns)  # deletes the pods, then releases the finalizer
    wait_for(lambda: not pods(kubectl, ns) or NotYet("pods"), what="pods gone")
    reconciler.sync(ns)
    wait_for(lambda: not claims(kubectl, ns) or NotYet("claims"), what="claims collected")


def test_whendeleted_retain_claims_stay_and_a_redis_made_again_mounts_them(
    kubectl: Kubectl, reconciler: Reconciler, ns: str
):
    kubectl.apply(storage_yaml(ns, num=2))
    converged(kubectl, reconciler, ns)
    before = claim_uids(kubectl, ns)
    kubectl.run("delete", "redis", NAME, "-n", ns, "--wait=false")
    reconciler.sync(ns)
    wait_for(lambda: not pods(kubectl, ns) or NotYet("pods"), what="pods gone")
    reconciler.sync(ns)
    wait_for(
        lambda: not kubectl.json("get", "redis", "-n", ns)["items"] or NotYet("redis"),
        what="the Redis gone",
    )
    assert claim_uids(kubectl, ns) == before
    kubectl.apply(storage_yaml(ns, num=2))
    converged(kubectl, reconciler, ns)
    assert claim_uids(kubectl, ns) == before
    assert mounted(kubectl, ns) == {f"{NAME}-{i}": f"data-{NAME}-{i}" for i in range(2)}


def test_a_larger_size_grows_every_claim_and_the_status_says_so_until_it_has(
    kubectl: Kubectl, reconciler: Reconciler, ns: str
):
    kubectl.apply(storage_yaml(ns, num=2))
    converged(kubectl, reconciler, ns)
    scale(kubectl, ns, {"spec": {"storage": {"size": "2Gi"}}})
    grew = reconciler.sync(ns)
    assert grew.summary["actions"].get("PersistentVolumeClaim/patch/ok") == 2
    st = status(kubectl, ns)
    assert condition(st, "Progressing") == ("True", "ResizingClaims")
    (progressing,) = [c for c in st["conditions"] if c["type"] == "Progressing"]
    assert progressing["message"] == f"claims growing to 2Gi: data-{NAME}-0, data-{NAME}-1"
    # Its pods serve all along (Ready), and the Status column names the step.
    assert condition(st, "Ready") == ("True", "AllReplicasReady")
    assert st["state"] == "ResizingClaims"
    wait_for(lambda: bound(kubectl, ns, "2Gi"), what="claims at 2Gi")
    converged(kubectl, reconciler, ns)
    assert status(kubectl, ns)["state"] == "Ready"
    shrink = kubectl.apply(storage_yaml(ns, num=2, size="1Gi"), check=False)
    assert shrink.returncode != 0
    assert "spec.storage.size cannot shrink: claims only grow" in shrink.stderr
    stays_converged(kubectl, reconciler, ns)


def test_a_class_that_cannot_grow_is_said_once_and_not_retried(
    kubectl: Kubectl, reconciler: Reconciler, ns: str
):
    fixed = f"fixed-{ns}"
    kubectl.apply(
        json.dumps(
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "metadata": {"name": fixed},
                "provisioner": "hack.reconciler.local/hostpath",
                "allowVolumeExpansion": False,
            }
        )
    )
    try:
        kubectl.apply(storage_yaml(ns, num=1, storageClassName=fixed))
        converged(kubectl, reconciler, ns)
        scale(kubectl, ns, {"spec": {"storage": {"size": "2Gi"}}})
        said = reconciler.sync(ns)
        assert "PersistentVolumeClaim/patch/ok" not in said.summary["actions"]
        st = status(kubectl, ns)
        assert condition(st, "Degraded") == ("True", "StorageNotExpandable")
        assert f"storage class {fixed} does not allow volume expansion" in st["message"]
        assert len(events(kubectl, ns, "StorageNotExpandable")) == 1
        stays_converged(kubectl, reconciler, ns)
        assert bound(kubectl, ns, "1Gi") is True
    finally:
        kubectl.run("delete", "storageclass", fixed, "--wait=false")


def test_a_class_that_does_not_exist_leaves_claims_pending_and_named(
    kubectl: Kubectl, reconciler: Reconciler, ns: str
):
    kubectl.apply(storage_yaml(ns, num=1, storageClassName=f"missing-{ns}"))
    reconciler.sync(ns)
    reconciler.sync(ns)
    st = status(kubectl, ns)
    gone = f"claim data-{NAME}-0 is Pending: storage class missing-{ns} does not exist"
    assert gone in st["message"]
    assert st["state"] != "Ready"
    plan = reconciler.cli("plan", "-n", ns, expect=None)
    assert "Not Ready yet" in plan.stdout and f"data-{NAME}-0" in plan.stdout
    changed = kubectl.apply(storage_yaml(ns, num=1, storageClassName="standard"), check=False)
    assert changed.returncode != 0
    assert "storageClassName cannot change" in changed.stderr


def test_storage_added_to_a_running_redis_rolls_each_pod_once(
    kubectl: Kubectl, reconciler: Reconciler, ns: str
):
    plain = json.loads(storage_yaml(ns, num=2))
    del plain["spec"]["storage"]
    plain["spec"]["terminationGracePeriodSeconds"] = 45
    kubectl.apply(json.dumps(plain))
    converged(kubectl, reconciler, ns)
    before = {n: p["metadata"]["uid"] for n, p in pods(kubectl, ns).items()}
    json_patch(kubectl, ns, {"op": "add", "path": "/spec/storage", "value": {"size": "1Gi"}})
    converged(kubectl, reconciler, ns)
    after = pods(kubectl, ns)
    assert all(after[n]["metadata"]["uid"] != uid for n, uid in before.items())
    assert mounted(kubectl, ns) == {f"{NAME}-{i}": f"data-{NAME}-{i}" for i in range(2)}
    assert {p["spec"]["terminationGracePeriodSeconds"] for p in after.values()} == {45}
    created = sorted(events(kubectl, ns, "CreatePod"))
    assert created == [  # two at first, then each pod once more
        f"Created pod {NAME}-0: spec changed",
        f"Created pod {NAME}-1: spec changed",
        f"Created pods {NAME}-0, {NAME}-1: scale up",
    ]
    gone = json_patch(kubectl, ns, {"op": "remove", "path": "/spec/storage"}, check=False)
    assert gone.returncode != 0 and "spec.storage cannot be removed" in gone.stderr
    stays_converged(kubectl, reconciler, ns)
