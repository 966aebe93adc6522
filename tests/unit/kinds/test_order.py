"""A kind's declared write order: steps in order, planned order kept within
a step, a step that waits dropped, and a write with no step refused."""

from __future__ import annotations

import pytest

from reconciler.actions import (
    CreateChild,
    CreatePod,
    DeleteChild,
    DeletePod,
    PatchChild,
    PatchFinalizers,
    PatchLabels,
    PatchPodMetadata,
    PatchStatus,
)
from reconciler.kinds.order import (
    BUCKET_LABEL,
    BUCKET_LABEL_WHY,
    POD_BUCKET_LABELS,
    Step,
    Unplaced,
    WriteOrder,
    sharded,
)
from reconciler.model import ObjKey

OWNER = ObjKey("Redis", "ns", "r")
ORDER = sharded(
    Step("finalizer", (PatchFinalizers,)),
    Step("pods", (CreatePod, DeletePod)),
    Step("status", (PatchStatus,)),
    Step("pod metadata", (PatchPodMetadata,)),
    Step("budget", (DeleteChild,), "PodDisruptionBudget"),
    Step("budget size", (PatchChild,), "PodDisruptionBudget", waits_for=("pods",)),
)


def delete(name: str) -> DeletePod:
    return DeletePod(OWNER, "ns", name, f"uid-{name}", "surplus")


def budget(kind: str = "PodDisruptionBudget") -> PatchChild:
    return PatchChild(OWNER, ObjKey(kind, "ns", "r"), "7", {"spec": {}}, "sized")


STATUS = PatchStatus(OWNER, "1", {"replicas": 1})
FINALIZER = PatchFinalizers(OWNER, "1", ("f",), "guard")


def test_steps_run_in_their_order_and_a_step_keeps_the_planned_order():
    planned = [STATUS, delete("r-2"), FINALIZER, delete("r-1")]
    assert ORDER.arranged(planned) == [FINALIZER, delete("r-2"), delete("r-1"), STATUS]


def test_a_step_that_waits_for_another_goes_only_in_a_pass_without_it():
    assert ORDER.arranged([budget(), delete("r-1"), STATUS]) == [delete("r-1"), STATUS]
    assert ORDER.arranged([budget(), STATUS]) == [STATUS, budget()]


def test_a_write_no_step_takes_is_refused_not_guessed():
    with pytest.raises(Unplaced, match="no step of"):
        ORDER.arranged([budget("Service")])  # a child kind the order does not name
    with pytest.raises(Unplaced):
        ORDER.arranged(
            [CreateChild(OWNER, {"kind": "Service", "metadata": {"namespace": "ns", "name": "r"}})]
        )


def test_an_order_that_names_a_step_twice_or_waits_for_none_is_refused():
    with pytest.raises(ValueError, match="repeat"):
        WriteOrder((Step("a", (PatchStatus,)), Step("a", (DeletePod,))))
    with pytest.raises(ValueError, match="nowhere"):
        WriteOrder((Step("a", (PatchStatus,), waits_for=("b",)),))


def pod_labels(name: str, why: str) -> PatchPodMetadata:
    return PatchPodMetadata(OWNER, "ns", name, "3", {"l": "v"}, {}, None, why)


def test_a_sharded_replicas_writes_have_their_steps_first_and_last():
    """The object's bucket label before everything; a pod's new bucket label
    after everything, while a pod patch for another reason keeps its step."""
    label = PatchLabels(OWNER, "1", {"b": "3"}, BUCKET_LABEL_WHY)
    bucket, repair = pod_labels("r-0", BUCKET_LABEL_WHY), pod_labels("r-1", "labels changed")
    planned = [bucket, budget(), STATUS, repair, label]
    assert ORDER.arranged(planned) == [label, STATUS, repair, budget(), bucket]


def test_an_order_without_the_sharded_steps_is_refused():
    status = Step("status", (PatchStatus,))
    with pytest.raises(ValueError, match="sharded"):
        WriteOrder((status,))
    with pytest.raises(ValueError, match="sharded"):
        WriteOrder((BUCKET_LABEL, status))  # the pods' step missing last
    with pytest.raises(ValueError, match="sharded"):
        WriteOrder((status, POD_BUCKET_LABELS))  # the object's step missing first
