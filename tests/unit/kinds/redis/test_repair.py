"""Drift put back, and what admission made of our create (kinds/redis/repair.py)."""

from __future__ import annotations

import dataclasses

from reconciler.actions import (
    CreatePod,
    DeletePod,
    EvictPod,
    PatchPodMetadata,
    PatchStatus,
)
from reconciler.constants import LABEL_INSTANCE, LABEL_MANAGED_BY, LABEL_NAME
from reconciler.kinds.redis.identity import (
    ADMITTED_IMAGE_ANNOTATION,
    COMPONENT,
    TEMPLATE_HASH_ANNOTATION,
    controller_ref,
)
from reconciler.model import OwnerRef
from tests.unit import sim
from tests.unit.builders import CONFIG, NOW, current_hash, plan_redis, pod, redis, removed
from tests.unit.kinds.redis.helpers import (
    admitted,
    cond,
    converged,
    kinds,
    set_image,
    status_of,
)


def test_an_image_set_by_hand_is_drift_replaced_like_a_stale_pod():
    r = redis()
    pods = [set_image(pod(r, 0), "other:tag"), pod(r, 1), pod(r, 2)]
    actions = plan_redis(r, pods, CONFIG, NOW)
    (delete,) = [a for a in actions if isinstance(a, DeletePod | EvictPod)]
    assert delete.name == "r-0"
    assert delete.why == "drift (image is other:tag, want redis:5-alpine)"
    assert delete.event is not None and "drift" in delete.event.message
    st = status_of(actions).status
    assert (st["updatedReplicas"], cond(st, "Ready")["status"]) == (2, "False")
    assert cond(st, "Progressing")["reason"] == "RollingUpdate"


def test_drift_is_replaced_one_pod_at_a_time_while_the_others_are_ready():
    r = redis()
    pods = [set_image(pod(r, 0), "x:1"), set_image(pod(r, 1), "x:1"), pod(r, 2)]
    deletes = [a.name for a in removed(plan_redis(r, pods, CONFIG, NOW))]
    assert deletes == ["r-0"]
    pods = [set_image(pod(r, 0), "x:1"), pod(r, 1, ready=False), pod(r, 2)]
    assert not [a for a in removed(plan_redis(r, pods, CONFIG, NOW))]


def test_what_admission_made_of_our_create_is_never_stale():
    r = redis()
    pods = [
        admitted(pod(r, 0), sidecar=True),
        admitted(pod(r, 1), image="mirror.local/redis:5-alpine"),
        admitted(pod(r, 2), ports=(6379, 6380)),
    ]
    actions = plan_redis(converged(r, pods), pods, CONFIG, NOW)
    assert not [a for a in actions if isinstance(a, (DeletePod, CreatePod))]
    assert not [a for a in actions if isinstance(a, PatchStatus)]
    # The rewritten image is announced once, and recorded on the pod.
    (note,) = actions
    assert isinstance(note, PatchPodMetadata) and note.name == "r-1"
    assert note.annotations == {ADMITTED_IMAGE_ANNOTATION: "mirror.local/redis:5-alpine"}
    assert note.event is not None
    assert (note.event.type, note.event.reason, note.event.component) == (
        "Normal",
        "ChangedAtAdmission",
        COMPONENT,
    )
    assert note.event.message == (
        "Pod r-1: image is mirror.local/redis:5-alpine, asked redis:5-alpine: changed at admission"
    )
    recorded = [*pods[:1], sim.repaired(pods[1], note), pods[2]]
    assert plan_redis(converged(r, recorded), recorded, CONFIG, NOW) == []


def test_a_hand_edit_after_admission_is_compared_with_what_admission_gave():
    r = redis()
    mirrored = admitted(pod(r, 0), image="mirror.local/redis:5-alpine")
    mirrored = dataclasses.replace(
        mirrored,
        annotations={
            **mirrored.annotations,
            ADMITTED_IMAGE_ANNOTATION: mirrored.containers[0].image,
        },
    )
    # kubectl debug adds an ephemeral container: a new generation, same image.
    debugged = dataclasses.replace(mirrored, generation=2)
    pods = [debugged, pod(r, 1), pod(r, 2)]
    assert plan_redis(converged(r, pods), pods, CONFIG, NOW) == []
    # kubectl set image: replaced, named against the admitted image.
    pods = [set_image(mirrored, "redis:6"), pod(r, 1), pod(r, 2)]
    (delete,) = [a for a in removed(plan_redis(r, pods, CONFIG, NOW))]
    assert delete.why == "drift (image is redis:6, want mirror.local/redis:5-alpine)"


