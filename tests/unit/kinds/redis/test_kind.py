"""The Redis planner as a whole (kinds/redis/kind.py): the finalizer, creation,
an invalid spec, deletion, a pass whose pods could not be listed, failures
and backoff, and its actions in full."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from reconciler.actions import (
    CreatePod,
    DeletePod,
    EvictPod,
    PatchFinalizers,
    PatchStatus,
)
from reconciler.backoff import Failure, WriteError
from reconciler.constants import LABEL_INSTANCE, LABEL_MANAGED_BY, LABEL_NAME
from reconciler.engine.plan import plan_pass
from reconciler.kinds.redis import kind as redis_kind
from reconciler.kinds.redis.identity import (
    FINALIZER,
    TEMPLATE_HASH_ANNOTATION,
)
from reconciler.kinds.redis.kind import PODS_UNKNOWN
from reconciler.kinds.redis.settings import RedisSettings
from reconciler.model import rfc3339
from tests.unit.builders import CONFIG, NOW, current_hash, plan_redis, pod, redis, removed, snap
from tests.unit.kinds.redis.helpers import (
    cond,
    conds,
    converged,
    held,
    kinds,
    status_of,
)


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
    not_ready = (cond(patch.status, "Ready"), cond(patch.status, "Progressing"))
    assert [(c["status"], c["reason"]) for c in not_ready] == [("False", "InvalidSpec")] * 2
    assert patch.events[0].type == "Warning" and field in patch.events[0].message
    assert plan_redis(dataclasses.replace(r, status=patch.status), pods, CONFIG, NOW) == []


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
    assert conditions["Degraded"]["observedGeneration"] == r.generation
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
    # Until sent, a create holds its name and the one template, no manifest.
    assert len({id(c.template) for c in creates}) == 1


def test_the_children_looked_up_by_name_include_the_budget_from_two_pods():
    """A budget is made from two pods up (disruption.MIN_PODS): only then is
    one looked up by name when the labelled LIST does not show it."""
    budget = ("PodDisruptionBudget", "r")
    assert budget in redis_kind.child_names(redis(num=2))
    assert budget not in redis_kind.child_names(redis(num=1))
    assert redis_kind.child_names(redis(num=1)) == (("Service", "r"),)


@pytest.mark.parametrize(
    ("spec", "settings", "state"),
    [
        ({"port": 6399, "num": 2}, (), "InvalidSpec"),
        ({"port": 6379, "num": 2, "image": "evil/x:1"}, ("redis",), "ImageNotAllowed"),
    ],
)
def test_a_failed_guard_of_a_redis_not_run_is_counted_in_its_status(spec, settings, state):
    """Its finalizer patch refused: the status written after it counts the
    failure (the backoff the next passes wait by) and still says why no pod runs."""
    r = redis(spec=spec, finalizers=())
    config = dataclasses.replace(CONFIG, kind_settings=(RedisSettings(allowed_images=settings),))
    rule = plan_pass(snap((r,), (), ()), config, NOW).owners[r.key].status_after
    assert rule is not None
    (after,) = rule(WriteError("403 Forbidden: no patch", "Forbidden"), [])
    assert isinstance(after, PatchStatus)
    assert after.status["state"] == state
    assert (after.status["backoff"]["failures"], after.status["backoff"]["reason"]) == (
        1,
        "Forbidden",
    )
