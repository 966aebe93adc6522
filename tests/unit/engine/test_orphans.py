"""Never act on a view we did not get: `reconciler sync`, as a user runs it,
against a loopback apiserver whose Redis LIST answers as a broken proxy or a
stale cache would. The pods of a Redis that exists survive every pass; the
pods of one that is gone are still deleted."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.cli import commands as cli_mod
from reconciler.engine.observe import orphans
from tests.unit.fake_apiserver import (
    REDIS_PATH,
    XCA_PATH,
    Answer,
    FakeApiserver,
    a_list,
    fake_apiserver,
    not_found,
)

NS = "/apis/myapp.demo.kubebuilder.io/v1/namespaces/default/redis"
PODS = "/api/v1/namespaces/default/pods"


def redis(name: str = "cache", uid: str = "u-cache") -> dict[str, Any]:
    return {
        "apiVersion": "myapp.demo.kubebuilder.io/v1",
        "kind": "Redis",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": uid,
            "resourceVersion": "7",
            "generation": 1,
            "finalizers": ["myapp.demo.kubebuilder.io/pods"],
        },
        "spec": {"num": 1},
    }


def pod(owner: str = "cache", uid: str = "u-cache") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{owner}-0",
            "namespace": "default",
            "uid": f"pod-{owner}",
            "resourceVersion": "9",
            "labels": {
                "app.kubernetes.io/managed-by": "reconciler",
                "app.kubernetes.io/instance": owner,
            },
            "ownerReferences": [
                {
                    "apiVersion": "myapp.demo.kubebuilder.io/v1",
                    "kind": "Redis",
                    "name": owner,
                    "uid": uid,
                    "controller": True,
                }
            ],
        },
        "spec": {"containers": [{"name": "redis", "image": "redis"}]},
        "status": {"phase": "Running"},
    }


@pytest.fixture
def api() -> Iterator[FakeApiserver]:
    """Every LIST a pass makes, across all namespaces as `sync` makes them."""
    server = next(served := fake_apiserver())
    server.answer("GET", "/api/v1/pods", a_list("PodList", [pod()]))
    server.answer("GET", XCA_PATH, a_list("XcaList", []))
    server.answer("GET", "/api/v1/services", a_list("ServiceList", []))
    budgets = "/apis/policy/v1/poddisruptionbudgets"
    server.answer("GET", budgets, a_list("PodDisruptionBudgetList", []))
    server.answer("GET", "/api/v1/namespaces", a_list("NamespaceList", []))
    yield server
    served.close()


def sync(api: FakeApiserver, tmp_path: Path) -> Any:
    kubeconfig = api.kubeconfig(tmp_path)
    args = ["sync", "--kubeconfig", str(kubeconfig)]
    env = {"RECONCILER_MAX_RETRIES": "0"}
    return CliRunner().invoke(cli_mod.cli, args, env=env, catch_exceptions=False)


def answer_redis_list(api: FakeApiserver, answer: Answer) -> None:
    api.answer("GET", REDIS_PATH, answer)


def deletes(api: FakeApiserver) -> list[str]:
    return [path for method, path in api.writes() if method == "DELETE"]


@pytest.mark.parametrize(
    "answer",
    [
        (200, {}),
        (200, {"kind": "Status", "apiVersion": "v1", "status": "Success", "metadata": {}}),
        (200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": []}),
        (200, {"kind": "RedisList", "apiVersion": "v1", "metadata": {}}),
    ],
    ids=["empty-object", "status", "another-kind", "no-items"],
)
def test_a_redis_list_that_is_no_list_deletes_nothing_and_exits_1(api, tmp_path, answer):
    answer_redis_list(api, answer)
    api.answer("GET", f"{NS}/cache", (200, redis()))
    result = sync(api, tmp_path)
    assert deletes(api) == []
    assert result.exit_code == 1, result.output
    assert "LIST Redis: the answer is not a RedisList" in result.output


def test_a_stale_empty_redis_list_deletes_nothing_and_exits_1(api, tmp_path):
    answer_redis_list(api, a_list("RedisList", []))
    api.answer("GET", f"{NS}/cache", (200, redis()))
    result = sync(api, tmp_path)
    assert deletes(api) == []
    assert result.exit_code == 1, result.output
    assert "LIST Redis: stale: it did not show default/cache" in result.output


@pytest.mark.parametrize(
    "found", [not_found(), (200, redis(uid="u-new"))], ids=["404", "another-uid"]
)
def test_the_pods_of_a_redis_confirmed_gone_are_deleted(api, tmp_path, found):
    answer_redis_list(api, a_list("RedisList", []))
    api.answer("GET", f"{NS}/cache", found)
    result = sync(api, tmp_path)
    assert deletes(api) == [f"{PODS}/cache-0"], result.output
    assert result.exit_code == 0, result.output


def test_a_proxys_answer_to_the_owners_get_confirms_nothing(api, tmp_path):
    answer_redis_list(api, a_list("RedisList", []))
    api.answer("GET", f"{NS}/cache", (200, {}))
    result = sync(api, tmp_path)
    assert deletes(api) == []
    assert "the answer is not a Redis" in result.output and result.exit_code == 1


def test_at_most_so_many_owners_are_asked_for_in_one_pass(api, tmp_path, monkeypatch):
    monkeypatch.setattr(orphans, "CONFIRM_MAX", 2)
    owners = [f"r{i}" for i in range(5)]
    pods = [pod(name, f"u-{name}") for name in owners]
    api.answer("GET", "/api/v1/pods", a_list("PodList", pods))
    answer_redis_list(api, a_list("RedisList", []))
    sync(api, tmp_path)
    asked = [p for m, p in api.requests if m == "GET" and p.startswith(f"{NS}/r")]
    assert asked == [f"{NS}/r0", f"{NS}/r1"]
    assert sorted(deletes(api)) == [f"{PODS}/r0-0", f"{PODS}/r1-0"]


def _mutations() -> st.SearchStrategy[bytes]:
    """Answers to the Redis LIST that are not a well-formed RedisList: a key
    removed, another kind, a body cut short, or another JSON value."""
    whole = {"kind": "RedisList", "apiVersion": "v1", "metadata": {}, "items": [redis()]}
    without = st.sampled_from(["kind", "items"]).map(
        lambda key: {k: v for k, v in whole.items() if k != key}
    )
    other_kind = st.sampled_from(["Status", "PodList", "Table", "", "redislist"]).map(
        lambda kind: {**whole, "kind": kind}
    )
    encoded = json.dumps(whole).encode()
    cut = st.integers(0, len(encoded) - 1).map(lambda n: encoded[:n])
    other = st.one_of(st.none(), st.integers(), st.text(max_size=5), st.lists(st.integers()))
    as_json = st.one_of(without, other_kind, other).map(lambda v: json.dumps(v).encode())
    return st.one_of(as_json, cut)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=_mutations())
def test_no_answer_but_a_redis_list_leads_to_a_write_for_redis(api, tmp_path, body):
    """The owner's GET answers 404, so only the LIST stands between its pod
    and a delete; the pod's create and the status would be writes too."""
    api.requests.clear()
    answer_redis_list(api, (200, body))
    api.answer("GET", f"{NS}/cache", not_found())
    result = sync(api, tmp_path)
    assert api.writes() == [] and result.exit_code == 1, result.output


