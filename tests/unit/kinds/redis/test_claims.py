"""A Redis's claims, pass by pass: made before their pods, kept or deleted as
the retention policy says, grown when the class allows it, and said in the
status while they are not bound or still growing."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from reconciler.actions import CreateChild, CreatePod, DeleteChild, PatchChild
from reconciler.backoff import gate
from reconciler.children import storage_class_from_api
from reconciler.constants import LABEL_INSTANCE
from reconciler.kinds.base import PlanInput
from reconciler.kinds.redis import storage
from reconciler.kinds.redis.claims import CREATED, NOT_EXPANDABLE
from reconciler.kinds.redis.identity import (
    COMPONENT,
    FIELDS_HASH_ANNOTATION,
    TEMPLATE_HASH_ANNOTATION,
    owner_of,
    ref,
)
from reconciler.kinds.redis.pods import pod_manifest, spec_drift
from reconciler.kinds.redis.spec import validate
from reconciler.model import Child, OwnerRef, PodIndex
from tests.unit.builders import CONFIG, NOW, pod, redis, redis_writes
from tests.unit.kinds.redis.helpers import cond, status_of

LISTED = frozenset({storage.KIND, "StorageClass"})


def with_storage(num: int = 3, size: str = "1Gi", **policy: str) -> Any:
    body: dict[str, Any] = {"size": size}
    if policy:
        body[storage.POLICY_FIELD] = policy
    return redis(spec={"port": 6379, "num": num, "storage": body})


def claim(r, index: int, *, size="1Gi", capacity="1Gi", phase="Bound", **changes) -> Child:
    """The claim a pass made for pod ``index`` of ``r``, as a provisioner
    and the binder leave it."""
    spec = validate(r, "redis:5-alpine").spec
    made = storage.claim_manifest(owner_of(r), spec.storage, f"data-{r.name}-{index}")
    made["spec"] = {**made["spec"], "storageClassName": "standard"}
    made["spec"]["resources"] = {"requests": {"storage": size}}
    made["status"] = {"phase": phase} | ({"capacity": {"storage": capacity}} if capacity else {})
    found = storage.CHILD.decode(made)
    return dataclasses.replace(found, uid=f"pvc-{index}", resource_version="7", **changes)


def standard(expands: bool = True) -> Child:
    return storage_class_from_api(
        {"metadata": {"name": "standard", "uid": "sc"}, "allowVolumeExpansion": expands}
    )


def plan(r, pods=(), claims=(), classes=None, listed=LISTED):
    classes = (standard(),) if classes is None else classes
    index = PodIndex(pods, (*claims, *classes), LABEL_INSTANCE)
    inp = PlanInput(index, CONFIG, NOW, gate(None, CONFIG.backoff, NOW), children=listed)
    return redis_writes(r, inp)


def stored(r, i, **kw):
    """Pod ``i`` as made from this spec (its hashes), Ready."""
    spec = validate(r, "redis:5-alpine").spec
    made = pod_manifest(r, spec, i)["metadata"]["annotations"]
    return dataclasses.replace(pod(r, i, ready=True, **kw), annotations=made)


def of(kind, actions):
    return [a for a in actions if isinstance(a, kind)]


def test_a_new_redis_makes_each_claim_before_its_pod_and_each_pod_mounts_its_own():
    r = with_storage()
    actions = plan(r)
    creates = [a for a in actions if isinstance(a, CreateChild | CreatePod)]
    assert [a.target.name for a in creates][:6] == [
        *(f"data-r-{i}" for i in range(3)),
        *(f"r-{i}" for i in range(3)),
    ]
    claim_made = creates[0].manifest
    assert claim_made["spec"]["resources"] == {"requests": {"storage": "1Gi"}}
    assert "ownerReferences" not in claim_made["metadata"]  # Retain: owned by none
    assert claim_made["metadata"]["labels"][LABEL_INSTANCE] == "r"
    made = creates[4].manifest
    assert made["spec"]["volumes"] == [
        {"name": "data", "persistentVolumeClaim": {"claimName": "data-r-1"}}
    ]
    assert made["spec"]["containers"][0]["volumeMounts"] == [{"name": "data", "mountPath": "/data"}]


def test_whendeleted_delete_makes_claims_owned_by_the_redis():
    actions = plan(with_storage(whenDeleted="Delete"))
    (ref,) = of(CreateChild, actions)[0].manifest["metadata"]["ownerReferences"]
    assert ref["uid"] == "uid-default-r" and ref["controller"] is True


def test_a_converged_redis_with_storage_plans_nothing():
    r = with_storage()
    pods = [stored(r, i) for i in range(3)]
    claims = [claim(r, i) for i in range(3)]
    first = plan(r, pods, claims)
    assert not [a for a in first if type(a).__name__ != "PatchStatus"]
    r = dataclasses.replace(r, status=status_of(first).status)
    assert plan(r, pods, claims) == []


def test_a_replaced_pod_mounts_the_claim_of_its_index_and_no_claim_is_made():
    r = with_storage()
    pods = [stored(r, i) for i in (0, 2)]
    claims = [claim(r, i) for i in range(3)]
    actions = plan(r, pods, claims)
    assert not of(CreateChild, actions)
    (create,) = of(CreatePod, actions)
    assert create.manifest["spec"]["volumes"][0]["persistentVolumeClaim"] == {
        "claimName": "data-r-1"
    }


@pytest.mark.parametrize(
    ("policy", "pods_left", "deleted"),
    [
        ("Delete", (0,), ["data-r-1", "data-r-2"]),
        ("Delete", (0, 2), ["data-r-1"]),  # r-2 still there: its claim waits
        ("Retain", (0,), []),
    ],
)
def test_scaled_down_claims_go_only_under_whenscaled_delete_once_their_pod_is_gone(
    policy, pods_left, deleted
):
    r = with_storage(num=1, whenScaled=policy)
    pods = [stored(r, i) for i in pods_left]
    claims = [claim(r, i) for i in range(3)]
    actions = plan(r, pods, claims)
    gone = of(DeleteChild, actions)
    assert [d.target.name for d in gone] == deleted
    assert all(d.uid == f"pvc-{d.target.name[-1]}" for d in gone)


def test_the_claim_of_an_index_below_num_is_never_deleted():
    r = with_storage(num=3, whenScaled="Delete")
    actions = plan(r, [], [claim(r, i) for i in range(3)])
    assert not of(DeleteChild, actions)


def test_claims_not_ours_are_mounted_and_never_written():
    r = with_storage(num=1, size="2Gi", whenScaled="Delete", whenDeleted="Delete")
    theirs = claim(r, 0, labels={}, owner_refs=())
    extra = claim(r, 1, labels={LABEL_INSTANCE: "r"})
    actions = plan(r, [], [theirs, extra])
    assert not of(PatchChild, actions) and not of(DeleteChild, actions)
    (create,) = of(CreatePod, actions)
    assert create.manifest["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == "data-r-0"


@pytest.mark.parametrize("policy", ["Retain", "Delete"])
def test_a_changed_whendeleted_moves_our_owner_reference_and_keeps_others(policy):
    r = with_storage(num=1, whenDeleted=policy)
    theirs = OwnerRef("backup.io/v1", "Backup", "b", "uid-b")
    ours = OwnerRef("myapp.demo.kubebuilder.io/v1", "Redis", "r", "uid-default-r", True, True)
    before = (theirs,) if policy == "Delete" else (theirs, ours)
    found = claim(r, 0, owner_refs=before)
    (patch,) = of(PatchChild, plan(r, [stored(r, 0)], [found]))
    refs = patch.body["metadata"]["ownerReferences"]
    assert [x["uid"] for x in refs] == (
        ["uid-b", "uid-default-r"] if policy == "Delete" else ["uid-b"]
    )
    assert patch.resource_version == "7"


def test_a_larger_size_grows_each_claim_when_its_class_allows():
    r = with_storage(num=2, size="2Gi")
    claims = [claim(r, i) for i in range(2)]
    patches = of(PatchChild, plan(r, [stored(r, i) for i in range(2)], claims))
    assert [p.body for p in patches] == [
        {"spec": {"resources": {"requests": {"storage": "2Gi"}}}}
    ] * 2


def test_a_class_that_does_not_expand_is_said_once_in_degraded_and_nothing_is_patched():
    r = with_storage(num=1, size="2Gi")
    actions = plan(r, [stored(r, 0)], [claim(r, 0)], classes=(standard(expands=False),))
    assert not of(PatchChild, actions)
    degraded = cond(status_of(actions).status, "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", NOT_EXPANDABLE)
    assert "standard does not allow volume expansion" in degraded["message"]
    assert [e.reason for e in status_of(actions).events] == [NOT_EXPANDABLE]
    r = dataclasses.replace(r, status=status_of(actions).status)
    assert plan(r, [stored(r, 0)], [claim(r, 0)], classes=(standard(expands=False),)) == []


def test_a_class_that_does_not_expand_is_said_while_the_owner_references_are_moved():
    """The claim's write of this pass (its retention) does not hide why it
    stays at its size."""
    r = with_storage(num=1, size="2Gi", whenDeleted="Delete")
    found = claim(r, 0, owner_refs=())  # made under whenDeleted Retain
    actions = plan(r, [stored(r, 0)], [found], classes=(standard(expands=False),))
    (patch,) = of(PatchChild, actions)
    assert patch.body == {"metadata": {"ownerReferences": [dict(owner_of(r).owner_ref)]}}
    degraded = cond(status_of(actions).status, "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", NOT_EXPANDABLE)


def test_a_redis_with_storage_scaled_to_no_pods_is_not_degraded():
    r = with_storage(num=0)
    degraded = cond(status_of(plan(r)).status, "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("False", "AsExpected")


def test_without_the_classes_read_a_claim_is_not_grown():
    r = with_storage(num=1, size="2Gi")
    assert not of(PatchChild, plan(r, [stored(r, 0)], [claim(r, 0)], classes=()))


@pytest.mark.parametrize(
    ("resize_pending", "named"),
    [
        ("True", "data-r-0 (FileSystemResizePending)"),
        ("False", "data-r-0"),  # the condition there, but not true: not said
    ],
)
def test_claims_still_growing_keep_it_progressing_and_are_named(resize_pending, named):
    r = with_storage(num=2, size="2Gi")
    pending = {"conditions": [{"type": "FileSystemResizePending", "status": resize_pending}]}
    claims = [
        claim(
            r,
            0,
            size="2Gi",
            capacity="1Gi",
            status={"phase": "Bound", "capacity": {"storage": "1Gi"}, **pending},
        ),
        claim(r, 1, size="2Gi", capacity="2Gi"),
    ]
    actions = plan(r, [stored(r, i) for i in range(2)], claims)
    progressing = cond(status_of(actions).status, "Progressing")
    assert (progressing["status"], progressing["reason"]) == ("True", "ResizingClaims")
    assert progressing["message"] == f"claims growing to 2Gi: {named}"
    assert not of(PatchChild, actions)


def test_claims_not_bound_are_named_in_the_status():
    r = with_storage(num=2)
    claims = [claim(r, i, phase="Pending", capacity=None) for i in range(2)]
    actions = plan(r, [], claims)
    assert (
        "claims not bound to a volume yet (Pending): data-r-0, data-r-1"
        in (status_of(actions).status["message"])
    )


def test_no_pod_is_made_on_a_claim_being_deleted():
    r = with_storage(num=1)
    going = claim(r, 0, deletion_timestamp="2026-11-22T11:59:00Z")
    actions = plan(r, [], [going])
    assert not of(CreatePod, actions) and not of(CreateChild, actions)
    assert "claim data-r-0 is being deleted" in status_of(actions).status["message"]


def test_claims_are_not_written_while_their_list_failed_or_paused():
    r = with_storage(num=1)
    assert not of(CreateChild, plan(r, listed=frozenset()))
    paused = dataclasses.replace(r, spec={**r.spec, "paused": True})
    assert not of(CreateChild, plan(paused))


def test_adding_storage_makes_the_pods_stale_and_growth_does_not():
    plain = redis(num=1)
    r = with_storage(num=1)
    made_plain = stored(plain, 0)
    assert spec_drift(made_plain, validate(r, "redis:5-alpine").spec) == "spec changed"
    bigger = with_storage(num=1, size="5Gi")
    assert spec_drift(stored(r, 0), validate(bigger, "redis:5-alpine").spec) is None


def test_a_redis_without_storage_makes_the_pods_it_made_before_storage_existed():
    """The hashes a pod records, as the release before spec.storage made them:
    an upgrade rolls no pod of a Redis that uses none of it."""
    plain = redis(num=3)
    made = pod_manifest(plain, validate(plain, "redis:5-alpine").spec, 0)
    assert made["metadata"]["annotations"][FIELDS_HASH_ANNOTATION] == "b4866b9b1f"
    assert made["metadata"]["annotations"][TEMPLATE_HASH_ANNOTATION] == "f89818275d"
    assert "volumes" not in made["spec"]
    assert "terminationGracePeriodSeconds" not in made["spec"]


def test_a_grace_period_reaches_the_pods_and_its_default_changes_nothing():
    r = redis(spec={"port": 6379, "num": 1, "terminationGracePeriodSeconds": 120})
    made = pod_manifest(r, validate(r, "redis:5-alpine").spec, 0)
    assert made["spec"]["terminationGracePeriodSeconds"] == 120
    default = redis(spec={"port": 6379, "num": 1, "terminationGracePeriodSeconds": 30})
    said = pod_manifest(default, validate(default, "redis:5-alpine").spec, 0)
    assert said["metadata"]["annotations"][FIELDS_HASH_ANNOTATION] == "b4866b9b1f"


def test_a_claim_of_a_class_that_does_not_exist_is_named_with_why():
    r = with_storage(num=2)
    lost = claim(r, 0, phase="Pending", capacity=None)
    lost = dataclasses.replace(lost, spec={**lost.spec, "storageClassName": "gone"})
    waiting = claim(r, 1, phase="Pending", capacity=None)
    message = status_of(plan(r, [], [lost, waiting])).status["message"]
    assert "claim data-r-0 is Pending: storage class gone does not exist" in message
    assert "claims not bound to a volume yet (Pending): data-r-1" in message
    unlisted = plan(r, [], [lost], listed=frozenset({storage.KIND}))
    assert "does not exist" not in status_of(unlisted).status["message"]


def test_a_claim_without_a_class_in_a_cluster_without_a_default_is_named():
    r = with_storage(num=1)
    bare = claim(r, 0, phase="Pending", capacity=None)
    bare = dataclasses.replace(bare, spec={"resources": bare.spec["resources"]})
    message = status_of(plan(r, [], [bare], classes=())).status["message"]
    assert "no storage class and the cluster has no default one" in message


EARLIER = OwnerRef("myapp.demo.kubebuilder.io/v1", "Redis", "r", "uid-earlier", True, True)
THIS = dataclasses.replace(EARLIER, uid="uid-default-r")
OTHER_NAME = dataclasses.replace(EARLIER, name="s", uid="uid-s")
BACKUP = OwnerRef("backup.io/v1", "Backup", "b", "uid-b", True)
KEPT_BY = dataclasses.replace(BACKUP, controller=False)


@pytest.mark.parametrize(
    ("refs", "labelled", "policy", "mounted", "written"),
    [
        # An earlier Redis of this name owns it: the garbage collector's, so
        # neither mounted nor adopted, labelled or not, under either policy.
        ((EARLIER,), True, "Delete", False, None),
        ((EARLIER,), True, "Retain", False, None),
        ((EARLIER,), False, "Retain", False, None),
        ((KEPT_BY, EARLIER), True, "Delete", False, None),
        # Kept by an earlier Redis under Retain (no owner): ours, mounted,
        # and owned as this Redis's policy says.
        ((), True, "Retain", True, None),
        ((), True, "Delete", True, ["uid-default-r"]),
        # This Redis's own, another's (another controller), a Redis of another name's.
        ((THIS,), True, "Delete", True, None),
        ((BACKUP,), True, "Delete", True, None),
        ((OTHER_NAME,), True, "Delete", True, None),
    ],
)
def test_a_claim_of_an_earlier_redis_of_the_same_name_is_waited_for(
    refs, labelled, policy, mounted, written
):
    r = with_storage(num=1, whenDeleted=policy)
    found = claim(r, 0, owner_refs=refs, **({} if labelled else {"labels": {}}))
    controller = next((x.uid for x in refs if x.controller), None)
    found = dataclasses.replace(found, controller_uid=controller)
    actions = plan(r, [], [found])
    assert not of(CreateChild, actions) and not of(DeleteChild, actions)
    assert [p.target.name for p in of(CreatePod, actions)] == (["r-0"] if mounted else [])
    patches = of(PatchChild, actions)
    if written is None:
        assert patches == []
    else:
        (patch,) = patches
        assert [x["uid"] for x in patch.body["metadata"]["ownerReferences"]] == written
    progressing = cond(status_of(actions).status, "Progressing")
    said = "claim data-r-0 belongs to an earlier Redis of this name (uid uid-earlier)"
    assert (said in progressing["message"]) == (not mounted)
    if not mounted:
        assert "pod r-0 waits for it to go" in progressing["message"]
        assert "remove that ownerReference" in progressing["message"]


def test_a_claim_without_a_class_where_there_is_no_default_is_named_with_why():
    r = with_storage(num=1)
    bare = claim(r, 0, phase="Pending", capacity=None)
    bare = dataclasses.replace(bare, spec={"resources": bare.spec["resources"]})
    message = status_of(plan(r, [], [bare], classes=())).status["message"]
    assert message == (
        "waiting for 1 of 1 pods to be Ready; claim data-r-0 is Pending: "
        "it names no storage class and the cluster has no default one"
    )


def test_a_claim_grown_this_pass_is_named_as_growing_in_the_same_status():
    """The patch that asks for the new size is written with a status that
    already says the claim grows: no pass in between claims it is done."""
    r = with_storage(num=1, size="2Gi")
    actions = plan(r, [stored(r, 0)], [claim(r, 0)])
    (patch,) = of(PatchChild, actions)
    assert patch.body == {"spec": {"resources": {"requests": {"storage": "2Gi"}}}}
    progressing = cond(status_of(actions).status, "Progressing")
    assert (progressing["status"], progressing["reason"]) == ("True", "ResizingClaims")
    assert progressing["message"] == "claims growing to 2Gi: data-r-0"


def test_a_claim_is_made_read_write_once_and_said_in_a_normal_event():
    """One pod mounts it (a StatefulSet's volumeClaimTemplates alike); the
    event is the Redis's, from its controller, and names the pod."""
    r = with_storage(num=1)
    (create,) = of(CreateChild, plan(r))
    assert create.manifest["spec"] == {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}},
    }
    event = create.event
    assert (event.involved, event.type, event.reason) == (ref(r), "Normal", CREATED)
    assert (event.component, event.message) == (
        COMPONENT,
        "Created claim data-r-0: the data of pod r-0",
    )


