"""Table tests for the Redis rules of the planner."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from reconciler.actions import (
    CreatePod,
    DeletePod,
    EvictPod,
    PatchFinalizers,
    PatchPodMetadata,
    PatchStatus,
)
from reconciler.backoff import Failure
from reconciler.constants import LABEL_INSTANCE, LABEL_MANAGED_BY, LABEL_NAME
from reconciler.engine.plan import plan_pass
from reconciler.kinds.redis.changes import why_ended
from reconciler.kinds.redis.identity import (
    ADMITTED_IMAGE_ANNOTATION,
    FINALIZER,
    TEMPLATE_HASH_ANNOTATION,
    controller_ref,
)
from reconciler.kinds.redis.kind import PODS_UNKNOWN
from reconciler.kinds.redis.settings import RedisSettings, redis_settings
from reconciler.model import Container, ContainerState, OwnerRef, PodCondition, rfc3339
from tests.unit import sim
from tests.unit.builders import CONFIG, NOW, current_hash, plan_redis, pod, redis, removed, snap


def kinds(actions):
    return [type(a).__name__ for a in actions]


def status_of(actions):
    patches = [a for a in actions if isinstance(a, PatchStatus)]
    assert len(patches) == 1, actions
    return patches[0]


def cond(status, type_):
    return next(c for c in status["conditions"] if c["type"] == type_)


def converged(r, pods):
    """The Redis with the status the planner wants for these pods."""
    status = status_of(plan_redis(r, pods, CONFIG, NOW)).status
    return dataclasses.replace(r, status=status)


# ------------------------------------------------------------ creation


def test_new_redis_gets_finalizer_first_then_pods_then_status():
    r = redis(finalizers=())
    actions = plan_redis(r, [], CONFIG, NOW)
    assert kinds(actions) == [
        "PatchFinalizers",
        "CreatePod",
        "CreatePod",
        "CreatePod",
        "PatchStatus",
    ]
    assert actions[0].finalizers == (FINALIZER,)
    assert [a.target.name for a in actions[1:4]] == ["r-0", "r-1", "r-2"]
    assert actions[4].events == ()  # nothing wrong, nothing to warn about


def test_finalizer_patch_keeps_other_finalizers():
    r = redis(finalizers=("example.com/other",))
    fin = plan_redis(r, [], CONFIG, NOW)[0]
    assert isinstance(fin, PatchFinalizers)
    assert fin.finalizers == ("example.com/other", FINALIZER)
    assert fin.resource_version == r.resource_version


def test_pod_manifest_follows_conventions():
    r = redis(num=1, port=6375, image="redis:7")
    create = next(a for a in plan_redis(r, [], CONFIG, NOW) if isinstance(a, CreatePod))
    meta, spec = create.manifest["metadata"], create.manifest["spec"]
    assert meta["name"] == "r-0" and meta["namespace"] == "default"
    assert meta["labels"] == {
        LABEL_NAME: "redis",
        LABEL_INSTANCE: "r",
        LABEL_MANAGED_BY: "reconciler",
    }
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "myapp.demo.kubebuilder.io/v1",
            "kind": "Redis",
            "name": "r",
            "uid": r.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert meta["annotations"][TEMPLATE_HASH_ANNOTATION] == current_hash(6375, "redis:7")
    (container,) = spec["containers"]
    assert container["name"] == "redis"
    assert container["image"] == "redis:7"
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert container["ports"] == [{"name": "redis", "containerPort": 6375, "protocol": "TCP"}]
    assert create.event.reason == "CreatePod" and "r-0" in create.event.message


def test_default_image_comes_from_config():
    r = redis(num=1)
    create = next(a for a in plan_redis(r, [], CONFIG, NOW) if isinstance(a, CreatePod))
    assert create.manifest["spec"]["containers"][0]["image"] == "redis:5-alpine"
    other = dataclasses.replace(
        CONFIG, kind_settings=(RedisSettings(image="mirror.local/redis:5"),)
    )
    create = next(a for a in plan_redis(r, [], other, NOW) if isinstance(a, CreatePod))
    assert create.manifest["spec"]["containers"][0]["image"] == "mirror.local/redis:5"


def test_converged_redis_plans_nothing():
    r = redis()
    pods = [pod(r, i) for i in range(3)]
    assert plan_redis(converged(r, pods), pods, CONFIG, NOW) == []


def test_converged_status_contents():
    r = redis(generation=4)
    pods = [pod(r, i) for i in range(3)]
    status = converged(r, pods).status
    assert status["observedGeneration"] == 4
    assert (status["replicas"], status["readyReplicas"], status["updatedReplicas"]) == (3, 3, 3)
    assert cond(status, "Ready")["status"] == "True"
    assert cond(status, "Progressing")["status"] == "False"
    assert cond(status, "Degraded")["status"] == "False"
    for c in status["conditions"]:
        assert c["reason"] and c["message"] and c["lastTransitionTime"] == rfc3339(NOW)


def test_status_reflects_pods_created_this_pass():
    st = status_of(plan_redis(redis(), [], CONFIG, NOW)).status
    assert st["replicas"] == 3 and st["readyReplicas"] == 0 and st["updatedReplicas"] == 3
    assert cond(st, "Progressing")["reason"] == "WaitingForReady"
    assert cond(st, "Ready")["status"] == "False"


def test_last_transition_time_kept_while_status_unchanged():
    r = redis()
    pods = [pod(r, i) for i in range(3)]
    settled = converged(r, pods)
    later = NOW + timedelta(hours=1)
    # One pod becomes unready: Ready flips (new time), Degraded does not (old time).
    pods[1] = pod(r, 1, ready=False)
    st = status_of(plan_redis(settled, pods, CONFIG, later)).status
    assert cond(st, "Ready")["lastTransitionTime"] == rfc3339(later)
    assert cond(st, "Degraded")["lastTransitionTime"] == rfc3339(NOW)


# ------------------------------------------------------------ missing pods


@pytest.mark.parametrize(
    ("recorded", "why"),
    [
        ({}, "scale up"),
        ({"replicas": 3}, "deleted by hand"),
        (
            {
                "replicas": 3,
                "conditions": [
                    {"type": "Progressing", "status": "True", "reason": "RollingUpdate"}
                ],
            },
            "spec changed",
        ),
    ],
)
def test_missing_pod_is_recreated_with_a_reason(recorded, why):
    r = redis(status=recorded)
    pods = [pod(r, 0), pod(r, 2)]
    creates = [a for a in plan_redis(r, pods, CONFIG, NOW) if isinstance(a, CreatePod)]
    assert [c.target.name for c in creates] == ["r-1"]
    assert creates[0].event.message == f"Created pod r-1: {why}"


def test_terminating_pod_blocks_recreation_of_its_name():
    r = redis()
    pods = [pod(r, 0), pod(r, 1, terminating=True), pod(r, 2)]
    actions = plan_redis(r, pods, CONFIG, NOW)
    assert not [a for a in actions if isinstance(a, CreatePod | DeletePod)]
    assert status_of(actions).status["replicas"] == 2


# ------------------------------------------------------------ scale down


def test_scale_down_evicts_highest_indexes():
    """A Ready pod goes through the Eviction API, so its budgets are honoured."""
    r = redis(num=2, status={"replicas": 3})
    pods = [pod(r, i) for i in range(3)]
    actions = plan_redis(r, pods, CONFIG, NOW)
    deletes = [a for a in actions if isinstance(a, DeletePod | EvictPod)]
    assert [(d.name, d.why, d.uid) for d in deletes] == [("r-2", "scale down", pods[2].uid)]
    assert isinstance(deletes[0], EvictPod)
    assert deletes[0].event.reason == "EvictPod"
    assert "scale down" in deletes[0].event.message
    assert status_of(actions).status["replicas"] == 2


def test_scale_to_zero_keeps_finalizer_and_deletes_all():
    r = redis(num=0)
    pods = [pod(r, i) for i in range(2)]
    actions = plan_redis(r, pods, CONFIG, NOW)
    assert sorted(a.name for a in actions if isinstance(a, DeletePod | EvictPod)) == ["r-0", "r-1"]
    assert not [a for a in actions if isinstance(a, PatchFinalizers)]


def test_owned_pod_with_unexpected_name_is_deleted():
    r = redis(num=1)
    pods = [pod(r, 0), pod(r, 0, name="r-extra")]
    deletes = [a for a in removed(plan_redis(r, pods, CONFIG, NOW))]
    assert [d.name for d in deletes] == ["r-extra"]


# ------------------------------------------------------------ rolling update


def test_stale_pod_replaced_when_all_others_ready():
    r = redis(port=6380)
    stale = current_hash(6379)
    pods = [pod(r, i, hash_=stale) for i in range(3)]
    actions = plan_redis(r, pods, CONFIG, NOW)
    deletes = [a for a in actions if isinstance(a, DeletePod | EvictPod)]
    assert [(d.name, d.why) for d in deletes] == [("r-0", "spec changed")]
    st = status_of(actions).status
    assert cond(st, "Progressing")["reason"] == "RollingUpdate"
    assert st["updatedReplicas"] == 0


def test_rollout_waits_while_another_pod_is_not_ready():
    r = redis(port=6380)
    old = current_hash(6379)
    pods = [pod(r, 0, hash_=old), pod(r, 1, ready=False, port=6380), pod(r, 2, port=6380)]
    actions = plan_redis(r, pods, CONFIG, NOW)
    assert not [a for a in actions if isinstance(a, DeletePod | EvictPod)]


def test_rollout_waits_while_a_pod_is_missing_or_terminating():
    r = redis(port=6380)
    old = current_hash(6379)
    for others in ([pod(r, 1)], [pod(r, 1), pod(r, 2, terminating=True)]):
        pods = [pod(r, 0, hash_=old), *others]
        deletes = [a for a in removed(plan_redis(r, pods, CONFIG, NOW))]
        assert deletes == []


def test_rollout_resumes_with_next_stale_pod():
    r = redis(port=6380)
    old = current_hash(6379)
    pods = [pod(r, 0, port=6380), pod(r, 1, hash_=old), pod(r, 2, hash_=old)]
    deletes = [a for a in removed(plan_redis(r, pods, CONFIG, NOW))]
    assert [d.name for d in deletes] == ["r-1"]


def crashing(p):
    """A pod whose container keeps crashing: Running, never Ready."""
    waiting = ContainerState("redis", True, "CrashLoopBackOff", "back-off 40s restarting")
    return dataclasses.replace(pod_unready(p), phase="Running", container_states=(waiting,))


def pod_unready(p):
    return dataclasses.replace(
        p, conditions=(PodCondition("Ready", "False", "ContainersNotReady"),)
    )


def test_a_fix_rolls_to_pods_that_all_crash():
    """Every pod crashes on the old spec: none will be Ready, so waiting for
    the others before replacing one would wait forever. All go in one pass."""
    r = redis(num=3, image="redis:6")
    pods = [crashing(pod(r, i, image="redis:5-alpine")) for i in range(3)]
    actions = plan_redis(r, pods, CONFIG, NOW)
    deletes = [a for a in actions if isinstance(a, DeletePod | EvictPod)]
    assert [d.name for d in deletes] == ["r-0", "r-1", "r-2"]
    assert {d.why for d in deletes} == {"spec changed; not Ready, so replaced without waiting"}
    st = status_of(actions).status
    assert (st["replicas"], st["updatedReplicas"]) == (0, 0)
    assert cond(st, "Progressing")["reason"] == "RollingUpdate"


def test_unready_stale_pods_go_first_while_ready_ones_wait():
    """r-0 cannot pull the bad image and r-2 came back on it after a deletion
    by hand; once the image is fixed both go at once, and the Ready r-1,
    stale too, waits until the others are Ready again."""
    r = redis(num=3, image="redis:5-alpine")
    bad = dict(image="redis:does-not-exist")
    pods = [
        image_pull_backoff(pod_unready(pod(r, 0, **bad))),
        pod(r, 1, image="redis:4"),
        image_pull_backoff(pod_unready(pod(r, 2, **bad))),
    ]
    deletes = [a.name for a in removed(plan_redis(r, pods, CONFIG, NOW))]
    assert deletes == ["r-0", "r-2"]
    pods = [pod(r, 0), pod(r, 1, image="redis:4"), pod(r, 2, ready=False)]
    assert not [a for a in removed(plan_redis(r, pods, CONFIG, NOW))]
    pods = [pod(r, 0), pod(r, 1, image="redis:4"), pod(r, 2)]
    deletes = [a.name for a in removed(plan_redis(r, pods, CONFIG, NOW))]
    assert deletes == ["r-1"]


def test_an_unready_pod_on_the_current_spec_is_left_to_its_kubelet():
    """Only stale pods are replaced: a crash on the current spec is not ours to fix."""
    r = redis(num=2)
    pods = [crashing(pod(r, 0)), pod(r, 1)]
    assert not [a for a in removed(plan_redis(r, pods, CONFIG, NOW))]


# ------------------------------------------------------------ drift


def set_image(p, image):
    """`kubectl set image`: the container changes, and so the pod's
    generation; the annotation does not."""
    container = dataclasses.replace(p.containers[0], image=image)
    return dataclasses.replace(p, containers=(container,), generation=p.generation + 1)


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


def admitted(p, *, image=None, sidecar=False, ports=None):
    """What a mutating webhook makes of our create: the pod is still at
    generation 1, since nobody changed it after it was created."""
    (mine,) = p.containers
    mine = dataclasses.replace(
        mine, image=image or mine.image, ports=ports if ports is not None else mine.ports
    )
    extra = (Container("istio-proxy", "istio/proxyv2:1.24", (15090,)),) if sidecar else ()
    return dataclasses.replace(p, containers=(mine, *extra))


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
    assert note.event is not None and note.event.reason == "ChangedAtAdmission"
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


# ------------------------------------------------------------ foreign pods


def test_pod_owned_by_someone_else_is_never_touched():
    r = redis(num=2)
    foreign = pod(r, 1, owner_uid="someone-else")
    actions = plan_redis(r, [pod(r, 0), foreign], CONFIG, NOW)
    touched = [a for a in actions if isinstance(a, CreatePod | DeletePod)]
    assert touched == []
    patch = status_of(actions)
    degraded = cond(patch.status, "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "PodConflict")
    assert "r-1" in degraded["message"]
    (event,) = patch.events
    assert (event.type, event.reason) == ("Warning", "PodConflict") and "r-1" in event.message


def test_conflict_warning_is_not_repeated_once_recorded():
    r = redis(num=2)
    pods = [pod(r, 0), pod(r, 1, owner_uid="someone-else")]
    settled = converged(r, pods)
    assert plan_redis(settled, pods, CONFIG, NOW) == []


# ------------------------------------------------------------ invalid spec


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"port": 6399, "num": 1}, "spec.port"),
        ({"port": "6379", "num": 1}, "spec.port"),
        ({"port": 6379, "num": -1}, "spec.num"),
        ({"port": 6379, "num": 1.5}, "spec.num"),
        ({"port": 6379, "num": 1, "image": "Not An Image"}, "spec.image"),
    ],
)
def test_invalid_spec_touches_no_pod_and_names_the_field(spec, field):
    r = redis(spec=spec)
    pods = [pod(r, 0)]
    actions = plan_redis(r, pods, CONFIG, NOW)
    assert not [a for a in actions if isinstance(a, CreatePod | DeletePod)]
    patch = status_of(actions)
    degraded = cond(patch.status, "Degraded")
    assert degraded["reason"] == "InvalidSpec" and field in degraded["message"]
    assert patch.events[0].type == "Warning" and field in patch.events[0].message
    assert plan_redis(dataclasses.replace(r, status=patch.status), pods, CONFIG, NOW) == []


# ------------------------------------------------------------ deletion


def test_deleting_redis_deletes_its_pods_and_keeps_finalizer():
    r = redis(deleting=True)
    pods = [pod(r, 0), pod(r, 1, terminating=True), pod(r, 5, owner_uid="other")]
    actions = plan_redis(r, pods, CONFIG, NOW)
    assert kinds(actions) == ["DeletePod"]
    assert actions[0].name == "r-0" and actions[0].why == "Redis deleted"
    assert actions[0].event.reason == "DeletePod"


def test_finalizer_removed_once_no_pod_remains():
    r = redis(deleting=True, finalizers=("a/b", FINALIZER))
    (action,) = plan_redis(r, [pod(r, 0, owner_uid="other")], CONFIG, NOW)
    assert isinstance(action, PatchFinalizers) and action.finalizers == ("a/b",)


def test_finalizer_never_added_to_object_being_deleted():
    r = redis(deleting=True, finalizers=("foregroundDeletion",))
    assert plan_redis(r, [], CONFIG, NOW) == []


def test_deleting_redis_with_invalid_spec_still_cleans_up():
    r = redis(deleting=True, spec={"port": 1})
    assert kinds(plan_redis(r, [pod(r, 0)], CONFIG, NOW)) == ["DeletePod"]


# ------------------------------------------------------------ whole pass


def test_orphans_deleted_only_with_complete_views():
    r = redis(num=1)
    orphan = pod(None, 0, name="gone-0", owner_uid="uid-of-deleted-redis")
    pods = (pod(r, 0), orphan)
    snapshot = snap((converged(r, [pods[0]]),), (), pods)
    (action,) = plan_pass(snapshot, CONFIG, NOW).actions
    assert isinstance(action, DeletePod) and action.name == "gone-0" and action.why == "owner gone"
    # Redis LIST failed: an orphan cannot be told apart from a pod of an unseen Redis.
    assert plan_pass(snap(None, (), pods), CONFIG, NOW).actions == ()


def test_a_failed_pod_list_creates_and_deletes_nothing_and_the_status_says_why():
    """Nothing is planned on a partial view, and the status does not stand
    frozen: Degraded says why, once; the rest is the last seen."""
    pods = [pod(r := redis(), i) for i in range(3)]
    r = converged(r, pods)
    why = "LIST Pod: 403 Forbidden: pods is forbidden"
    blind = dataclasses.replace(snap((r,), (), None), pods_error=why)
    (patch,) = plan_pass(blind, CONFIG, NOW).actions
    assert isinstance(patch, PatchStatus) and patch.owner == r.key
    assert set(patch.status) == {"state", "message", "conditions"}  # counts, generation kept
    assert patch.status["state"] == PODS_UNKNOWN and why in patch.status["message"]
    conditions = {c["type"]: c for c in patch.status["conditions"]}
    assert conditions["Degraded"]["status"] == "True"
    assert conditions["Degraded"]["reason"] == PODS_UNKNOWN
    assert conditions["Ready"] == next(c for c in r.status["conditions"] if c["type"] == "Ready")
    assert [(e.type, e.reason) for e in patch.events] == [("Warning", PODS_UNKNOWN)]

    written = dataclasses.replace(r, status={**r.status, **patch.status})
    again = dataclasses.replace(snap((written,), (), None), pods_error=why)
    later = NOW + timedelta(minutes=1)
    assert plan_pass(again, CONFIG, later).actions == ()  # said once, not every pass
    (healed,) = plan_pass(snap((written,), (), pods), CONFIG, later).actions
    old, new = ({c["type"]: c for c in s["conditions"]} for s in (r.status, healed.status))
    assert new["Degraded"]["status"] == "False"
    assert new["Degraded"]["lastTransitionTime"] == rfc3339(later)  # it flipped back
    assert new["Ready"] == old["Ready"]  # it never flipped
    assert {k: v for k, v in healed.status.items() if k != "conditions"} == {
        k: v for k, v in r.status.items() if k != "conditions"
    }


def test_with_its_pods_unseen_an_invalid_or_deleted_redis_keeps_its_status():
    """InvalidSpec needs no pods to be true; a Redis being deleted says Deleting."""
    why = "LIST Pod: 403 Forbidden: pods is forbidden"
    invalid = redis(port=1)
    deleting = redis("d", deleting=True)
    blind = dataclasses.replace(snap((invalid, deleting), (), None), pods_error=why)
    assert plan_pass(blind, CONFIG, NOW).actions == ()


def test_with_its_pods_unseen_and_no_lasting_refusal_nothing_is_written():
    """A timeout or a 5xx: the next pass will most likely see the pods."""
    pods = [pod(r := redis(), i) for i in range(3)]
    assert plan_pass(snap((converged(r, pods),), (), None), CONFIG, NOW).actions == ()


def test_pods_are_matched_within_their_namespace():
    a, b = redis(ns="a"), redis(ns="b")
    snapshot = snap((a, b), (), tuple(pod(a, i) for i in range(3)))
    creates = [x for x in plan_pass(snapshot, CONFIG, NOW).actions if isinstance(x, CreatePod)]
    assert {c.target.namespace for c in creates} == {"b"}


# ------------------------------------------------------------ failures and backoff


def held(r, failure, pods=(), now=NOW):
    """The Redis rules right after a failed write: status only, failure counted."""
    from reconciler.backoff import Gate
    from reconciler.kinds.base import PlanInput
    from reconciler.kinds.redis import kind as redis_kind
    from reconciler.model import PodIndex

    gate = Gate(failure, True, failure.count >= CONFIG.failure_threshold)
    return redis_kind.plan(r, PlanInput(PodIndex(pods), CONFIG, now, gate))


def test_a_retry_is_planned_as_it_will_be_once_it_lands():
    r = redis()
    fail = Failure(1, "422 Invalid: spec.containers[0].image", "InvalidObject", 0.0)
    actions = plan_redis(r, [], CONFIG, NOW, fail)
    assert len([a for a in actions if isinstance(a, CreatePod)]) == 3
    st = status_of(actions).status
    assert cond(st, "Degraded")["reason"] == "AsExpected"
    assert st["backoff"] is None  # the merge patch removes the record


def test_the_status_after_a_failed_write_names_it_and_counts_it():
    r = redis()
    fail = Failure(1, "422 Invalid: spec.containers[0].image", "InvalidObject", 1e9)
    (patch,) = held(r, fail)
    degraded = cond(patch.status, "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "InvalidObject")
    assert degraded["message"] == "422 Invalid: spec.containers[0].image"
    assert patch.status["backoff"] == {
        "failures": 1,
        "reason": "InvalidObject",
        "message": "422 Invalid: spec.containers[0].image",
        "retryAfter": "2001-09-09T01:46:40Z",
    }
    assert patch.status["replicas"] == 0  # no pod was created
    (event,) = patch.events
    assert (event.type, event.reason) == ("Warning", "InvalidObject")


def test_backing_off_object_gets_no_pod_writes_until_retry_time():
    from tests.unit.builders import failing

    retry_at = (NOW + timedelta(minutes=1)).timestamp()
    r = failing(redis(), Failure(3, "boom", "ReconcileError", retry_at))
    key = r.key
    snapshot = snap((r,), (), ())
    result = plan_pass(snapshot, CONFIG, NOW)
    assert result.backing_off == {key}
    assert not [a for a in result.actions if isinstance(a, CreatePod)]
    assert cond(status_of(result.actions).status, "Degraded")["reason"] == "BackingOff"
    later = plan_pass(snapshot, CONFIG, NOW + timedelta(minutes=2))
    assert later.backing_off == frozenset()
    assert len([a for a in later.actions if isinstance(a, CreatePod)]) == 3


@pytest.mark.parametrize(
    ("pod_name", "index"),
    [
        ("r-0", 0),
        ("r-12", 12),
        ("r-01", None),
        ("r-", None),
        ("r-x", None),
        ("rr-1", None),
        ("r-1-2", None),
        ("r-\u0661", None),
        ("r", None),
    ],
)
def test_pod_index_parsing(pod_name, index):
    from reconciler.kinds.redis.identity import pod_index

    assert pod_index("r", pod_name) == index


# ------------------------------------------------------------ pinned details


def test_template_hash_is_pinned():
    """Pods carry this hash; a new value would roll every pod on upgrade."""
    from reconciler.kinds.redis.pods import template_hash
    from reconciler.kinds.redis.spec import RedisSpec

    assert template_hash(RedisSpec(port=6379, num=3, image="redis:5-alpine")) == "f89818275d"
    assert template_hash(RedisSpec(port=6380, num=1, image="redis:7")) == "0e3ffb7eec"
    # num is not part of the pod template: scaling never rolls pods.
    assert template_hash(RedisSpec(6379, 1, "redis:5-alpine")) == "f89818275d"


def test_pod_index_needs_the_dash_right_after_the_name():
    from reconciler.kinds.redis.identity import pod_index

    assert pod_index("r", "rx1") is None
    assert pod_index("ab", "a-1") is None


def test_pod_at_the_recorded_count_is_a_scale_up_not_a_deletion_by_hand():
    r = redis(status={"replicas": 2})
    creates = [
        a for a in plan_redis(r, [pod(r, 0), pod(r, 1)], CONFIG, NOW) if isinstance(a, CreatePod)
    ]
    assert [c.event.message for c in creates] == ["Created pod r-2: scale up"]


# ------------------------------------------------------------ conditions, in full


def conds(st):
    return {c["type"]: (c["status"], c["reason"]) for c in st["conditions"]}


def test_every_condition_carries_the_observed_generation():
    r = redis(generation=7)
    for pods in ([], [pod(r, i) for i in range(3)]):
        st = status_of(plan_redis(r, pods, CONFIG, NOW)).status
        assert [c["observedGeneration"] for c in st["conditions"]] == [7, 7, 7]
    st = status_of(plan_redis(redis(generation=7, spec={"port": 1}), [], CONFIG, NOW)).status
    assert [c["observedGeneration"] for c in st["conditions"]] == [7, 7, 7]
    assert st["observedGeneration"] == 7


def test_invalid_spec_conditions_in_full():
    st = status_of(plan_redis(redis(spec={"port": 1, "num": 1}), [], CONFIG, NOW)).status
    assert conds(st) == {
        "Ready": ("False", "InvalidSpec"),
        "Progressing": ("False", "InvalidSpec"),
        "Degraded": ("True", "InvalidSpec"),
    }
    assert (st["replicas"], st["readyReplicas"]) == (0, 0)
    assert "updatedReplicas" not in st


def test_invalid_spec_counts_the_live_pods_it_leaves_alone():
    r = redis(spec={"port": 1, "num": 3})
    pods = [pod(r, 0), pod(r, 1, ready=False), pod(r, 2, terminating=True)]
    st = status_of(plan_redis(r, pods, CONFIG, NOW)).status
    assert (st["replicas"], st["readyReplicas"]) == (2, 1)


def test_degraded_is_true_after_a_failure_and_while_backing_off():
    r = redis()
    pods = [pod(r, i) for i in range(3)]
    fail = Failure(1, "500 InternalError: etcd", "ReconcileError", 0.0)
    st = status_of(held(r, fail, pods)).status
    assert conds(st)["Degraded"] == ("True", "ReconcileError")
    assert cond(st, "Degraded")["message"] == "500 InternalError: etcd"
    third = Failure(3, "500 InternalError: etcd", "ReconcileError", NOW.timestamp() + 60)
    st = status_of(plan_redis(r, pods, CONFIG, NOW, third)).status
    assert conds(st)["Degraded"] == ("True", "BackingOff")
    assert cond(st, "Degraded")["message"] == (
        "backing off until 2026-11-22T12:01:00Z after 3 consecutive failures: "
        "500 InternalError: etcd"
    )
    # Past the retry time the pods are written again, planned as they will land.
    later = NOW + timedelta(minutes=2)
    actions = plan_redis(r, [], CONFIG, later, third)
    assert conds(status_of(actions).status)["Degraded"] == ("False", "AsExpected")
    assert len([a for a in actions if isinstance(a, CreatePod)]) == 3


def test_backing_off_still_writes_status_but_no_pods():
    r = redis()
    held = Failure(3, "boom", "ReconcileError", NOW.timestamp() + 60)
    actions = plan_redis(r, [], CONFIG, NOW, held)
    assert kinds(actions) == ["PatchStatus"]
    (event,) = actions[0].events
    assert (event.type, event.reason) == ("Warning", "BackingOff")


def test_a_conflict_outranks_a_failure_in_degraded():
    r = redis(num=2)
    fail = Failure(1, "boom", "ReconcileError", 0.0)
    pods = [pod(r, 0), pod(r, 1, owner_uid="someone-else")]
    st = status_of(held(r, fail, pods)).status
    assert conds(st)["Degraded"] == ("True", "PodConflict")


@pytest.mark.parametrize("holder", ["terminating", "foreign"])
def test_a_held_name_means_scaling_up(holder):
    r = redis(num=2)
    second = pod(r, 1, terminating=True) if holder == "terminating" else pod(r, 1, owner_uid="x")
    st = status_of(plan_redis(r, [pod(r, 0), second], CONFIG, NOW)).status
    assert conds(st)["Progressing"] == ("True", "ScalingUp")
    assert cond(st, "Progressing")["message"] == "1/2 pods exist"
    assert conds(st)["Ready"] == ("False", "ReplicasNotReady")


def test_progressing_reasons_and_messages():
    r = redis(num=2)
    table = [
        ([pod(r, 0), pod(r, 1)], ("False", "Complete"), "all 2 replicas updated and ready"),
        (
            [pod(r, 0), pod(r, 1, ready=False)],
            ("True", "WaitingForReady"),
            "waiting for 1 of 2 pods to be Ready",
        ),
        ([pod(r, 0), pod(r, 1), pod(r, 2)], ("True", "ScalingDown"), "removing pods beyond 2"),
        (
            [pod(r, 0), pod(r, 1), pod(r, 2, terminating=True)],
            ("True", "ScalingDown"),
            "removing pods beyond 2",
        ),
        (
            [pod(r, 0, image="redis:4"), pod(r, 1)],
            ("True", "RollingUpdate"),
            "1/2 pods updated to the current spec",
        ),
    ]
    for pods, expected, message in table:
        st = status_of(plan_redis(r, pods, CONFIG, NOW)).status
        assert conds(st)["Progressing"] == expected, pods
        assert cond(st, "Progressing")["message"] == message


def test_a_rollout_in_progress_stays_a_rollout_until_every_pod_is_updated():
    rolling = {
        "replicas": 2,
        "conditions": [{"type": "Progressing", "status": "True", "reason": "RollingUpdate"}],
    }
    r = redis(num=2, status=rolling)
    # r-0 is being replaced (terminating), r-1 is current: one of two is updated.
    pods = [pod(r, 0, terminating=True, image="redis:4"), pod(r, 1)]
    st = status_of(plan_redis(r, pods, CONFIG, NOW)).status
    assert conds(st)["Progressing"] == ("True", "RollingUpdate")
    assert cond(st, "Progressing")["message"] == "1/2 pods updated to the current spec"
    assert (st["replicas"], st["updatedReplicas"]) == (1, 1)
    # Without the memory of a rollout, the same pods read as scaling up.
    st = status_of(plan_redis(redis(num=2), pods, CONFIG, NOW)).status
    assert conds(st)["Progressing"] == ("True", "ScalingUp")


def test_ready_needs_every_pod_ready_updated_and_present():
    r = redis(num=2)
    table = [
        ([pod(r, 0), pod(r, 1)], ("True", "AllReplicasReady")),
        ([pod(r, 0), pod(r, 1, ready=False)], ("False", "ReplicasNotReady")),
        ([pod(r, 0)], ("False", "ReplicasNotReady")),
        ([pod(r, 0), pod(r, 1, image="redis:4")], ("False", "ReplicasNotReady")),
    ]
    for pods, expected in table:
        st = status_of(plan_redis(r, pods, CONFIG, NOW)).status
        assert conds(st)["Ready"] == expected, pods
    st = status_of(plan_redis(r, [pod(r, 0)], CONFIG, NOW)).status
    assert cond(st, "Ready")["message"] == "1/2 replicas ready"


def test_counts_while_a_stale_pod_is_replaced():
    r = redis(num=3, port=6380)
    old = current_hash(6379)
    pods = [pod(r, 0, hash_=old), pod(r, 1), pod(r, 2, ready=False, port=6380)]
    pods = [pod(r, 0, hash_=old), pod(r, 1, port=6380), pods[2]]
    st = status_of(plan_redis(r, pods, CONFIG, NOW)).status
    # r-2 is not Ready, so r-0 is not replaced yet.
    assert (st["replicas"], st["readyReplicas"], st["updatedReplicas"]) == (3, 2, 2)


def test_degraded_warning_only_when_it_changes():
    r = redis(num=2)
    pods = [pod(r, 0), pod(r, 1, owner_uid="x")]
    first = status_of(plan_redis(r, pods, CONFIG, NOW))
    assert [e.reason for e in first.events] == ["PodConflict"]
    # Same reason, new message (another name held): warned again.
    r3 = dataclasses.replace(redis(num=3, status=first.status))
    pods3 = [*pods, pod(r3, 2, owner_uid="x")]
    again = status_of(plan_redis(r3, pods3, CONFIG, NOW))
    assert [e.message for e in again.events] == [
        "pods not owned by this Redis hold desired names: r-1, r-2"
    ]


# ------------------------------------------------------------ exact actions and messages


def test_new_redis_actions_in_full():
    from reconciler.actions import EventSpec, ObjRef

    r = redis(num=1, finalizers=("a/b",))
    fin, create, status = plan_redis(r, [], CONFIG, NOW)
    assert fin == PatchFinalizers(
        r.key, "10", ("a/b", FINALIZER), "guard pods before creating them"
    )
    assert (create.manifest["apiVersion"], create.manifest["kind"]) == ("v1", "Pod")
    ref = ObjRef("myapp.demo.kubebuilder.io/v1", "Redis", "default", "r", r.uid)
    assert create.event == EventSpec(
        ref,
        "Normal",
        "CreatePod",
        "Created pod r-0: scale up",
        "redis-controller",
        ("r-0",),
        "scale up",
    )
    assert status.owner == r.key and status.resource_version == "10"
    assert cond(status.status, "Degraded") == {
        "type": "Degraded",
        "status": "False",
        "reason": "AsExpected",
        "message": "no problems seen",
        "lastTransitionTime": rfc3339(NOW),
        "observedGeneration": 1,
    }


def test_deletion_actions_in_full():
    r = redis(deleting=True, finalizers=("a/b", FINALIZER))
    (delete,) = plan_redis(r, [pod(r, 0)], CONFIG, NOW)
    assert (delete.why, delete.event.message, delete.event.why) == (
        "Redis deleted",
        "Deleted pod r-0: Redis deleted",
        "Redis deleted",
    )
    (release,) = plan_redis(r, [], CONFIG, NOW)
    assert release == PatchFinalizers(r.key, "10", ("a/b",), "all pods gone")


def test_rollout_delete_in_full():
    r = redis(port=6380)
    pods = [pod(r, i, hash_=current_hash(6379)) for i in range(3)]
    (delete,) = [a for a in removed(plan_redis(r, pods, CONFIG, NOW))]
    assert (delete.name, delete.uid, delete.why) == ("r-0", pods[0].uid, "spec changed")
    assert delete.event.message == "Evicted pod r-0: spec changed"


def test_invalid_spec_message_in_full():
    r = redis(spec={"port": 1, "num": "x"})
    patch = status_of(plan_redis(r, [], CONFIG, NOW))
    message = (
        "invalid spec: spec.port: must be between 6370 and 6380, got 1; "
        "spec.num: must be an integer, got 'x'"
    )
    assert {c["type"]: c["message"] for c in patch.status["conditions"]} == {
        "Ready": message,
        "Progressing": message,
        "Degraded": message,
    }
    (event,) = patch.events
    assert (event.type, event.reason, event.message, event.component) == (
        "Warning",
        "InvalidSpec",
        message,
        "redis-controller",
    )
    assert (event.involved.api_version, event.involved.namespace, event.involved.name) == (
        "myapp.demo.kubebuilder.io/v1",
        "default",
        "r",
    )


def test_a_recorded_degraded_condition_is_not_announced_again_when_other_fields_change():
    r = redis(num=2)
    pods = [pod(r, 0), pod(r, 1, owner_uid="x")]
    settled = converged(r, pods)
    # r-0 becomes unready: the status changes, the conflict does not.
    patch = status_of(plan_redis(settled, [pod(r, 0, ready=False), pods[1]], CONFIG, NOW))
    assert patch.status["readyReplicas"] == 0
    assert patch.events == ()
    # The same conflict recorded with another reason or status is announced.
    for field, value in (("reason", "Other"), ("status", "False"), ("message", "old")):
        stored = [
            {**c, field: value} if c["type"] == "Degraded" else c
            for c in settled.status["conditions"]
        ]
        changed = dataclasses.replace(settled, status={**settled.status, "conditions": stored})
        (event,) = status_of(plan_redis(changed, pods, CONFIG, NOW)).events
        assert event.reason == "PodConflict", field


def test_a_finished_rollout_moves_on_to_the_next_step():
    rolling = {
        "replicas": 2,
        "conditions": [{"type": "Progressing", "status": "True", "reason": "RollingUpdate"}],
    }
    r = redis(num=2, status=rolling)
    st = status_of(plan_redis(r, [pod(r, 0), pod(r, 1)], CONFIG, NOW)).status
    assert conds(st)["Progressing"] == ("False", "Complete")


def test_malformed_stored_conditions_are_ignored():
    junk = {"conditions": ["junk", {"no": "type"}, {"type": 3}, None]}
    r = redis(status=junk)
    pods = [pod(r, i) for i in range(3)]
    st = status_of(plan_redis(r, pods, CONFIG, NOW)).status
    assert [c["type"] for c in st["conditions"]] == ["Ready", "Progressing", "Degraded"]


def test_times_are_written_in_utc_whatever_the_local_zone(monkeypatch):
    import time
    from datetime import timezone

    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        local = NOW.astimezone(timezone(timedelta(hours=2)))
        assert rfc3339(local) == "2026-11-22T12:00:00Z"
    finally:
        monkeypatch.undo()
        time.tzset()


def test_a_stale_pod_beyond_the_desired_count_is_scaled_down_not_rolled():
    r = redis(num=2, status={"replicas": 3})
    pods = [pod(r, 0), pod(r, 1), pod(r, 2, port=6380)]
    actions = plan_redis(r, pods, CONFIG, NOW)
    deletes = [(a.name, a.why) for a in actions if isinstance(a, DeletePod | EvictPod)]
    assert deletes == [("r-2", "scale down")]
    st = status_of(actions).status
    assert conds(st)["Progressing"] == ("True", "ScalingDown")
    assert (st["replicas"], st["updatedReplicas"]) == (2, 2)


def test_a_name_too_long_for_a_label_value_is_an_invalid_spec():
    r = redis(name="r" * 64, num=1)
    actions = plan_redis(r, [], CONFIG, NOW)
    assert not [a for a in actions if isinstance(a, CreatePod | DeletePod)]
    degraded = cond(status_of(actions).status, "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "InvalidSpec")
    assert degraded["message"] == (
        "invalid spec: metadata.name: must be at most 63 characters, got 64: "
        "it is the app.kubernetes.io/instance label value of each pod"
    )
    # 63 is fine.
    ok = plan_redis(redis(name="r" * 63, num=1), [], CONFIG, NOW)
    assert [a.target.name for a in ok if isinstance(a, CreatePod)] == ["r" * 63 + "-0"]


def test_in_a_namespace_being_deleted_nothing_is_created_but_pods_still_go():
    from reconciler.snapshot import Snapshot

    r = redis(num=2, finalizers=())
    base = snap((r,), (), (pod(r, 0), pod(r, 5)))
    closing = Snapshot(base.objects, base.pods, frozenset({"default"}))
    actions = plan_pass(closing, CONFIG, NOW).actions
    assert [(a.verb, a.target.name) for a in actions if a.verb != "patch-status"] == [
        ("evict", "r-5")
    ]
    # Elsewhere the same Redis gets its finalizer and its missing pod.
    other = Snapshot(base.objects, base.pods, frozenset({"other"}))
    verbs = [a.verb for a in plan_pass(other, CONFIG, NOW).actions]
    assert verbs[:3] == ["patch-finalizers", "evict", "create"]


def test_creates_of_one_redis_share_their_template():
    """A first pass over 10,000 Redis holds 30,000 creates: their manifests
    share everything but their metadata and hostname (`pod_template`)."""
    creates = [a for a in plan_redis(redis(num=3), [], CONFIG, NOW) if isinstance(a, CreatePod)]
    first, *others = [c.manifest for c in creates]
    assert [m["metadata"]["name"] for m in (first, *others)] == ["r-0", "r-1", "r-2"]
    assert [m["spec"]["hostname"] for m in (first, *others)] == ["r-0", "r-1", "r-2"]
    for other in others:
        assert other["spec"]["containers"] is first["spec"]["containers"]
        assert other["spec"]["affinity"] is first["spec"]["affinity"]
        assert other["metadata"]["labels"] is first["metadata"]["labels"]
        assert other["metadata"]["ownerReferences"] is first["metadata"]["ownerReferences"]
    assert creates[1].event.involved is creates[0].event.involved


# ------------------------------------------------------------ real clusters


def ended(p, phase="Failed", reason="Evicted", message="The node was low on resource: memory."):
    """A pod as the kubelet leaves it after an eviction: its containers stopped."""
    state = ContainerState("redis", False, "ContainerStatusUnknown", "")
    conditions = (PodCondition("Ready", "False", "PodFailed"),)
    return dataclasses.replace(
        p,
        phase=phase,
        reason=reason,
        message=message,
        conditions=conditions,
        container_states=(state,),
        resource_version="6",
    )


def test_an_evicted_pod_is_deleted_with_its_own_reason_and_counts_for_nothing():
    r = redis(num=2)
    pods = [pod(r, 0), ended(pod(r, 1))]
    actions = plan_redis(converged(r, [pod(r, 0), pod(r, 1)]), pods, CONFIG, NOW)
    (delete,) = [a for a in actions if isinstance(a, DeletePod | EvictPod)]
    assert delete.name == "r-1" and delete.uid == pods[1].uid
    assert delete.event is not None
    assert delete.event.message == (
        "Deleted pod r-1: Evicted: The node was low on resource: memory."
    )
    st = status_of(actions).status
    assert (st["replicas"], st["readyReplicas"], st["updatedReplicas"]) == (1, 1, 1)
    assert conds(st)["Progressing"] == ("True", "ReplacingEndedPods")
    assert st["message"] == "replacing ended pods: r-1"
    # Once it is gone, its name is created anew.
    creates = [a for a in plan_redis(r, [pod(r, 0)], CONFIG, NOW) if isinstance(a, CreatePod)]
    assert [c.target.name for c in creates] == ["r-1"]


def test_a_pod_that_ended_on_its_own_names_its_container():
    p = ended(pod(redis(), 0), phase="Succeeded", reason="", message="")
    p = dataclasses.replace(p, container_states=(ContainerState("redis", False, "Completed", ""),))
    assert why_ended(p) == "Succeeded (Completed)"


def test_an_ended_pod_does_not_block_the_rollout_of_the_others():
    """The ended pod is replaced first; its replacement is made for the new
    spec, and once it is Ready the stale pods roll one at a time."""
    r = redis(num=3, image="redis:6")
    old = dict(image="redis:5-alpine")
    pods = [pod(r, 0, **old), ended(pod(r, 1, **old)), pod(r, 2, **old)]
    actions = plan_redis(r, pods, CONFIG, NOW)
    assert [a.name for a in actions if isinstance(a, DeletePod | EvictPod)] == ["r-1"]
    pods = [pod(r, 0, **old), pod(r, 1, image="redis:6"), pod(r, 2, **old)]
    deletes = [a.name for a in removed(plan_redis(r, pods, CONFIG, NOW))]
    assert deletes == ["r-0"]


def test_a_terminating_pod_is_neither_ready_nor_updated_nor_replaced_in_a_rollout():
    r = redis(num=2, image="redis:6")
    pods = [pod(r, 0, terminating=True, image="redis:6"), pod(r, 1)]
    st = status_of(plan_redis(r, pods, CONFIG, NOW)).status
    assert (st["replicas"], st["readyReplicas"], st["updatedReplicas"]) == (1, 1, 0)
    # r-1 is stale, but r-0 is going: replacing r-1 now would leave no pod.
    assert not [a for a in removed(plan_redis(r, pods, CONFIG, NOW))]


def test_a_pod_stuck_terminating_is_named_with_what_holds_it():
    r = redis(num=2)
    stuck = dataclasses.replace(pod(r, 0, terminating=True), finalizers=("example.com/hold",))
    pods = [stuck, pod(r, 1)]
    # Within its grace period and the margin: nothing named yet.
    st = status_of(plan_redis(r, pods, CONFIG, NOW)).status
    assert st["message"] == "1/2 pods exist"
    later = NOW + timedelta(minutes=3)
    st = status_of(plan_redis(r, pods, CONFIG, later)).status
    message = "1/2 pods exist; r-0 terminating for 3m: held by finalizer example.com/hold"
    assert st["message"] == message
    assert cond(st, "Progressing")["message"] == message


def image_pull_backoff(p, image="redis:does-not-exist"):
    waiting = ContainerState("redis", True, "ImagePullBackOff", f'Back-off pulling image "{image}"')
    return dataclasses.replace(p, phase="Pending", container_states=(waiting,))


def test_a_rollout_that_cannot_finish_names_its_pods_and_why():
    r = redis(num=2)
    unschedulable = dataclasses.replace(
        pod(r, 1, ready=False),
        conditions=(
            PodCondition(
                "PodScheduled",
                "False",
                "Unschedulable",
                "0/2 nodes are available: 2 Insufficient cpu.",
            ),
        ),
    )
    pods = [image_pull_backoff(pod(r, 0, ready=False)), unschedulable]
    st = status_of(plan_redis(r, pods, CONFIG, NOW)).status
    assert st["message"] == (
        "waiting for 2 of 2 pods to be Ready; "
        'r-0 not Ready: ImagePullBackOff: Back-off pulling image "redis:does-not-exist"; '
        "r-1 not Ready: Unschedulable: 0/2 nodes are available: 2 Insufficient cpu."
    )
    # A pod merely starting is not named.
    starting = ContainerState("redis", True, "ContainerCreating", "")
    pods = [dataclasses.replace(pod(r, 0, ready=False), container_states=(starting,)), pod(r, 1)]
    st = status_of(plan_redis(r, pods, CONFIG, NOW)).status
    assert st["message"] == "waiting for 1 of 2 pods to be Ready"


def stored(r, pods, now):
    """The Redis as a pass at ``now`` left it."""
    return dataclasses.replace(r, status=status_of(plan_redis(r, pods, CONFIG, now)).status)


def test_progress_deadline_flags_a_rollout_with_no_progress_and_only_then():
    r = redis(num=2)
    pods = [pod(r, 0), image_pull_backoff(pod(r, 1, ready=False))]
    seen = stored(r, pods, NOW)
    assert seen.status["lastProgressTime"] == rfc3339(NOW)
    deadline = timedelta(seconds=redis_settings(CONFIG).progress_deadline)
    # Nothing moves: no write until the deadline passes.
    assert plan_redis(seen, pods, CONFIG, NOW + deadline) == []
    actions = plan_redis(seen, pods, CONFIG, NOW + deadline + timedelta(seconds=1))
    patch = status_of(actions)
    st = patch.status
    assert conds(st)["Progressing"] == ("False", "ProgressDeadlineExceeded")
    assert conds(st)["Degraded"] == ("True", "ProgressDeadlineExceeded")
    assert st["state"] == "ProgressDeadlineExceeded"
    assert st["message"].startswith("no progress for 10m: waiting for 1 of 2 pods to be Ready; r-1")
    assert st["lastProgressTime"] == rfc3339(NOW)
    assert [(e.type, e.reason) for e in patch.events] == [("Warning", "ProgressDeadlineExceeded")]
    # It stays flagged, with no further write, until a pod moves.
    stuck = dataclasses.replace(seen, status={**seen.status, **st})
    assert plan_redis(stuck, pods, CONFIG, NOW + 2 * deadline) == []
    later = NOW + 3 * deadline
    st = status_of(plan_redis(stuck, [pod(r, 0), pod(r, 1)], CONFIG, later)).status
    assert conds(st)["Progressing"] == ("False", "Complete")
    assert st["state"] == "Ready" and st["lastProgressTime"] == rfc3339(later)


def test_a_new_generation_restarts_the_deadline():
    r = redis(num=2)
    pods = [pod(r, 0), image_pull_backoff(pod(r, 1, ready=False))]
    seen = stored(r, pods, NOW)
    later = NOW + timedelta(hours=1)
    st = status_of(plan_redis(dataclasses.replace(seen, generation=2), pods, CONFIG, later)).status
    assert conds(st)["Progressing"] == ("True", "WaitingForReady")
    assert st["lastProgressTime"] == rfc3339(later)
