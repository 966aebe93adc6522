"""Children are decoded to what their rules read, and nothing else."""

from __future__ import annotations

from typing import Any

from reconciler.children import ChildType
from reconciler.kinds.redis import disruption, service
from reconciler.kinds.redis.disruption import drift as budget_drift
from reconciler.kinds.redis.disruption import manifest as budget_manifest
from reconciler.kinds.redis.identity import owner_of
from reconciler.kinds.redis.service import drift as service_drift
from reconciler.kinds.redis.service import manifest as service_manifest
from reconciler.model import ResourceType
from tests.unit.builders import redis


def stored(manifest: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """As the apiserver returns it: with what it defaults and allocates."""
    meta = {**manifest["metadata"], "uid": "u1", "resourceVersion": "7"}
    return {**manifest, "metadata": meta, "spec": {**manifest["spec"], **spec}}


def test_a_service_keeps_its_selector_and_ports_and_drops_what_the_apiserver_added() -> None:
    owner = owner_of(redis(num=3))
    obj = stored(
        service_manifest(owner, 6379),
        clusterIPs=["None"],
        ipFamilies=["IPv4"],
        ipFamilyPolicy="SingleStack",
        sessionAffinity="None",
        type="ClusterIP",
        internalTrafficPolicy="Cluster",
    )
    child = service.CHILD.decode(obj)
    assert sorted(child.spec) == ["ports", "selector"]
    assert service_drift(owner, child, 6379) == {}
    assert service_drift(owner, child, 7000) == {
        "spec": {"ports": service_manifest(owner, 7000)["spec"]["ports"]}
    }


def test_a_budget_keeps_every_field_its_rules_compare() -> None:
    owner = owner_of(redis(num=3))
    obj = stored(budget_manifest(owner, 3), maxUnavailable=1)
    child = disruption.CHILD.decode(obj)
    assert sorted(child.spec) == [
        "maxUnavailable",
        "minAvailable",
        "selector",
        "unhealthyPodEvictionPolicy",
    ]
    assert budget_drift(owner, child, 3) == {"spec": {"maxUnavailable": None}}


def test_a_budget_keeps_the_disruption_controller_s_count_and_its_generation() -> None:
    owner = owner_of(redis(num=3))
    obj = stored(budget_manifest(owner, 3))
    obj["metadata"]["generation"] = 2
    obj["status"] = {
        "observedGeneration": 2,
        "disruptionsAllowed": 1,
        "currentHealthy": 3,
        "desiredHealthy": 2,
        "expectedPods": 3,
        "disruptedPods": {"r-0": "2026-11-27T09:00:00Z"},
        "conditions": [{"type": "DisruptionAllowed", "status": "True"}],
    }
    child = disruption.CHILD.decode(obj)
    assert child.generation == 2
    assert child.status == {
        "observedGeneration": 2,
        "disruptionsAllowed": 1,
        "currentHealthy": 3,
        "desiredHealthy": 2,
    }
    obj["metadata"]["generation"] = True  # not a number: no generation known
    assert disruption.CHILD.decode(obj).generation == 0
    assert service.CHILD.decode(stored(service_manifest(owner, 6379))).status == {}


def test_a_type_that_keeps_its_fields_at_the_top_reads_those_into_its_spec() -> None:
    """A ConfigMap has no spec: its data is read from the top level."""
    maps = ChildType(ResourceType("", "v1", "ConfigMap", "configmaps"), (), top_read=("data",))
    obj = {
        "metadata": {"name": "m", "namespace": "a", "uid": "u", "resourceVersion": "3"},
        "data": {"k": "v"},
        "binaryData": {"b": "AA=="},
    }
    assert maps.decode(obj).spec == {"data": {"k": "v"}}
    assert ChildType(maps.resource, ()).decode(obj).spec == {}