def test_a_sidecar_beside_a_hand_edited_container_is_not_judged():
    r = redis()
    p = admitted(pod(r, 0), sidecar=True)
    sidecar = dataclasses.replace(p.containers[1], image="istio/proxyv2:1.25")
    pods = [
        dataclasses.replace(p, containers=(p.containers[0], sidecar), generation=2),
        pod(r, 1),
        pod(r, 2),
    ]
    assert plan_redis(converged(r, pods), pods, CONFIG, NOW) == []


def test_a_hash_edited_on_a_current_pod_is_put_back_not_replaced():
    r = redis()
    pods = [pod(r, 0, hash_="edited"), pod(r, 1), pod(r, 2)]
    actions = plan_redis(converged(r, pods), pods, CONFIG, NOW)
    assert kinds(actions) == ["PatchPodMetadata"]  # the status is already right
    (patch,) = actions
    assert patch.annotations == {TEMPLATE_HASH_ANNOTATION: current_hash()}
    assert (patch.labels, patch.owner_references) == ({}, None)
    assert patch.resource_version == "5"


def test_a_label_removed_by_hand_is_put_back_with_a_drift_event():
    r = redis()
    p0 = pod(r, 0)
    p0 = dataclasses.replace(p0, labels={"team": "a", LABEL_INSTANCE: "r"})
    actions = plan_redis(r, [p0, pod(r, 1), pod(r, 2)], CONFIG, NOW)
    (patch,) = [a for a in actions if isinstance(a, PatchPodMetadata)]
    assert patch.labels == {LABEL_NAME: "redis", LABEL_MANAGED_BY: "reconciler"}
    assert patch.body("7") == {"metadata": {"resourceVersion": "7", "labels": patch.labels}}
    assert patch.event is not None
    assert (patch.event.type, patch.event.reason) == ("Normal", "Drift")
    assert patch.event.message == (
        "Restored pod r-0: drift: app.kubernetes.io/name, "
        "app.kubernetes.io/managed-by changed by hand"
    )


def test_a_changed_controller_reference_is_put_back_and_other_owners_kept():
    r = redis()
    p0 = pod(r, 0)
    other = OwnerRef("v1", "ConfigMap", "cm", "cm-uid")
    loose = dataclasses.replace(p0.owner_refs[0], block_owner_deletion=False)
    p0 = dataclasses.replace(p0, owner_refs=(other, loose))
    actions = plan_redis(r, [p0, pod(r, 1), pod(r, 2)], CONFIG, NOW)
    (patch,) = [a for a in actions if isinstance(a, PatchPodMetadata)]
    assert patch.owner_references == (other.to_dict(), controller_ref(r).to_dict())
    assert patch.why == "drift: ownerReferences changed by hand"


def test_metadata_of_a_pod_being_replaced_or_terminating_is_left_alone():
    r = redis()
    bare = {LABEL_INSTANCE: "r"}
    p0 = dataclasses.replace(set_image(pod(r, 0), "x:1"), labels=bare)
    actions = plan_redis(r, [p0, pod(r, 1), pod(r, 2)], CONFIG, NOW)
    assert kinds(actions) == ["EvictPod", "PatchStatus"]
    p1 = dataclasses.replace(pod(r, 1, terminating=True), labels=bare)
    actions = plan_redis(r, [pod(r, 0), p1, pod(r, 2)], CONFIG, NOW)
    assert "PatchPodMetadata" not in kinds(actions)


def test_image_change_also_rolls():
    r = redis(image="redis:7")
    pods = [pod(r, i) for i in range(3)]
    deletes = [a for a in removed(plan_redis(r, pods, CONFIG, NOW))]
    assert [d.name for d in deletes] == ["r-0"]
