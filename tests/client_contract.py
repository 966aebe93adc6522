"""What the client answers, held the same for the unit tests' FakeKube and
for the real apiserver: each case here runs against both
(tests/unit/client/test_contract.py, tests/e2e/test_client_contract.py), so
a fake that answers otherwise than the apiserver fails a unit test, as
controller-runtime tests its fake client.

A case takes a `World`: a client, a namespace of its own, and the two things
a real cluster does by itself that the fake's world must do for it (a pod
that runs, a budget whose status its controller computed).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import pytest

from reconciler.children import PDBS
from reconciler.client.errors import Conflict, EvictionRefused, Gone, NotFound
from reconciler.client.interface import Client
from reconciler.kinds.redis.identity import RESOURCE as REDIS
from reconciler.model import PODS, ResourceType

CONFIGMAPS = ResourceType("", "v1", "ConfigMap", "configmaps")
HOLD = "contract.example.com/hold"  # a finalizer that no controller removes


class World(Protocol):
    client: Client
    namespace: str

    def running_pod(self, name: str, labels: Mapping[str, str]) -> dict[str, Any]:
        """A pod created through the client, once it runs and is Ready."""
        ...

    def budget_settled(self, name: str) -> None:
        """Once the disruption controller has computed the budget's status."""
        ...


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def configmap(name: str, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": dict(labels or {})}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}}


def case_create_then_get(w: World) -> None:
    name = _name("cm")
    sent = configmap(name)
    sent["metadata"]["uid"] = "chosen-by-the-client"
    made = w.client.create(CONFIGMAPS, w.namespace, sent)
    meta = made["metadata"]
    assert meta["uid"] and meta["resourceVersion"] and meta["namespace"] == w.namespace
    assert meta["uid"] != "chosen-by-the-client"  # the apiserver's own
    got = w.client.get(CONFIGMAPS, w.namespace, name)
    assert got["metadata"]["uid"] == meta["uid"]
    assert got["metadata"]["resourceVersion"] == meta["resourceVersion"]
    assert got["data"] == {"k": "v"}


def case_a_name_taken_is_a_conflict(w: World) -> None:
    name = _name("cm")
    w.client.create(CONFIGMAPS, w.namespace, configmap(name))
    with pytest.raises(Conflict):
        w.client.create(CONFIGMAPS, w.namespace, configmap(name))


def case_list_with_labels(w: World) -> None:
    tag = _name("t")
    for name, labels in (("a", {"tag": tag, "x": "1"}), ("b", {"tag": tag, "x": "2"}), ("c", {})):
        w.client.create(CONFIGMAPS, w.namespace, configmap(f"{tag}-{name}", labels))

    def listed(selector: str | None, namespace: str | None = w.namespace) -> list[str]:
        found = w.client.list(CONFIGMAPS, namespace, selector)
        return sorted(o["metadata"]["name"] for o in found if o["metadata"]["name"].startswith(tag))

    assert listed(f"tag={tag}") == [f"{tag}-a", f"{tag}-b"]
    assert listed(f"tag={tag},x=1") == [f"{tag}-a"]
    assert listed(f"tag={tag},x in (2,3)") == [f"{tag}-b"]
    assert listed(f"tag={tag},x notin (2)") == [f"{tag}-a"]
    assert listed(f"tag={tag},x!=2") == [f"{tag}-a"]
    assert listed("tag") == [f"{tag}-a", f"{tag}-b"]
    assert listed("!tag") == [f"{tag}-c"]
    assert listed(None) == [f"{tag}-a", f"{tag}-b", f"{tag}-c"]
    assert listed(f"tag={tag}", None) == [f"{tag}-a", f"{tag}-b"]  # every namespace


def case_a_list_is_of_the_kind_asked(w: World) -> None:
    name = _name("same")
    w.client.create(CONFIGMAPS, w.namespace, configmap(name))
    w.client.create(REDIS, w.namespace, redis(name))

    def named(res: ResourceType) -> list[dict[str, Any]]:
        found = w.client.list(res, w.namespace)
        return [o for o in found if o["metadata"]["name"] == name]

    (cm,) = named(CONFIGMAPS)
    assert cm["data"] == {"k": "v"} and "spec" not in cm
    (r,) = named(REDIS)
    assert r["spec"]["num"] == 1 and "data" not in r


def case_a_patch_with_a_stale_resource_version_is_a_conflict(w: World) -> None:
    name = _name("cm")
    made = w.client.create(CONFIGMAPS, w.namespace, configmap(name))
    first = made["metadata"]["resourceVersion"]
    patched = w.client.merge_patch(
        CONFIGMAPS, w.namespace, name, {"metadata": {"resourceVersion": first}, "data": {"k": "w"}}
    )
    assert patched["data"] == {"k": "w"}
    assert patched["metadata"]["resourceVersion"] != first
    with pytest.raises(Conflict):
        w.client.merge_patch(
            CONFIGMAPS,
            w.namespace,
            name,
            {"metadata": {"resourceVersion": first}, "data": {"k": "x"}},
        )
    assert w.client.get(CONFIGMAPS, w.namespace, name)["data"] == {"k": "w"}
    unconditional = w.client.merge_patch(CONFIGMAPS, w.namespace, name, {"data": {"k": None}})
    assert "k" not in (unconditional.get("data") or {})  # null removes, as RFC 7386 says
    stale = {**configmap(name), "data": {"k": "y"}}
    stale["metadata"]["resourceVersion"] = first
    with pytest.raises(Conflict):
        w.client.replace(CONFIGMAPS, w.namespace, name, stale)
    current = w.client.get(CONFIGMAPS, w.namespace, name)["metadata"]["resourceVersion"]
    stale["metadata"]["resourceVersion"] = current
    replaced = w.client.replace(CONFIGMAPS, w.namespace, name, stale)
    assert replaced["data"] == {"k": "y"}
    assert replaced["metadata"]["resourceVersion"] != current


def case_what_is_not_there_is_not_found_not_gone(w: World) -> None:
    name = _name("absent")
    calls: list[Callable[[], object]] = [
        lambda: w.client.get(CONFIGMAPS, w.namespace, name),
        lambda: w.client.merge_patch(CONFIGMAPS, w.namespace, name, {"data": {"k": "v"}}),
        lambda: w.client.replace(CONFIGMAPS, w.namespace, name, configmap(name)),
        lambda: w.client.delete(CONFIGMAPS, w.namespace, name),
        lambda: w.client.merge_patch(REDIS, w.namespace, name, {"status": {}}, sub="status"),
        lambda: w.client.evict(w.namespace, name, "no-uid"),
    ]
    for call in calls:
        with pytest.raises(NotFound) as raised:
            call()
        assert not isinstance(raised.value, Gone)


def redis(name: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{REDIS.group}/{REDIS.version}",
        "kind": "Redis",
        "metadata": {"name": name},
        "spec": {"num": 1, "port": 6379},
    }


def case_the_status_is_written_only_through_its_subresource(w: World) -> None:
    name = _name("redis")
    made = w.client.create(REDIS, w.namespace, redis(name))
    assert made["metadata"]["generation"] == 1
    main = w.client.merge_patch(
        REDIS, w.namespace, name, {"spec": {"num": 2}, "status": {"message": "main"}}
    )
    assert main["spec"]["num"] == 2
    assert (main.get("status") or {}).get("message") is None  # the main resource drops status
    assert main["metadata"]["generation"] == 2  # a spec changed is a new generation
    status = w.client.merge_patch(
        REDIS,
        w.namespace,
        name,
        {"metadata": {"labels": {"a": "b"}}, "spec": {"num": 3}, "status": {"message": "sub"}},
        sub="status",
    )
    assert status["status"]["message"] == "sub"
    assert status["spec"]["num"] == 2  # the subresource drops everything else
    assert "a" not in (status["metadata"].get("labels") or {})
    assert status["metadata"]["generation"] == 2  # and a status is no new generation
    assert w.client.get(REDIS, w.namespace, name)["status"]["message"] == "sub"


def case_a_finalizer_holds_a_delete(w: World) -> None:
    name = _name("held")
    body = configmap(name)
    body["metadata"]["finalizers"] = [HOLD]
    w.client.create(CONFIGMAPS, w.namespace, body)
    try:
        _held_until_its_finalizer_goes(w, name)
    finally:  # whatever failed: nothing left to hold the test's namespace
        with contextlib.suppress(NotFound):
            w.client.merge_patch(CONFIGMAPS, w.namespace, name, {"metadata": {"finalizers": None}})


def _held_until_its_finalizer_goes(w: World, name: str) -> None:
    w.client.delete(CONFIGMAPS, w.namespace, name)
    held = w.client.get(CONFIGMAPS, w.namespace, name)
    assert held["metadata"]["deletionTimestamp"] and held["metadata"]["finalizers"] == [HOLD]
    listed = [o["metadata"]["name"] for o in w.client.list(CONFIGMAPS, w.namespace)]
    assert name in listed  # still there for a LIST too
    w.client.delete(CONFIGMAPS, w.namespace, name)  # again: still held, no error
    again = w.client.get(CONFIGMAPS, w.namespace, name)
    assert again["metadata"]["deletionTimestamp"] == held["metadata"]["deletionTimestamp"]
    w.client.merge_patch(CONFIGMAPS, w.namespace, name, {"metadata": {"finalizers": None}})
    with pytest.raises(NotFound):  # its last finalizer gone, so is it
        w.client.get(CONFIGMAPS, w.namespace, name)


def case_a_delete_whose_uid_is_not_the_objects_is_a_conflict(w: World) -> None:
    name = _name("cm")
    made = w.client.create(CONFIGMAPS, w.namespace, configmap(name))
    with pytest.raises(Conflict):
        w.client.delete(CONFIGMAPS, w.namespace, name, uid="not-its-uid")
    with pytest.raises(Conflict):
        w.client.delete(CONFIGMAPS, w.namespace, name, resource_version="1")
    w.client.delete(CONFIGMAPS, w.namespace, name, uid=made["metadata"]["uid"])
    with pytest.raises(NotFound):
        w.client.get(CONFIGMAPS, w.namespace, name)


def budget(name: str, labels: Mapping[str, str], min_available: int) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": dict(labels)}},
    }


