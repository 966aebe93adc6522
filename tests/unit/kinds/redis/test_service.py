"""A Redis's headless Service: made, kept as we set it, never another's."""

from __future__ import annotations

import dataclasses

import pytest

from reconciler.actions import CreateChild, PatchChild, PatchStatus
from reconciler.engine.plan import plan_pass
from reconciler.kinds.owned import DRIFT
from reconciler.kinds.redis.identity import COMPONENT, owner_of
from reconciler.kinds.redis.service import CONFLICT, drift
from tests.unit.builders import CONFIG, NOW, pod, redis, service_of, snap


def planned(r, services, pods=()):
    return plan_pass(snap((r,), (), tuple(pods), tuple(services)), CONFIG, NOW).actions


def status(actions):
    (patch,) = [a for a in actions if isinstance(a, PatchStatus)]
    return patch.status


def test_a_redis_gets_a_headless_service_it_owns():
    r = redis(num=2)
    actions = planned(r, [])
    (create,) = [a for a in actions if isinstance(a, CreateChild)]
    svc = create.manifest
    assert (svc["kind"], svc["metadata"]["name"], svc["metadata"]["namespace"]) == (
        "Service",
        "r",
        "default",
    )
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["selector"] == {
        "app.kubernetes.io/name": "redis",
        "app.kubernetes.io/instance": "r",
    }
    assert svc["spec"]["ports"] == [
        {"name": "redis", "port": 6379, "targetPort": "redis", "protocol": "TCP"}
    ]
    (ref,) = svc["metadata"]["ownerReferences"]
    assert (ref["uid"], ref["controller"]) == (r.uid, True)
    assert svc["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "reconciler"
    assert (create.event.type, create.event.reason) == ("Normal", "CreateService")
    assert status(actions)["service"] == "r"


REDIS_PORT = {"name": "redis", "port": 6380, "targetPort": "redis", "protocol": "TCP"}
METRICS_PORT = {"name": "metrics", "port": 9121, "targetPort": "metrics", "protocol": "TCP"}


@pytest.mark.parametrize(
    ("fields", "want"),
    [
        ({}, [REDIS_PORT]),
        ({"exporter": {}}, [REDIS_PORT, METRICS_PORT]),  # scraped through the Service
    ],
)
def test_the_service_is_made_with_the_exporters_port_when_its_pods_have_one(fields, want):
    r = redis(num=1, spec={"num": 1, "port": 6380, **fields})
    (create,) = [a for a in planned(r, []) if isinstance(a, CreateChild) and a.kind == "Service"]
    assert create.manifest["spec"]["ports"] == want


def test_its_pods_get_stable_names_through_it():
    r = redis(num=2)
    creates = [a.manifest["spec"] for a in planned(r, []) if a.kind == "Pod"]
    assert [(s["hostname"], s["subdomain"]) for s in creates] == [("r-0", "r"), ("r-1", "r")]


def test_a_converged_service_costs_no_write():
    r = redis(num=1)
    pods = [pod(r, 0)]
    first = status(planned(r, [service_of(r)], pods))
    assert planned(dataclasses.replace(r, status=first), [service_of(r)], pods) == ()


def test_what_we_set_is_put_back_and_what_others_add_is_kept():
    r = redis(num=1)
    ours = service_of(r)
    edited = dataclasses.replace(
        ours,
        labels={"team": "payments"},  # ours removed, another's added
        spec={
            **ours.spec,
            "selector": {**ours.spec["selector"], "tier": "cache"},
            "ports": [{"name": "redis", "port": 7000, "targetPort": "redis", "protocol": "TCP"}],
            "sessionAffinity": "ClientIP",  # another's field: left alone
        },
    )
    (patch,) = [a for a in planned(r, [edited], [pod(r, 0)]) if isinstance(a, PatchChild)]
    assert patch.resource_version == edited.resource_version
    assert patch.body["metadata"]["labels"] == dict(ours.labels)
    assert patch.body["spec"]["selector"] == {**ours.spec["selector"], "tier": None}
    assert patch.body["spec"]["ports"][0]["port"] == 6379
    assert "sessionAffinity" not in patch.body["spec"]
    assert patch.why == "drift: labels, ports, selector changed by hand"
    assert (patch.event.type, patch.event.reason, patch.event.component) == (
        "Normal",
        DRIFT,
        COMPONENT,
    )


def test_a_port_change_reaches_the_service():
    r = redis(num=1, port=6380)
    (patch,) = [a for a in planned(r, [service_of(r)], [pod(r, 0)]) if isinstance(a, PatchChild)]
    assert patch.body == {
        "spec": {
            "ports": [{"name": "redis", "port": 6380, "targetPort": "redis", "protocol": "TCP"}]
        }
    }


def test_another_s_service_of_that_name_is_left_alone_and_said():
    r = redis(num=1)
    theirs = dataclasses.replace(service_of(r), controller_uid="someone-else")
    actions = planned(r, [theirs], [pod(r, 0)])
    assert not [a for a in actions if isinstance(a, CreateChild | PatchChild)]
    st = status(actions)
    assert st["state"] == CONFLICT
    assert st["message"].startswith("service r is not owned by this Redis")
    assert "service" not in st or st["service"] is None


def test_nothing_is_written_to_services_that_could_not_be_listed():
    r = redis(num=1)
    actions = plan_pass(snap((r,), (), (pod(r, 0),), None), CONFIG, NOW).actions
    assert not [a for a in actions if isinstance(a, CreateChild | PatchChild)]


def test_a_paused_redis_leaves_its_service_as_it_is():
    r = redis(num=1, spec={"num": 1, "port": 6380, "paused": True})
    assert not [a for a in planned(r, [service_of(r)], [pod(r, 0)]) if isinstance(a, PatchChild)]
    assert not [a for a in planned(r, []) if isinstance(a, CreateChild)]


def test_drift_is_empty_for_the_service_as_made():
    r = redis()
    assert drift(owner_of(r), service_of(r), 6379) == {}


def _repair(ports):
    r = redis(num=1)
    ours = service_of(r)
    edited = dataclasses.replace(ours, spec={**ours.spec, "ports": ports})
    (patch,) = [a for a in planned(r, [edited], [pod(r, 0)]) if isinstance(a, PatchChild)]
    return patch


def test_a_port_of_ours_at_an_old_number_follows_the_spec():
    patch = _repair([{"name": "redis", "port": 7000, "targetPort": "redis", "protocol": "TCP"}])
    assert patch.why == "ports follow spec.port and spec.exporter"
    assert patch.event.message == "Updated service r: ports follow spec.port and spec.exporter"


@pytest.mark.parametrize(
    "port",
    [
        {"name": "redis", "port": 6379, "targetPort": 6379, "protocol": "TCP"},  # by number
        {"name": "admin", "port": 6379, "targetPort": "admin", "protocol": "TCP"},  # renamed
    ],
)
def test_a_port_renamed_or_retargeted_by_hand_is_restored_as_drift(port):
    patch = _repair([port])
    assert patch.why == "drift: ports changed by hand"
    assert patch.event.message == "Restored service r: drift: ports changed by hand"
