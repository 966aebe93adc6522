"""Decoding at the edge: what each field becomes, and what a malformed object
falls back to. The decoded values are frozen: the planner cannot change what
it observed."""

from __future__ import annotations

import dataclasses

import pytest

from reconciler.actions import CreatePod, DeletePod, EventSpec, ObjRef, PatchStatus, Plan
from reconciler.backoff import Failure
from reconciler.client.pod_dict import pod_from_api
from reconciler.constants import LABEL_INSTANCE
from reconciler.kinds import xca as xca_kind
from reconciler.kinds.redis import identity as redis_kind
from reconciler.model import (
    PODS,
    Child,
    Condition,
    ObjKey,
    OwnerRef,
    PodCondition,
    PodIndex,
    PodRead,
    RecordingLookup,
    ResourceType,
    controller_of,
    generation_of,
    meta_of,
    owner_refs_of,
    versions_of,
)

from .builders import pod, redis, snap, xca

POD = {
    "metadata": {
        "name": "r-0",
        "namespace": "ns",
        "uid": "u-1",
        "resourceVersion": "42",
        "labels": {"app": "redis", "n": 1},
        "annotations": {"a/b": "c"},
        "deletionTimestamp": "2026-11-22T12:00:00Z",
        "ownerReferences": [
            "not a mapping",
            {"kind": "ReplicaSet", "uid": "rs", "controller": False},
            {"kind": "Other", "uid": "o", "controller": "true"},
            {"kind": "Redis", "uid": "owner", "controller": True},
        ],
    },
    "status": {
        "phase": "Running",
        "conditions": [
            {"type": "Ready", "status": "True"},
            {"type": "PodScheduled", "status": "True", "reason": None},
            {"type": "ContainersReady", "reason": "Waiting"},
            {"status": "True"},
            "junk",
        ],
    },
}


def test_pod_fields():
    p = pod_from_api(POD)
    assert (p.namespace, p.name, p.uid, p.resource_version) == ("ns", "r-0", "u-1", "42")
    assert p.labels == {"app": "redis", "n": "1"}
    assert p.annotations == {"a/b": "c"}
    assert (p.controller_uid, p.controller_kind) == ("owner", "Redis")
    assert p.deletion_timestamp == "2026-11-22T12:00:00Z" and p.terminating
    assert p.phase == "Running"
    assert p.conditions == (
        PodCondition("Ready", "True", ""),
        PodCondition("PodScheduled", "True", ""),
        PodCondition("ContainersReady", "Unknown", "Waiting"),
    )
    assert p.ready
    assert p.key == ObjKey("Pod", "ns", "r-0")


def test_a_bare_pod_decodes_to_safe_defaults():
    p = pod_from_api({})
    assert (p.namespace, p.name, p.uid, p.resource_version) == ("", "", "", "")
    assert p.phase == "Unknown"
    assert (p.labels, p.annotations, p.conditions) == ({}, {}, ())
    assert (p.controller_uid, p.controller_kind, p.deletion_timestamp) == (None, None, None)
    assert not p.terminating and not p.ready
    assert pod_from_api({"metadata": "junk", "status": "junk"}).phase == "Unknown"
    assert pod_from_api({"status": {"phase": None}}).phase == "Unknown"


