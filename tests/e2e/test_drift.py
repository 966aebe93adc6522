"""Drift is repaired from what is observed, in one-shot mode: an image set by
hand, a label removed by hand, an annotation edited by hand."""

from __future__ import annotations

import pytest

from .conftest import Kubectl, Reconciler, wait_for
from .test_redis import pods, redis_yaml, settled

pytestmark = pytest.mark.e2e

HASH = "myapp.demo.kubebuilder.io/template-hash"
MANAGED_BY = "app.kubernetes.io/managed-by"


def test_image_label_and_annotation_changed_by_hand_are_repaired(
    kubectl: Kubectl, reconciler: Reconciler, ns: str
):
    kubectl.apply(redis_yaml(ns, num=3))
    reconciler.converge(ns, settle=lambda: settled(kubectl, ns))
    before = pods(kubectl, ns)
    kubectl.run("set", "image", "pod/redis-sample-0", "redis=redis:6-alpine", "-n", ns)
    kubectl.run("label", "pod", "redis-sample-1", f"{MANAGED_BY}-", "-n", ns)
    kubectl.run("annotate", "pod", "redis-sample-2", f"{HASH}=0000000000", "--overwrite", "-n", ns)

    shown = reconciler.cli("plan", "-n", ns).stdout
    assert "evict pod" in shown and "redis-sample-0" in shown
    assert "drift (image is redis:6-alpine, want redis:5-alpine)" in shown
    assert f"patch pod {ns}/redis-sample-1 metadata (drift: {MANAGED_BY} changed by hand)" in shown
    assert f"patch pod {ns}/redis-sample-2 metadata (drift: {HASH} changed by hand)" in shown

    first = reconciler.sync(ns)
    assert first.summary["actions"]["Pod/evict/ok"] == 1  # Ready: through the Eviction API
    assert first.summary["actions"]["Pod/patch-metadata/ok"] == 2
    now = pods(kubectl, ns)
    assert now["redis-sample-1"]["metadata"]["labels"][MANAGED_BY] == "reconciler"
    assert (
        now["redis-sample-2"]["metadata"]["annotations"][HASH]
        == (before["redis-sample-2"]["metadata"]["annotations"][HASH])
    )
    # Metadata is put back in place: those two pods are the same pods.
    for name in ("redis-sample-1", "redis-sample-2"):
        assert now[name]["metadata"]["uid"] == before[name]["metadata"]["uid"]
    events = kubectl.json(
        "get", "events", "-n", ns, "--field-selector", "involvedObject.kind=Redis"
    )
    messages = {e["reason"]: [] for e in events["items"]}
    for e in events["items"]:
        messages[e["reason"]].append(e["message"])
    assert len(messages["Drift"]) == 2
    assert any("drift (image is redis:6-alpine" in m for m in messages["EvictPod"])

    reconciler.converge(ns, settle=lambda: settled(kubectl, ns))
    wait_for(lambda: settled(kubectl, ns), what="pods Ready")
    replaced = pods(kubectl, ns)["redis-sample-0"]
    assert replaced["metadata"]["uid"] != before["redis-sample-0"]["metadata"]["uid"]
    assert replaced["spec"]["containers"][0]["image"] == "redis:5-alpine"
    assert "No changes" in reconciler.cli("plan", "-n", ns).stdout
