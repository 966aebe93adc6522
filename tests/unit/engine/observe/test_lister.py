"""Observe, the LISTs (engine/observe/lister.py): metadata first, the
changed fetched alone, page sizes, protobuf, and what a failed LIST leaves out."""

from __future__ import annotations

import pytest

from reconciler.client.errors import ApiError, NoCredentials, Unreachable
from reconciler.client.protowire import META_ACCEPT, META_ACCEPT_JSON
from reconciler.engine.observe import observe
from reconciler.engine.observe.lister import (
    FETCH_MAX,
    JSON_METADATA_PAGE_SIZE,
    JSON_PAGE_SIZE,
    ListSettings,
)
from tests.unit.engine.observe.world import (
    FULL,
    PAGE,
    gets,
    redis_obj,
    two_passes,
)
from tests.unit.fakes import FakeKube


@pytest.mark.parametrize(("protobuf", "accept"), [(True, META_ACCEPT), (False, META_ACCEPT_JSON)])
def test_unchanged_objects_are_known_from_a_list_of_their_metadata(protobuf, accept):
    """Asked as protobuf only when the protobuf setting is on (JSON decodes too)."""
    kube = FakeKube()
    before, after = two_passes(kube, lambda k: None, protobuf)
    assert all(a is b for a, b in zip(before.of("Redis"), after.snapshot.of("Redis"), strict=True))
    assert {accept for kind, accept in kube.accepts if kind != "Namespace"} == {accept}
    assert not gets(kube)


@pytest.mark.parametrize(
    ("protobuf", "asked", "sent", "full_asked", "full_sent"),
    [
        (True, 0, 0, 0, [0, *[JSON_PAGE_SIZE] * 4]),
        (True, 7, 7, 9, [9] * 5),
        (False, 0, JSON_METADATA_PAGE_SIZE, 0, [JSON_PAGE_SIZE] * 5),
        (False, 7, 7, 9, [9] * 5),
    ],
)
def test_each_list_asks_its_own_page_size(protobuf, asked, sent, full_asked, full_sent):
    """By default everything read as it arrives comes in one page: metadata,
    and pods as protobuf. What is held whole (JSON) comes in pages."""
    kube = FakeKube()
    kube.held["Redis"] = [redis_obj(f"r{i}") for i in range(3)]
    first = observe(
        kube,
        (),
        None,
        ListSettings(protobuf=protobuf, page_size=full_asked, metadata_page_size=asked),
    )
    # Pod, Redis, Xca, Service, PodDisruptionBudget in full.
    assert [size for kind, size in kube.page_sizes if kind != "Namespace"] == full_sent
    kube.page_sizes.clear()
    observe(
        kube,
        (),
        None,
        ListSettings(protobuf=protobuf, page_size=full_asked, metadata_page_size=asked),
        previous=first.snapshot,
    )
    assert [size for kind, size in kube.page_sizes if kind != "Namespace"] == [sent] * 5
    assert (PAGE, FULL) == (0, 0)  # the defaults: one page


def test_pods_as_protobuf_are_read_as_they_arrive_with_the_selector():
    """A full LIST of pods goes to the streaming decoder, with the selector.
    FakeKube answers in JSON; tests/e2e/test_decode.py reads real protobuf."""
    pod = {
        "metadata": {
            "name": "p",
            "namespace": "a",
            "uid": "u",
            "resourceVersion": "1",
            "labels": {"app": "x"},
        },
        "status": {"phase": "Running"},
    }
    seen = {}
    for protobuf in (True, False):
        kube = FakeKube()
        kube.held["Pod"] = [
            pod,
            {**pod, "metadata": {**pod["metadata"], "name": "q", "labels": {}}},
        ]
        obs = observe(
            kube,
            (),
            "app=x",
            ListSettings(protobuf=protobuf, page_size=FULL, metadata_page_size=PAGE),
        )
        seen[protobuf] = (obs.snapshot.pods, obs.report_pods)
        listed = [c for c in kube.calls if c == ("LIST", "Pod")]
        assert len(listed) == 2  # every pod, then the report's selection
        assert kube.streamed == (["Pod", "Pod"] if protobuf else [])
    assert seen[True] == seen[False]
    assert [p.name for p in seen[True][1]] == ["p"]


def test_metadata_that_cannot_be_read_sends_the_kind_to_a_full_list(caplog):
    """A garbled answer to the cheap LIST costs that kind a full LIST, not the pass."""
    kube = FakeKube()

    def garble(k: FakeKube) -> None:
        k.scripted_metadata_bodies["Redis"] = (
            b"k8s\x00\x12\x05\x12\xff"  # an item longer than the list
        )

    _before, after = two_passes(kube, garble, protobuf=True)
    assert [r.name for r in after.snapshot.of("Redis")] == ["r0", "r1", "r2"]
    assert not after.errors
    listed = [size for kind, size in kube.page_sizes if kind == "Redis"]
    assert listed == [PAGE, JSON_PAGE_SIZE]  # the metadata LIST, then the full one
    assert "Redis: metadata unreadable" in caplog.text


def test_a_changed_or_new_object_is_fetched_alone_and_a_deleted_one_is_gone():
    def change(k: FakeKube) -> None:
        k.held["Redis"] = [redis_obj("r0"), redis_obj("r1", "2"), redis_obj("r3")]

    kube = FakeKube()
    before, after = two_passes(kube, change)
    redis = after.snapshot.of("Redis")
    assert [(r.name, r.resource_version) for r in redis] == [("r0", "1"), ("r1", "2"), ("r3", "1")]
    assert redis[0] is before.of("Redis")[0]
    assert sorted(c[1] for c in gets(kube)) == ["r1", "r3"]
    assert ("Redis", None) not in kube.accepts  # no full LIST