SMUGGLED = (
    "x HTTP/1.1\r\nHost: x\r\n\r\n"
    "DELETE /apis/networking.k8s.io/v1/namespaces/other/networkpolicies/deny-all"
)


def planted(name: str, api_version: str = "myapp.demo.kubebuilder.io/v1") -> dict[str, Any]:
    """A pod labelled as ours, made by someone who may create pods, whose
    controller reference they wrote as they liked (the apiserver checks
    neither its name nor, for an unknown group, anything else)."""
    found = pod("planted", "u-planted")
    ref = found["metadata"]["ownerReferences"][0]
    found["metadata"]["ownerReferences"] = [{**ref, "name": name, "apiVersion": api_version}]
    return found


OWNER_NAMES = [
    SMUGGLED,
    "a b",
    "a?b=c",
    "a#b",
    "../../../api/v1/namespaces/other/pods/victim",
    "..",
    "a/b",
    "A",
    "",
    "é",
    "x" * 254,
]


@pytest.mark.parametrize("name", OWNER_NAMES, ids=range(len(OWNER_NAMES)))
def test_an_owner_name_that_is_not_a_name_is_never_asked_for(api, tmp_path, name):
    """The request line is built from the name only after it is checked: no
    GET of it, no write anywhere but the Warning event on the pod, which
    names it escaped; the pass goes on (exit 0: no object of ours failed)."""
    api.answer("GET", "/api/v1/pods", a_list("PodList", [planted(name)]))
    answer_redis_list(api, a_list("RedisList", []))
    result = sync(api, tmp_path)
    asked = [p for m, p in api.requests if m == "GET" and p.startswith(NS)]
    assert asked == [] and deletes(api) == [], api.requests
    events = [(m, p) for m, p in api.writes() if p.endswith("/events")]
    assert api.writes() == events == [("POST", "/api/v1/namespaces/default/events")]
    assert "[default/planted-0] its controller reference names" in result.output
    assert "\r" not in result.output and result.exit_code == 0, result.output


def test_an_owner_of_another_group_is_never_asked_for(api, tmp_path):
    """A reference of kind Redis in a group that is not ours: the garbage
    collector leaves such a pod alone too, and so do we."""
    found = planted("cache", "evil.example/v1")
    api.answer("GET", "/api/v1/pods", a_list("PodList", [found]))
    answer_redis_list(api, a_list("RedisList", []))
    result = sync(api, tmp_path)
    assert [p for m, p in api.requests if p.startswith(NS)] == [] and deletes(api) == []
    assert "has apiVersion 'evil.example/v1', not of myapp.demo.kubebuilder.io" in result.output
