"""Creates sent as protobuf make on the apiserver the very objects that the
same manifests sent as JSON make."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from reconciler.actions import EventSpec
from reconciler.config import Config
from reconciler.events import post_event
from reconciler.kinds.redis import from_api, pod_manifest, ref, validate_spec
from reconciler.kube import ApiError, Kube
from reconciler.model import PODS

from .conftest import Kubectl
from .test_redis import redis_yaml

pytestmark = pytest.mark.e2e

# Set by the apiserver, or named after the object: never equal between two objects.
_OWN = ("name", "uid", "resourceVersion", "creationTimestamp", "managedFields")


def _comparable(obj: dict[str, Any]) -> dict[str, Any]:
    obj = dict(obj)
    obj["metadata"] = {k: v for k, v in obj["metadata"].items() if k not in _OWN}
    if "spec" in obj:  # the service account volume's name has a random suffix
        spec = dict(obj["spec"])
        spec.pop("volumes", None)
        spec.pop("nodeName", None)  # the scheduler's choice
        spec["containers"] = [
            {k: v for k, v in c.items() if k != "volumeMounts"} for c in spec["containers"]
        ]
        obj["spec"] = spec
    obj.pop("status", None)
    return obj


def test_a_pod_and_events_created_as_protobuf_equal_those_created_as_json(
    kubectl: Kubectl, ns: str, cluster: Any
) -> None:
    kubectl.apply(redis_yaml(ns, name="owner", num=2))
    redis = from_api(kubectl.json("get", "redis", "owner", "-n", ns))
    spec = validate_spec(redis.spec, Config().image).spec
    assert spec is not None
    as_protobuf = Kube(Config(kubeconfig=str(cluster.kubeconfig), protobuf=True))
    as_json = Kube(Config(kubeconfig=str(cluster.kubeconfig), protobuf=False))

    as_protobuf.create_unread(PODS, ns, pod_manifest(redis, spec, 0))
    as_json.create_unread(PODS, ns, pod_manifest(redis, spec, 1))
    made = {n: kubectl.json("get", "pod", f"owner-{n}", "-n", ns) for n in (0, 1)}
    assert _comparable(made[0]) == _comparable(made[1])
    assert made[0]["metadata"]["ownerReferences"][0]["uid"] == redis.uid

    with pytest.raises(ApiError) as again:  # the apiserver's error, read from protobuf
        as_protobuf.create_unread(PODS, ns, pod_manifest(redis, spec, 0))
    assert (again.value.status, again.value.reason) == (409, "AlreadyExists")

    at = datetime(2026, 11, 24, 10, 0, 1, tzinfo=UTC)

    def event(reason: str) -> EventSpec:
        return EventSpec(ref(redis), "Warning", reason, "a message: ünïcode", "reconciler")

    assert post_event(as_protobuf, event("ByProtobuf"), lambda: at)
    assert post_event(as_json, event("ByJSON"), lambda: at)
    assert post_event(as_protobuf, event("ByProtobuf"), lambda: at)
    events = {
        e["reason"]: _comparable(e)
        for e in kubectl.json("get", "events", "-n", ns)["items"]
        if e["involvedObject"]["kind"] == "Redis"
    }
    assert events["ByProtobuf"].pop("count") == 2  # the second post found the first (409)
    assert events["ByJSON"].pop("count") == 1
    for e in events.values():
        e.pop("reason")
    assert events["ByProtobuf"] == events["ByJSON"]
    assert events["ByJSON"]["lastTimestamp"] == "2026-11-24T10:00:01Z"