def test_a_claim_of_ours_not_named_for_an_index_is_never_deleted_when_scaled():
    """Only data-<redis>-<index> is a pod's claim: another claim our labels
    and the Redis's owner reference (say, a backup's) is no index scaled away,
    even one whose name is as long and ends in a number."""
    r = with_storage(num=1, whenScaled="Delete")
    other = dataclasses.replace(claim(r, 2), name="logs-r-2", uid="pvc-logs")
    actions = plan(r, [stored(r, 0)], [claim(r, 0), other])
    assert not of(DeleteChild, actions)


def test_a_claim_not_ours_beyond_num_is_skipped_and_ours_after_it_still_go():
    """Another's claim of a scaled-away index is never written, and does
    not keep ours of a higher index from being deleted."""
    r = with_storage(num=1, whenScaled="Delete")
    theirs = claim(r, 1, labels={LABEL_INSTANCE: "r"})  # no managed-by label
    claims = [claim(r, 0), theirs, claim(r, 2)]
    actions = plan(r, [stored(r, 0)], claims)
    (delete,) = of(DeleteChild, actions)
    assert (delete.owner, delete.target.name, delete.uid) == (r.key, "data-r-2", "pvc-2")
    assert delete.why == "scaled down below index 2 (whenScaled Delete)"
    assert not of(PatchChild, actions)