def case_an_eviction_a_budget_forbids_is_refused_and_the_pod_stays(w: World) -> None:
    labels = {"contract": _name("evict")}
    pod = w.running_pod(_name("pod"), labels)
    name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
    w.client.create(PDBS, w.namespace, budget(labels["contract"], labels, 1))
    w.budget_settled(labels["contract"])
    with pytest.raises(EvictionRefused):
        w.client.evict(w.namespace, name, uid)
    with pytest.raises(EvictionRefused):  # the budget is asked before the uid
        w.client.evict(w.namespace, name, "not-its-uid")
    assert w.client.get(PODS, w.namespace, name)["metadata"]["uid"] == uid
    w.client.delete(PDBS, w.namespace, labels["contract"])
    with pytest.raises(Conflict):
        w.client.evict(w.namespace, name, "not-its-uid")
    w.client.evict(w.namespace, name, uid)  # no budget: the eviction is taken


CASES: list[Callable[[World], None]] = [
    case_create_then_get,
    case_a_name_taken_is_a_conflict,
    case_list_with_labels,
    case_a_patch_with_a_stale_resource_version_is_a_conflict,
    case_what_is_not_there_is_not_found_not_gone,
    case_a_list_is_of_the_kind_asked,
    case_the_status_is_written_only_through_its_subresource,
    case_a_finalizer_holds_a_delete,
    case_a_delete_whose_uid_is_not_the_objects_is_a_conflict,
    case_an_eviction_a_budget_forbids_is_refused_and_the_pod_stays,
]
