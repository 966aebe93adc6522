"""The generic pod reader: a dict read through `pod_fields.SCHEMA`, each value
of the wrong type read as protobuf's default, and made a `Pod` by `pod_of`.
The property tests hold the typed readers to it; these hold it, and `pod_of`
that all three share, to the values a pass reads."""

from __future__ import annotations

import pytest

from reconciler.client import pod_dict
from reconciler.client.pod_dict import pod_from_api
from reconciler.client.pod_fields import BOOL, INT32, INT64, MAP, STRING, TIME, Field
from reconciler.model import Container, ContainerState, OwnerRef, Pod, PodCondition

FULL = {
    "metadata": {
        "name": "r-0",
        "namespace": "ns",
        "uid": "u-1",
        "resourceVersion": "42",
        "generation": 3,
        "labels": {"app": "redis"},
        "annotations": {"a/b": "c"},
        "deletionTimestamp": "2026-11-22T12:00:00Z",
        "deletionGracePeriodSeconds": 30,
        "finalizers": ["x/y"],
        "ownerReferences": [
            {
                "apiVersion": "myapp.demo.kubebuilder.io/v1",
                "kind": "Redis",
                "name": "r",
                "uid": "owner",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    },
    "spec": {
        "containers": [
            {
                "name": "redis",
                "image": "redis:5",
                "args": ["--port", "6379"],
                "ports": [{"containerPort": 6379}, {"name": "no-number"}],
            }
        ]
    },
    "status": {
        "phase": "Pending",
        "reason": "Evicted",
        "message": "low on memory",
        "conditions": [{"type": "Ready", "status": "False", "reason": "R", "message": "M"}],
        "containerStatuses": [
            {"name": "a", "state": {"waiting": {"reason": "ImagePullBackOff", "message": "no"}}},
            {"name": "b", "state": {"terminated": {"reason": "Error", "message": "exit 1"}}},
            {"name": "c", "state": {"running": {"startedAt": "2026-11-22T11:00:00Z"}}},
        ],
    },
}


def test_every_field_a_pass_reads():
    owner = OwnerRef("myapp.demo.kubebuilder.io/v1", "Redis", "r", "owner", True, True)
    assert pod_from_api(FULL) == Pod(
        namespace="ns",
        name="r-0",
        uid="u-1",
        resource_version="42",
        labels={"app": "redis"},
        annotations={"a/b": "c"},
        controller_uid="owner",
        controller_kind="Redis",
        deletion_timestamp="2026-11-22T12:00:00Z",
        phase="Pending",
        conditions=(PodCondition("Ready", "False", "R", "M"),),
        containers=(Container("redis", "redis:5", (6379,), ("--port", "6379")),),
        owner_refs=(owner,),
        generation=3,
        deletion_grace_seconds=30,
        finalizers=("x/y",),
        reason="Evicted",
        message="low on memory",
        container_states=(
            ContainerState("a", True, "ImagePullBackOff", "no"),
            ContainerState("b", False, "Error", "exit 1"),
        ),
    )


def test_a_pod_without_a_controller_has_none():
    refs = [{"kind": "ReplicaSet", "uid": "rs", "controller": False}]
    p = pod_from_api({"metadata": {"ownerReferences": refs}})
    assert (p.controller_uid, p.controller_kind) == (None, None)
    assert p.owner_refs == (OwnerRef("", "ReplicaSet", "", "rs", False, False),)
    assert (p.deletion_grace_seconds, p.deletion_timestamp) == (None, None)


@pytest.mark.parametrize(
    ("kind", "value", "want"),
    [
        (STRING, "s", "s"),
        (STRING, None, ""),
        (STRING, 0, ""),
        (STRING, 7, "7"),
        (TIME, "2026-11-22T12:00:00Z", "2026-11-22T12:00:00Z"),
        (INT64, 5, 5),
        (INT64, None, 0),
        (INT64, True, 0),
        (INT64, "5", 0),
        (INT32, 6379, 6379),
        (BOOL, True, True),
        (BOOL, "true", False),
        (BOOL, None, False),
        (MAP, {"a": 1}, {"a": "1"}),
        (MAP, ["a"], {}),
    ],
)
def test_a_value_of_the_wrong_type_reads_as_protobufs_default(kind, value, want):
    assert pod_dict._reader(Field("f", 1, kind))(value) == want


def test_a_message_field_reads_a_mapping_and_nothing_else_as_a_message():
    read = pod_dict._reader(Field("state", 2, "ContainerState"))
    assert read({"waiting": {"reason": "X"}}).waiting.reason == "X"
    assert read("junk").waiting.reason == ""


def test_repeated_fields_keep_their_items_and_drop_what_is_not_a_message():
    strings = pod_dict._repeated(Field("args", 4, STRING, many=True))
    assert strings(["a", 1]) == ["a", "1"]
    assert strings("not a list") == []
    refs = pod_dict._repeated(Field("owner_references", 13, "OwnerReference", many=True))
    assert [r.uid for r in refs(["junk", {"uid": "u"}])] == ["u"]
    assert refs(None) == []


@pytest.mark.parametrize(
    ("kind", "value", "sent"),
    [
        (INT64, 0, True),
        (INT64, None, False),
        (INT64, False, False),
        (INT64, "30", False),
        (TIME, "2026-11-22T12:00:00Z", True),
        (TIME, None, False),
        ("ContainerStateWaiting", {}, True),
        ("ContainerStateWaiting", None, False),
        ("ContainerStateWaiting", "junk", False),
    ],
)
def test_a_field_counts_as_sent_only_with_its_type(kind, value, sent):
    assert pod_dict._sent(Field("f", 1, kind, present=True))(value) is sent


def test_json_names_are_the_camel_case_of_ours():
    assert pod_dict._camel("block_owner_deletion") == "blockOwnerDeletion"
    assert pod_dict._camel("uid") == "uid"
