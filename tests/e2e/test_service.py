"""A Redis's headless Service on a real apiserver and controller-manager:
made and owned, its EndpointSlices naming the Ready pods by hostname, drift
put back with others' labels kept, and shown by `kubectl get redis -o wide`."""

from __future__ import annotations

import json
from typing import Any

import pytest

from .conftest import Kubectl, Reconciler, wait_for
from .test_real_clusters import columns, events, status, stays_converged
from .test_redis import pods, redis_yaml, settled

pytestmark = pytest.mark.e2e


def service(kubectl: Kubectl, ns: str) -> dict[str, Any]:
    return kubectl.json("get", "service", "redis-sample", "-n", ns)


def ready_endpoints(kubectl: Kubectl, ns: str) -> dict[str, str]:
    """hostname -> address of each Ready endpoint of the Service's slices."""
    slices = kubectl.json(
        "get", "endpointslices", "-n", ns, "-l", "kubernetes.io/service-name=redis-sample"
    )["items"]
    return {
        e.get("hostname", ""): e["addresses"][0]
        for s in slices
        for e in s.get("endpoints") or ()
        if (e.get("conditions") or {}).get("ready")
    }


def test_the_service_names_each_ready_pod(kubectl: Kubectl, reconciler: Reconciler, ns: str):
    kubectl.apply(redis_yaml(ns, num=3, port=6375))
    reconciler.converge(ns, settle=lambda: settled(kubectl, ns))
    svc = service(kubectl, ns)
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["ports"] == [
        {"name": "redis", "port": 6375, "targetPort": "redis", "protocol": "TCP"}
    ]
    (owner,) = svc["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("Redis", "redis-sample", True)
    assert columns(kubectl, ns)["SERVICE"] == "redis-sample"
    assert events(kubectl, ns, "CreateService") == [
        "Created service redis-sample: stable names for its pods"
    ]
    for name, p in pods(kubectl, ns).items():
        assert (p["spec"]["hostname"], p["spec"]["subdomain"]) == (name, "redis-sample")
    ips = {n: p["status"]["podIP"] for n, p in pods(kubectl, ns).items()}
    wait_for(lambda: ready_endpoints(kubectl, ns) == ips, what="EndpointSlices of the Ready pods")
    stays_converged(kubectl, reconciler, ns)


def test_drift_of_the_service_is_put_back_and_others_labels_kept(
    kubectl: Kubectl, reconciler: Reconciler, ns: str
):
    kubectl.apply(redis_yaml(ns, num=1))
    reconciler.converge(ns, settle=lambda: settled(kubectl, ns))
    patch = {
        "metadata": {"labels": {"app.kubernetes.io/managed-by": None, "team": "payments"}},
        "spec": {
            "selector": {"tier": "cache"},
            "ports": [{"name": "redis", "port": 7000, "targetPort": "redis"}],
        },
    }
    kubectl.run(
        "patch", "service", "redis-sample", "-n", ns, "--type=merge", "-p", json.dumps(patch)
    )
    repaired = reconciler.sync(ns)
    assert repaired.summary["actions"].get("Service/patch/ok") == 1
    svc = service(kubectl, ns)
    assert svc["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "reconciler"
    assert svc["metadata"]["labels"]["team"] == "payments"
    assert "tier" not in svc["spec"]["selector"]
    assert svc["spec"]["ports"][0]["port"] == 6379
    assert any("Restored service redis-sample" in m for m in events(kubectl, ns, "Drift"))
    stays_converged(kubectl, reconciler, ns)


def test_another_s_service_of_that_name_is_left_alone(
    kubectl: Kubectl, reconciler: Reconciler, ns: str
):
    theirs = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "redis-sample", "namespace": ns},
        "spec": {"selector": {"app": "theirs"}, "ports": [{"port": 80}]},
    }
    kubectl.apply(json.dumps(theirs))
    kubectl.apply(redis_yaml(ns, num=1))
    reconciler.converge(ns, settle=lambda: settled(kubectl, ns))
    assert service(kubectl, ns)["spec"]["selector"] == {"app": "theirs"}
    st = status(kubectl, ns)
    assert st["state"] == "ServiceConflict"
    assert st["message"].startswith("service redis-sample is not owned by this Redis")

    kubectl.run("delete", "service", "redis-sample", "-n", ns)
    reconciler.converge(ns, settle=lambda: settled(kubectl, ns))
    assert service(kubectl, ns)["spec"]["clusterIP"] == "None"
    assert status(kubectl, ns)["state"] == "Ready"


def test_the_service_goes_with_its_redis(kubectl: Kubectl, reconciler: Reconciler, ns: str):
    kubectl.apply(redis_yaml(ns, num=1))
    reconciler.converge(ns, settle=lambda: settled(kubectl, ns))
    kubectl.run("delete", "redis", "redis-sample", "-n", ns, "--wait=false")
    reconciler.converge(ns)

    def gone() -> bool:
        return kubectl.run("get", "service", "redis-sample", "-n", ns, check=False).returncode != 0

    wait_for(gone, what="the garbage collector to delete the Service")
