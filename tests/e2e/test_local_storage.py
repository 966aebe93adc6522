"""The local cluster binds and grows claims as a real one does: the default
StorageClass `standard`, kube-controller-manager's volume controllers and
hack/cluster/provisioner.py (an external provisioner, resizer and kubelet in
one loop)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from hack.cluster import cluster as launcher

from .conftest import Kubectl, NotYet, owned, wait_for


@pytest.fixture(autouse=True)
def _claims_deleted_before_the_namespace(kubectl: Kubectl, ns: str) -> Iterator[None]:
    """A namespace whose claims are still there (held by the pvc-protection
    finalizer) waits out the namespace controller's 5 s retry; deleting them
    first takes about one."""
    yield
    kubectl.run("delete", "pvc", "--all", "-n", ns, "--timeout=60s")


def make_claim(kubectl: Kubectl, ns: str, name: str, size: str, **spec: Any) -> dict[str, Any]:
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": size}},
            **spec,
        },
    }
    out = kubectl.run("create", "-f", "-", "-o", "json", stdin=yaml.safe_dump(claim))
    return dict(json.loads(out.stdout))


def get_claim(kubectl: Kubectl, ns: str, name: str) -> dict[str, Any]:
    return kubectl.json("get", "pvc", name, "-n", ns)


def bound(kubectl: Kubectl, ns: str, name: str) -> dict[str, Any]:
    def check() -> Any:
        claim = get_claim(kubectl, ns, name)
        phase = claim.get("status", {}).get("phase")
        return claim if phase == "Bound" else NotYet(f"phase {phase}")

    return dict(wait_for(check, what=f"claim {ns}/{name} to be Bound", timeout=60))


def volume_of(kubectl: Kubectl, claim: dict[str, Any]) -> dict[str, Any]:
    return kubectl.json("get", "pv", claim["spec"]["volumeName"])


def events(kubectl: Kubectl, ns: str, name: str, reason: str) -> list[dict[str, Any]]:
    selector = f"involvedObject.name={name},reason={reason}"
    return list(kubectl.json("get", "events", "-n", ns, "--field-selector", selector)["items"])


def test_a_claim_naming_no_class_gets_standard_and_a_volume_of_its_size(
    kubectl: Kubectl, ns: str
) -> None:
    created = make_claim(kubectl, ns, "data", "3Gi")
    # The DefaultStorageClass admission plugin, before anything else sees it.
    assert created["spec"]["storageClassName"] == "standard"
    claim = bound(kubectl, ns, "data")
    assert claim["status"]["capacity"] == {"storage": "3Gi"}
    volume = volume_of(kubectl, claim)
    assert volume["spec"]["capacity"] == {"storage": "3Gi"}
    assert volume["spec"]["storageClassName"] == "standard"
    assert volume["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert volume["spec"]["persistentVolumeReclaimPolicy"] == "Delete"
    ref = volume["spec"]["claimRef"]
    assert (ref["namespace"], ref["name"], ref["uid"]) == (ns, "data", created["metadata"]["uid"])
    provisioner = launcher.PROVISIONER_NAME
    assert volume["metadata"]["annotations"]["pv.kubernetes.io/provisioned-by"] == provisioner
    assert claim["metadata"]["annotations"]["volume.kubernetes.io/storage-provisioner"] == (
        provisioner
    )


class ClaimWatch:
    """Every version of one claim, as `kubectl get --watch` prints them: a
    state that lasts one provisioner loop is seen however slow the test is."""

    TEMPLATE = 'jsonpath={.status.conditions[*].type}|{.status.capacity.storage}{"\\n"}'

    def __init__(self, kubectl: Kubectl, ns: str, name: str) -> None:
        self.proc = owned(
            subprocess.Popen(
                ["kubectl", "get", "pvc", name, "-n", ns, "--watch", "-o", self.TEMPLATE],
                stdout=subprocess.PIPE,
                text=True,
                env={**os.environ, "KUBECONFIG": str(kubectl.kubeconfig)},
            )
        )
        self.seen: list[tuple[str, str]] = []  # (condition types, capacity) of each version
        threading.Thread(target=self._read, daemon=True).start()
        wait_for(lambda: self.seen, what="the watch's first version")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            conditions, _, capacity = line.strip().partition("|")
            self.seen.append((conditions, capacity))

    def saw(self, conditions: str, capacity: str) -> Any:
        return (conditions, capacity) in self.seen or NotYet(f"versions seen: {self.seen}")


def test_a_claim_that_grows_waits_on_the_node_then_has_its_new_size(
    kubectl: Kubectl, ns: str
) -> None:
    make_claim(kubectl, ns, "data", "1Gi")
    claim = bound(kubectl, ns, "data")
    watch = ClaimWatch(kubectl, ns, "data")
    kubectl.run(
        "patch",
        "pvc",
        "data",
        "-n",
        ns,
        "-p",
        json.dumps({"spec": {"resources": {"requests": {"storage": "2Gi"}}}}),
    )
    # external-resizer's mark: the volume has grown, the file system not yet.
    wait_for(lambda: watch.saw("FileSystemResizePending", "1Gi"), what="FileSystemResizePending")
    # ...then the kubelet's: the claim has its new size, the condition is gone.
    wait_for(lambda: watch.saw("", "2Gi"), what="capacity 2Gi")
    grown = get_claim(kubectl, ns, "data")
    assert grown["status"]["capacity"] == {"storage": "2Gi"}
    assert grown["status"]["allocatedResources"] == {"storage": "2Gi"}
    assert not grown["status"].get("conditions")
    assert volume_of(kubectl, claim)["spec"]["capacity"] == {"storage": "2Gi"}
    # kube-controller-manager's expander left the volume to an external resizer.
    expanding = wait_for(
        lambda: events(kubectl, ns, "data", "ExternalExpanding"), what="ExternalExpanding"
    )
    assert expanding[0]["source"]["component"] == "volume_expand"


def test_deleting_a_claim_deletes_its_volume(kubectl: Kubectl, ns: str) -> None:
    make_claim(kubectl, ns, "data", "1Gi")
    name = bound(kubectl, ns, "data")["spec"]["volumeName"]
    kubectl.run("delete", "pvc", "data", "-n", ns)

    def gone() -> Any:
        found = kubectl.run("get", "pv", name, "-o", "jsonpath={.status.phase}", check=False)
        return found.returncode != 0 or NotYet(f"volume {name} is {found.stdout}")

    wait_for(gone, what=f"volume {name} to be deleted", timeout=60)


def test_a_claim_of_a_class_that_does_not_exist_stays_pending(kubectl: Kubectl, ns: str) -> None:
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    make_claim(kubectl, ns, "data", "1Gi", storageClassName=missing)
    failed = wait_for(
        lambda: events(kubectl, ns, "data", "ProvisioningFailed"), what="ProvisioningFailed"
    )
    assert missing in failed[0]["message"]
    claim = get_claim(kubectl, ns, "data")
    assert claim["status"]["phase"] == "Pending"
    assert not claim["spec"].get("volumeName")
    volumes = kubectl.json("get", "pv")["items"]
    assert not [v for v in volumes if v["spec"].get("storageClassName") == missing]
