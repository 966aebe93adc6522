"""Observe, a kind that moves (engine/observe/churn.py): past FETCH_MAX it
is listed in full at once until it settles."""

from __future__ import annotations

from reconciler.client.protowire import META_ACCEPT_JSON
from reconciler.engine.observe.lister import FETCH_MAX
from tests.unit.engine.observe.world import (
    cluster,
    one_pass,
    pod_obj,
    redis_lists,
    redis_obj,
)
from tests.unit.fakes import FakeKube


def test_a_kind_that_moved_past_fetch_max_is_listed_in_full_at_once_until_it_settles():
    """While a kind moves, its LIST of metadata would only precede the full
    one; once a full LIST finds it quiet, the next pass lists metadata again."""
    many = [redis_obj(f"r{i}") for i in range(FETCH_MAX + 1)]
    kube = FakeKube()
    kube.held["Redis"] = many
    first = one_pass(kube)
    assert first.snapshot.churn == {}  # no pass before: nothing to compare with

    kube.held["Redis"] = [redis_obj(r["metadata"]["name"], "2") for r in many]
    kube.accepts.clear()
    moved = one_pass(kube, first.snapshot)
    assert redis_lists(kube) == [META_ACCEPT_JSON, None]  # as before: metadata, then in full
    assert moved.snapshot.churn["Redis"] == FETCH_MAX + 1

    kube.held["Redis"] = [redis_obj(r["metadata"]["name"], "3") for r in many[:2]] + many[2:]
    kube.accepts.clear()
    at_once = one_pass(kube, moved.snapshot)
    assert redis_lists(kube) == [None]
    assert at_once.snapshot.churn["Redis"] == FETCH_MAX + 1  # "1" again is not what it was at "2"

    kube.accepts.clear()
    still = one_pass(kube, at_once.snapshot)
    assert redis_lists(kube) == [None]
    assert still.snapshot.churn["Redis"] == 0
    assert all(
        a is b
        for a, b in zip(at_once.snapshot.of("Redis"), still.snapshot.of("Redis"), strict=True)
    )

    kube.accepts.clear()
    one_pass(kube, still.snapshot)
    assert redis_lists(kube) == [META_ACCEPT_JSON]


def test_a_kind_that_moved_a_little_keeps_its_list_of_metadata():
    kube = FakeKube()
    kube.held["Redis"] = [redis_obj(f"r{i}") for i in range(FETCH_MAX + 1)]
    first = one_pass(kube)
    kube.held["Redis"] = [redis_obj("r0", "2"), *kube.held["Redis"][1:]]
    kube.objects[("Redis", "a", "r0")] = redis_obj("r0", "2")
    second = one_pass(kube, first.snapshot)
    assert second.snapshot.churn["Redis"] == 1
    kube.accepts.clear()
    one_pass(kube, second.snapshot)
    assert redis_lists(kube) == [META_ACCEPT_JSON]


def test_pods_that_moved_past_fetch_max_are_listed_in_full_at_once():
    def pods(version: str) -> list[dict]:
        made = [pod_obj(f"p{i}", labelled=True) for i in range(FETCH_MAX + 1)]
        for pod in made:
            pod["metadata"]["resourceVersion"] = version
        return made

    kube = cluster(*pods("1"))
    first = one_pass(kube)
    kube.held["Pod"] = pods("2")
    moved = one_pass(kube, first.snapshot)
    assert moved.snapshot.churn["Pod"] == FETCH_MAX + 1
    kube.accepts.clear()
    one_pass(kube, moved.snapshot)
    assert [accept for kind, accept in kube.accepts if kind == "Pod"] == [None]


def test_pods_listed_in_full_as_json_go_back_to_metadata_once_quiet():
    """With protobuf off, a full LIST of pods decodes each one anew: the
    churn is counted by resourceVersion, not by the objects kept, or pods
    that moved once would be listed in full in every pass after."""
    made = [pod_obj(f"p{i}", labelled=True) for i in range(FETCH_MAX + 1)]
    kube = cluster(*made)
    first = one_pass(kube)
    kube.held["Pod"] = [{**p, "metadata": {**p["metadata"], "resourceVersion": "2"}} for p in made]
    moved = one_pass(kube, first.snapshot)
    at_once = one_pass(kube, moved.snapshot)
    assert at_once.snapshot.churn["Pod"] == 0
    kube.accepts.clear()
    one_pass(kube, at_once.snapshot)
    assert [accept for kind, accept in kube.accepts if kind == "Pod"] == [META_ACCEPT_JSON]