def test_ready_needs_a_true_ready_condition():
    ready = pod_from_api({"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    unready = pod_from_api({"status": {"conditions": [{"type": "Ready", "status": "False"}]}})
    other = pod_from_api({"status": {"conditions": [{"type": "Initialized", "status": "True"}]}})
    assert (ready.ready, unready.ready, other.ready) == (True, False, False)


def test_controller_is_the_reference_marked_controller_true():
    found = controller_of({"ownerReferences": [{"uid": "a", "kind": "K", "controller": True}]})
    assert (found.uid, found.kind) == ("a", "K")
    empty = controller_of({"ownerReferences": [{"controller": True}]})
    assert (empty.uid, empty.kind) == ("", "")
    none = controller_of({"ownerReferences": None})
    assert (none.uid, none.kind) == (None, None)
    refs = ["junk", {"uid": "x", "kind": "Other"}, {"uid": "a", "kind": "K", "controller": True}]
    later = controller_of({"ownerReferences": refs})  # not the first: the one marked
    assert (later.uid, later.kind) == ("a", "K")


def test_owner_references_as_the_api_writes_them_and_junk_skipped():
    full = {
        "apiVersion": "v1",
        "kind": "Redis",
        "name": "r",
        "uid": "u",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    loose = {"kind": "K", "controller": "true", "blockOwnerDeletion": 1}
    found = owner_refs_of({"ownerReferences": [full, "junk", loose]})
    assert found == (
        OwnerRef("v1", "Redis", "r", "u", True, True),
        OwnerRef("", "K", "", "", False, False),
    )
    assert owner_refs_of({"ownerReferences": None}) == owner_refs_of({}) == ()
    (bare,) = owner_refs_of({"ownerReferences": [{"uid": "u"}]})
    assert bare == OwnerRef("", "", "", "u", False, False)  # missing fields are empty


def test_generation_and_meta_fall_back_when_malformed():
    assert generation_of({"generation": 3}) == 3
    assert generation_of({"generation": "3"}) == 0
    assert generation_of({}) == 0
    assert meta_of({"metadata": {"name": "x"}}) == {"name": "x"}
    assert meta_of({"metadata": ["x"]}) == {}


REDIS = {
    "metadata": {
        "name": "r",
        "namespace": "ns",
        "uid": "u",
        "resourceVersion": "7",
        "generation": 2,
        "deletionTimestamp": "2026-11-22T12:00:00Z",
        "finalizers": ["a/b", 3, "c/d"],
    },
    "spec": {"num": 1},
    "status": {"replicas": 1},
}


def test_redis_fields():
    r = redis_kind.from_api(REDIS)
    assert (r.namespace, r.name, r.uid, r.resource_version) == ("ns", "r", "u", "7")
    assert (r.generation, r.deletion_timestamp) == (2, "2026-11-22T12:00:00Z")
    assert r.finalizers == ("a/b", "c/d")
    assert (r.spec, r.status) == ({"num": 1}, {"replicas": 1})
    assert r.key == ObjKey("Redis", "ns", "r")
    bare = redis_kind.from_api({"spec": "junk"})
    assert (bare.namespace, bare.name, bare.uid, bare.resource_version) == ("", "", "", "")
    assert bare.generation == 0
    assert (bare.finalizers, bare.spec, bare.status, bare.deletion_timestamp) == ((), {}, {}, None)


def test_xca_fields():
    x = xca_kind.from_api(
        {
            "metadata": {
                "name": "x",
                "namespace": "ns",
                "uid": "u",
                "resourceVersion": "9",
                "generation": 4,
                "deletionTimestamp": "2026-11-22T12:00:00Z",
            },
            "status": {"active": True},
        }
    )
    assert (x.namespace, x.name, x.uid, x.resource_version) == ("ns", "x", "u", "9")
    assert (x.generation, x.deletion_timestamp, x.status) == (
        4,
        "2026-11-22T12:00:00Z",
        {"active": True},
    )
    assert x.key == ObjKey("Xca", "ns", "x")
    bare = xca_kind.from_api({"status": ["junk"]})
    assert (bare.namespace, bare.name, bare.uid, bare.resource_version) == ("", "", "", "")
    assert bare.generation == 0
    assert (bare.status, bare.deletion_timestamp) == ({}, None)


def test_resource_paths_and_api_versions():
    assert (PODS.api_version, PODS.path_prefix) == ("v1", "/api/v1")
    crd = ResourceType("example.com", "v2", "Thing", "things")
    assert (crd.api_version, crd.path_prefix) == ("example.com/v2", "/apis/example.com/v2")
    assert redis_kind.RESOURCE.api_version == "myapp.demo.kubebuilder.io/v1"
    assert xca_kind.RESOURCE.api_version == "apps.xca.k8s.kb.cx/v1beta1"


def test_pod_index_by_owner_and_by_name():
    r = redis()
    a, b = pod(r, 0), pod(r, 1)
    loose = pod(None, 0, name="loose", owner_uid="")
    index = PodIndex([a, b, loose])
    assert index.owned_by(r.uid) == (a, b)
    assert index.owned_by("nobody") == ()
    assert index.named("default", "loose") is loose
    assert index.named("other", "r-0") is None
    assert "" not in index.by_owner


def test_condition_to_dict():
    c = Condition("Ready", "True", "R", "m", "2026-11-22T12:00:00Z", 3)
    assert c.to_dict() == {
        "type": "Ready",
        "status": "True",
        "reason": "R",
        "message": "m",
        "lastTransitionTime": "2026-11-22T12:00:00Z",
        "observedGeneration": 3,
    }
    assert "observedGeneration" not in Condition("Ready", "True").to_dict()


def test_obj_key_prints_as_namespace_slash_name():
    assert str(ObjKey("Redis", "ns", "r")) == "ns/r"


@pytest.mark.parametrize(
    "value",
    [
        pod(None, 0),
        redis(),
        xca(),
        snap(),
        Failure(1, "m"),
        ObjKey("Pod", "ns", "n"),
        Plan(),
        PatchStatus(ObjKey("Xca", "ns", "x"), "1", {}),
        DeletePod(ObjKey("Pod", "ns", "n"), "ns", "n", "u", "why"),
        CreatePod(ObjKey("Redis", "ns", "r"), "r-0", {}),
        EventSpec(ObjRef("v1", "Pod", "ns", "n", "u"), "Normal", "R", "m", "c"),
    ],
    ids=lambda v: type(v).__name__,
)
def test_observed_values_and_actions_are_immutable(value):
    field = dataclasses.fields(value)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(value, field, None)


def test_decoded_objects_and_children_share_their_repeated_strings() -> None:
    """Each object decoded from its own JSON has its own copies of strings
    that repeat across objects: kept in a snapshot, they took 3.2 MB of
    1,000 Redis and 1,000 Xca with their Services and budgets."""
    import json

    from reconciler.kinds.redis import service
    from reconciler.kinds.redis.identity import from_api

    def decoded(name: str) -> dict:
        status = {"conditions": [{"type": "Ready", "reason": "AllReplicasReady" + ""}]}
        doc = {"metadata": {"name": name, "namespace": "prod", "uid": name}, "status": status}
        doc["spec"] = {"selector": {"app.kubernetes.io/name": "redis"}, "num": 1}
        doc["metadata"]["labels"] = {"app.kubernetes.io/name": "redis"}
        return json.loads(json.dumps(doc))

    a, b = from_api(decoded("a")), from_api(decoded("b"))
    (ca,), (cb,) = a.status["conditions"], b.status["conditions"]
    assert ca["reason"] is cb["reason"]
    assert next(iter(ca)) is next(iter(cb))  # the keys too
    assert a.namespace is b.namespace
    sa, sb = (service.CHILD.decode(decoded(n)) for n in ("a", "b"))
    assert (
        sa.spec["selector"]["app.kubernetes.io/name"]
        is sb.spec["selector"]["app.kubernetes.io/name"]
    )
    assert next(iter(sa.labels)) is next(iter(sb.labels))


def _claim(name: str, group: str = "r", version: str = "1", ns: str = "default") -> Child:
    return Child(
        kind="PersistentVolumeClaim",
        namespace=ns,
        name=name,
        uid=f"uid-{name}",
        resource_version=version,
        labels={LABEL_INSTANCE: group},
        controller_uid=None,
        owner_refs=(),
        spec={},
        deletion_timestamp=None,
        generation=0,
        status={},
    )


CLAIMS = "PersistentVolumeClaim"


def test_a_grouped_read_is_recorded_and_answered_alike_only_by_the_same_children():
    """A Redis's claims are read by their instance label (kept claims of
    indexes it scaled away included): a settled Redis is planned again as
    soon as that group gains, loses or changes a claim."""
    claim = _claim("data-r-0")
    index = PodIndex((), (claim, _claim("data-s-0", group="s")), LABEL_INSTANCE)
    look = RecordingLookup(index)
    assert look.grouped(CLAIMS, "default", "r") == (claim,)
    (read,) = look.reads
    assert read == PodRead(None, "default", "r", versions_of((claim,)), CLAIMS, True)
    assert index.answers(read)
    for other in (
        (claim, _claim("data-r-3")),  # a claim joined the group
        (),  # the claim went
        (_claim("data-r-0", version="2"),),  # written since
        (_claim("data-r-0", ns="other"),),  # the same name elsewhere
    ):
        assert not PodIndex((), other, LABEL_INSTANCE).answers(read)


def test_a_child_read_is_answered_alike_only_by_the_same_child():
    claim = _claim("data-r-0")
    look = RecordingLookup(PodIndex((), (claim,), LABEL_INSTANCE))
    assert look.child(CLAIMS, "default", "data-r-0") == claim
    assert look.child(CLAIMS, "default", "data-r-1") is None
    found, missing = look.reads
    assert found == PodRead(None, "default", "data-r-0", versions_of((claim,)), CLAIMS)
    assert PodIndex((), (claim,)).answers(found) and PodIndex((), (claim,)).answers(missing)
    assert not PodIndex((), ()).answers(found)
    assert not PodIndex((), (_claim("data-r-0", version="2"),)).answers(found)
    assert not PodIndex((), (_claim("data-r-1"),)).answers(missing)