def test_an_object_gone_before_its_get_is_left_out():
    def change(k: FakeKube) -> None:
        k.held["Redis"] = [redis_obj("r0"), redis_obj("r1"), redis_obj("r2"), redis_obj("r9")]

        def deleted_meanwhile(verb: str, name: str) -> None:
            if (verb, name) == ("GET", "r9"):
                del k.objects[("Redis", "a", "r9")]

        k.on_call = deleted_meanwhile

    kube = FakeKube()
    _, after = two_passes(kube, change)  # r9 is listed, then deleted before its GET
    assert [r.name for r in after.snapshot.of("Redis")] == ["r0", "r1", "r2"]
    assert after.errors == ()


def test_past_fetch_max_changes_the_kind_is_listed_in_full():
    def change(k: FakeKube) -> None:
        k.held["Redis"] = [redis_obj(f"n{i}") for i in range(FETCH_MAX + 1)]

    kube = FakeKube()
    _, after = two_passes(kube, change)
    assert len(after.snapshot.of("Redis")) == FETCH_MAX + 1
    assert ("Redis", None) in kube.accepts
    assert not gets(kube)


def test_a_failed_get_falls_back_to_the_full_list():
    def change(k: FakeKube) -> None:
        k.held["Redis"] = [redis_obj("r0", "2"), redis_obj("r1"), redis_obj("r2")]
        k.scripted_errors[("GET", "r0")] = ApiError(500, "InternalError", "etcd is sad")

    kube = FakeKube()
    _, after = two_passes(kube, change)
    assert [r.resource_version for r in after.snapshot.of("Redis")] == ["2", "1", "1"]
    assert ("Redis", None) in kube.accepts
    assert after.errors == ()


def test_an_unreachable_cluster_is_asked_once_per_pass():
    """A LIST of metadata that cannot reach the cluster is that kind's failed
    LIST (retrying in full would only double the time to say so), and the
    LISTs after it fail with it unasked: against a dribbling apiserver, each
    would wait a timeout of its own."""

    def change(k: FakeKube) -> None:
        for kind in ("Pod", "Redis", "Xca", "Service", "PodDisruptionBudget"):
            k.scripted_errors[("LIST", kind)] = Unreachable("timed out")

    kube = FakeKube()
    _, after = two_passes(kube, change)
    lists = [kind for kind, _ in kube.accepts if kind != "Namespace"]
    assert lists == ["Pod"]
    assert after.unreachable == "cannot reach the cluster: timed out"
    assert after.snapshot.of("Redis") is None and len(after.errors) == 5


def test_a_cluster_without_credentials_is_asked_once_per_pass():
    """A plugin that failed (NoCredentials) fails the pass's other LISTs
    unasked, as an unreachable cluster does (issue 77, item 6)."""
    said = "exec plugin get-token: no answer in 60s"

    def change(k: FakeKube) -> None:
        for kind in ("Pod", "Redis", "Xca", "Service", "PodDisruptionBudget"):
            k.scripted_errors[("LIST", kind)] = NoCredentials(said)

    kube = FakeKube()
    _, after = two_passes(kube, change)
    lists = [kind for kind, _ in kube.accepts if kind != "Namespace"]
    assert lists == ["Pod"]
    assert after.unreachable == f"unauthorized: no credentials: {said}"
    assert after.snapshot.of("Redis") is None and len(after.errors) == 5


def test_an_unreadable_full_list_fails_that_kind_not_the_pass():
    """A garbled answer (a proxy, a broken server) is that LIST's error, as a
    refused one is: the other kinds are still observed and their status written."""

    class Garbled(FakeKube):
        def list_streamed(self, res, namespace, start, accept, page_size=None, selector=None):
            stream = start()
            stream.feed(b"k8s\x00\x12\x05\x12\xff")  # an item longer than the list
            return stream.close().items

    kube = Garbled()
    kube.held["Redis"] = [redis_obj("r0")]
    obs = observe(
        kube, (), None, ListSettings(protobuf=True, page_size=FULL, metadata_page_size=PAGE)
    )
    assert obs.snapshot.pods is None
    assert [r.name for r in obs.snapshot.of("Redis")] == ["r0"]
    (error,) = obs.errors
    assert error.startswith("LIST Pod: the answer could not be read"), error
    # What the Redis statuses will say: the same words every pass.
    assert obs.snapshot.pods_error == "LIST Pod: the answer could not be read"


@pytest.mark.parametrize(
    ("error", "lasting"),
    [
        (ApiError(403, "Forbidden", "pods is forbidden"), True),
        (ApiError(500, "InternalError", "etcd timed out"), False),
        (ApiError(429, "TooManyRequests", "slow down"), False),
    ],
)
def test_only_a_pod_list_refusal_that_will_last_is_told_to_the_statuses(error, lasting):
    kube = FakeKube()
    kube.scripted_errors[("LIST", "Pod")] = error
    kube.held["Redis"] = [redis_obj("r0")]
    obs = observe(
        kube, (), None, ListSettings(protobuf=True, page_size=FULL, metadata_page_size=PAGE)
    )
    assert obs.snapshot.pods is None and len(obs.errors) == 1
    want = f"LIST Pod: {error}" if lasting else None
    assert obs.snapshot.pods_error == want
