"""Observe: the namespaces in scope (being deleted, or missing) and what a
failed LIST leaves out; the client is replaced by FakeKube."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from reconciler.buckets import Scope, bucket_of
from reconciler.client.errors import ApiError, Unreachable
from reconciler.client.protowire import META_ACCEPT, META_ACCEPT_JSON
from reconciler.config import Config
from reconciler.constants import LABEL_MANAGED_BY, MANAGED_BY, MANAGED_POD_SELECTOR
from reconciler.engine.observe import observe
from reconciler.engine.observe.lister import FETCH_MAX, JSON_METADATA_PAGE_SIZE, JSON_PAGE_SIZE
from reconciler.engine.observe.namespaces import PER_NAMESPACE_MAX
from reconciler.engine.plan import plan_pass
from reconciler.model import LABEL_BUCKET
from tests.unit.fakes import FakeKube

PAGE = Config().metadata_page_size
FULL = Config().page_size


def gets(kube: FakeKube) -> list[tuple[str, str]]:
    """The GETs of pods and of our objects, in order (the lookups of Services
    by name are tested on their own)."""
    return [c for c in kube.calls if c[0] == "GET" and "/" not in c[1]]


def ns_obj(name: str, phase: str = "Active") -> dict:
    return {"metadata": {"name": name}, "status": {"phase": phase}}


def test_all_namespaces_one_list_finds_those_being_deleted():
    kube = FakeKube()
    kube.lists["Namespace"] = [ns_obj("a"), ns_obj("b", "Terminating")]
    obs = observe(kube, (), None, protobuf=False, page_size=FULL, metadata_page_size=PAGE)
    assert obs.snapshot.terminating == {"b"}
    assert obs.warnings == ()


def test_a_scoped_namespace_is_read_by_name_and_a_missing_one_is_a_warning():
    kube = FakeKube()
    kube.objects[("Namespace", "", "a")] = ns_obj("a", "Terminating")
    obs = observe(
        kube, ("a", "nosuch"), None, protobuf=False, page_size=FULL, metadata_page_size=PAGE
    )
    assert obs.snapshot.terminating == {"a"}
    assert obs.warnings == ("namespace nosuch does not exist (is it a typo in the scope?)",)
    assert obs.errors == ()


def test_namespaces_that_cannot_be_read_hold_nothing_back_and_say_so():
    kube = FakeKube()
    kube.lists["Namespace"] = ApiError(403, "Forbidden", "namespaces is forbidden")
    obs = observe(kube, (), None, protobuf=False, page_size=FULL, metadata_page_size=PAGE)
    assert obs.snapshot.terminating == frozenset()
    (warning,) = obs.warnings
    assert warning.startswith("cannot read namespaces (403 Forbidden")
    assert obs.snapshot.of("Redis") == ()  # the rest of the pass goes on


# ------------------------------------------------------------ reuse across passes


def redis_obj(name: str, version: str = "1", num: int = 0) -> dict:
    """num 0 by default: these tests are about the objects, and a desired pod
    that no LIST shows would be looked up by name."""
    meta = {"name": name, "namespace": "a", "uid": f"uid-{name}", "resourceVersion": version}
    return {"metadata": meta, "spec": {"num": num}, "status": {}}


def two_passes(kube: FakeKube, change, protobuf: bool = False) -> tuple:
    kube.lists["Redis"] = [redis_obj(f"r{i}") for i in range(3)]
    first = observe(kube, (), None, protobuf=protobuf, page_size=FULL, metadata_page_size=PAGE)
    kube.accepts.clear()
    kube.page_sizes.clear()
    kube.calls.clear()
    change(kube)
    second = observe(
        kube,
        (),
        None,
        protobuf=protobuf,
        page_size=FULL,
        metadata_page_size=PAGE,
        previous=first.snapshot,
    )
    return first.snapshot, second


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
    kube.lists["Redis"] = [redis_obj(f"r{i}") for i in range(3)]
    first = observe(
        kube, (), None, protobuf=protobuf, page_size=full_asked, metadata_page_size=asked
    )
    # Pod, Redis, Xca, Service, PodDisruptionBudget in full.
    assert [size for kind, size in kube.page_sizes if kind != "Namespace"] == full_sent
    kube.page_sizes.clear()
    observe(
        kube,
        (),
        None,
        protobuf=protobuf,
        page_size=full_asked,
        metadata_page_size=asked,
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
        kube.lists["Pod"] = [
            pod,
            {**pod, "metadata": {**pod["metadata"], "name": "q", "labels": {}}},
        ]
        obs = observe(kube, (), "app=x", protobuf=protobuf, page_size=FULL, metadata_page_size=PAGE)
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
        k.metadata_bodies["Redis"] = b"k8s\x00\x12\x05\x12\xff"  # an item longer than the list

    _before, after = two_passes(kube, garble, protobuf=True)
    assert [r.name for r in after.snapshot.of("Redis")] == ["r0", "r1", "r2"]
    assert not after.errors
    listed = [size for kind, size in kube.page_sizes if kind == "Redis"]
    assert listed == [PAGE, JSON_PAGE_SIZE]  # the metadata LIST, then the full one
    assert "Redis: metadata unreadable" in caplog.text


def test_a_changed_or_new_object_is_fetched_alone_and_a_deleted_one_is_gone():
    def change(k: FakeKube) -> None:
        k.lists["Redis"] = [redis_obj("r0"), redis_obj("r1", "2"), redis_obj("r3")]
        k.objects[("Redis", "a", "r1")] = redis_obj("r1", "2")
        k.objects[("Redis", "a", "r3")] = redis_obj("r3")

    kube = FakeKube()
    before, after = two_passes(kube, change)
    redis = after.snapshot.of("Redis")
    assert [(r.name, r.resource_version) for r in redis] == [("r0", "1"), ("r1", "2"), ("r3", "1")]
    assert redis[0] is before.of("Redis")[0]
    assert sorted(c[1] for c in gets(kube)) == ["r1", "r3"]
    assert ("Redis", None) not in kube.accepts  # no full LIST


def test_an_object_gone_before_its_get_is_left_out():
    def change(k: FakeKube) -> None:
        k.lists["Redis"] = [redis_obj("r0"), redis_obj("r1"), redis_obj("r2"), redis_obj("r9")]

    kube = FakeKube()
    _, after = two_passes(kube, change)  # r9 is listed, but its GET finds nothing
    assert [r.name for r in after.snapshot.of("Redis")] == ["r0", "r1", "r2"]
    assert after.errors == ()


def test_past_fetch_max_changes_the_kind_is_listed_in_full():
    def change(k: FakeKube) -> None:
        k.lists["Redis"] = [redis_obj(f"n{i}") for i in range(FETCH_MAX + 1)]

    kube = FakeKube()
    _, after = two_passes(kube, change)
    assert len(after.snapshot.of("Redis")) == FETCH_MAX + 1
    assert ("Redis", None) in kube.accepts
    assert not gets(kube)


def _redis_lists(kube: FakeKube) -> list[str | None]:
    """The Accept of each LIST of Redis: None for a full LIST."""
    return [accept for kind, accept in kube.accepts if kind == "Redis"]


def test_a_kind_that_moved_past_fetch_max_is_listed_in_full_at_once_until_it_settles():
    """While a kind moves, its LIST of metadata would only precede the full
    one; once a full LIST finds it quiet, the next pass lists metadata again."""
    many = [redis_obj(f"r{i}") for i in range(FETCH_MAX + 1)]
    kube = FakeKube()
    kube.lists["Redis"] = many
    first = one_pass(kube)
    assert first.snapshot.churn == {}  # no pass before: nothing to compare with

    kube.lists["Redis"] = [redis_obj(r["metadata"]["name"], "2") for r in many]
    kube.accepts.clear()
    moved = one_pass(kube, first.snapshot)
    assert _redis_lists(kube) == [META_ACCEPT_JSON, None]  # as before: metadata, then in full
    assert moved.snapshot.churn["Redis"] == FETCH_MAX + 1

    kube.lists["Redis"] = [redis_obj(r["metadata"]["name"], "3") for r in many[:2]] + many[2:]
    kube.accepts.clear()
    at_once = one_pass(kube, moved.snapshot)
    assert _redis_lists(kube) == [None]
    assert at_once.snapshot.churn["Redis"] == FETCH_MAX + 1  # "1" again is not what it was at "2"

    kube.accepts.clear()
    still = one_pass(kube, at_once.snapshot)
    assert _redis_lists(kube) == [None]
    assert still.snapshot.churn["Redis"] == 0
    assert all(
        a is b
        for a, b in zip(at_once.snapshot.of("Redis"), still.snapshot.of("Redis"), strict=True)
    )

    kube.accepts.clear()
    one_pass(kube, still.snapshot)
    assert _redis_lists(kube) == [META_ACCEPT_JSON]


def test_a_kind_that_moved_a_little_keeps_its_list_of_metadata():
    kube = FakeKube()
    kube.lists["Redis"] = [redis_obj(f"r{i}") for i in range(FETCH_MAX + 1)]
    first = one_pass(kube)
    kube.lists["Redis"] = [redis_obj("r0", "2"), *kube.lists["Redis"][1:]]
    kube.objects[("Redis", "a", "r0")] = redis_obj("r0", "2")
    second = one_pass(kube, first.snapshot)
    assert second.snapshot.churn["Redis"] == 1
    kube.accepts.clear()
    one_pass(kube, second.snapshot)
    assert _redis_lists(kube) == [META_ACCEPT_JSON]


def test_a_failed_get_falls_back_to_the_full_list():
    def change(k: FakeKube) -> None:
        k.lists["Redis"] = [redis_obj("r0", "2"), redis_obj("r1"), redis_obj("r2")]
        k.errors[("GET", "r0")] = ApiError(500, "InternalError", "etcd is sad")

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
            k.lists[kind] = Unreachable("timed out")

    kube = FakeKube()
    _, after = two_passes(kube, change)
    lists = [kind for kind, _ in kube.accepts if kind != "Namespace"]
    assert lists == ["Pod"]
    assert after.unreachable == "cannot reach the cluster: timed out"
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
    kube.lists["Redis"] = [redis_obj("r0")]
    obs = observe(kube, (), None, protobuf=True, page_size=FULL, metadata_page_size=PAGE)
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
    kube.lists["Pod"] = error
    kube.lists["Redis"] = [redis_obj("r0")]
    obs = observe(kube, (), None, protobuf=True, page_size=FULL, metadata_page_size=PAGE)
    assert obs.snapshot.pods is None and len(obs.errors) == 1
    want = f"LIST Pod: {error}" if lasting else None
    assert obs.snapshot.pods_error == want


# ------------------------------------------------ pods: ours by label, the rest by name


def pod_obj(name: str, *, labelled: bool, owner: str | None = None, ns: str = "a") -> dict:
    meta: dict = {"name": name, "namespace": ns, "uid": f"pod-{ns}-{name}", "resourceVersion": "1"}
    if labelled:
        meta["labels"] = {LABEL_MANAGED_BY: MANAGED_BY}
    if owner is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": "myapp.demo.kubebuilder.io/v1",
                "kind": "Redis",
                "name": owner.removeprefix("uid-"),
                "uid": owner,
                "controller": True,
            }
        ]
    return {"metadata": meta, "spec": {"containers": []}, "status": {}}


def cluster(*pods: dict, redis: tuple[dict, ...] = ()) -> FakeKube:
    """Pods and Redis that a LIST shows and that a GET by name finds, as an apiserver does."""
    kube = FakeKube()
    kube.lists["Pod"] = list(pods)
    kube.lists["Redis"] = list(redis)
    for kind, objs in (("Pod", pods), ("Redis", redis)):
        for obj in objs:
            kube.objects[(kind, obj["metadata"]["namespace"], obj["metadata"]["name"])] = obj
    return kube


def one_pass(kube: FakeKube, previous=None, report: str | None = None):
    return observe(
        kube, (), report, protobuf=False, page_size=FULL, metadata_page_size=PAGE, previous=previous
    )


def names(pods) -> list[str]:
    return sorted(p.name for p in pods)


def test_only_labelled_pods_are_listed_and_others_cost_no_request():
    others = [pod_obj(f"web-{i}", labelled=False, ns="team") for i in range(200)]
    kube = cluster(
        pod_obj("r-0", labelled=True, owner="uid-r"),
        *others,
        redis=(redis_obj("r", num=1),),
    )
    seen = one_pass(kube)
    assert kube.selectors[0] == ("Pod", MANAGED_POD_SELECTOR)
    assert [s for kind, s in kube.selectors if kind == "Pod"] == [MANAGED_POD_SELECTOR]
    assert names(seen.snapshot.pods) == ["r-0"]
    assert not gets(kube)


def test_a_desired_name_held_without_our_label_is_found_by_name():
    """A foreign pod holding r-1, and our r-2 with its labels removed by hand:
    both are in the view; the unrelated unlabelled pod is not."""
    kube = cluster(
        pod_obj("r-0", labelled=True, owner="uid-r"),
        pod_obj("r-1", labelled=False),
        pod_obj("r-2", labelled=False, owner="uid-r"),
        pod_obj("unrelated", labelled=False),
        redis=(redis_obj("r", num=4),),
    )
    seen = one_pass(kube)
    assert names(seen.snapshot.pods) == ["r-0", "r-1", "r-2"]
    assert sorted(c[1] for c in gets(kube)) == ["r-1", "r-2", "r-3"]
    assert not seen.errors


def test_past_fetch_max_missing_names_one_list_of_every_pod_keeps_only_those_names():
    n = FETCH_MAX + 1
    kube = cluster(
        pod_obj("big-0", labelled=False),
        pod_obj("unrelated", labelled=False),
        redis=(redis_obj("big", num=n),),
    )
    seen = one_pass(kube)
    assert [s for kind, s in kube.selectors if kind == "Pod"] == [MANAGED_POD_SELECTOR, None]
    assert not gets(kube)
    assert names(seen.snapshot.pods) == ["big-0"]


def test_a_failed_lookup_by_name_fails_the_pod_view_not_just_that_name():
    kube = cluster(redis=(redis_obj("r", num=1),))
    kube.errors[("GET", "r-0")] = ApiError(500, "InternalError", "etcd timeout")
    seen = one_pass(kube)
    assert seen.snapshot.pods is None
    assert any("etcd timeout" in e for e in seen.errors)


def test_a_pod_found_late_whose_owner_is_newer_than_the_list_waits_a_pass():
    """r was deleted and made anew between the Redis LIST and the GET: its pod
    names an owner this pass did not list, and is left to the next pass."""
    kube = cluster(
        pod_obj("r-0", labelled=False, owner="uid-new-r"),
        redis=(redis_obj("r", num=1),),
    )
    seen = one_pass(kube)
    assert seen.snapshot.pods == ()
    assert not seen.errors


def test_the_daemon_lists_labelled_pods_by_metadata_and_looks_up_only_the_missing():
    kube = cluster(
        pod_obj("r-0", labelled=True, owner="uid-r"),
        pod_obj("r-1", labelled=False, owner="uid-r"),
        pod_obj("web", labelled=False),
        redis=(redis_obj("r", num=2),),
    )
    first = one_pass(kube)
    kube.calls.clear()
    kube.selectors.clear()
    again = one_pass(kube, previous=first.snapshot)
    assert [s for kind, s in kube.selectors if kind == "Pod"] == [MANAGED_POD_SELECTOR]
    assert gets(kube) == [("GET", "r-1")]
    assert names(again.snapshot.pods) == ["r-0", "r-1"]


def test_the_pod_report_of_our_pods_reuses_the_labelled_list():
    kube = cluster(pod_obj("r-0", labelled=True, owner="uid-r"), pod_obj("web", labelled=False))
    seen = one_pass(kube, report=MANAGED_POD_SELECTOR)
    assert names(seen.report_pods) == ["r-0"]
    assert [s for kind, s in kube.selectors if kind == "Pod"] == [MANAGED_POD_SELECTOR]


def test_a_lookup_by_name_refused_for_good_is_told_to_the_statuses():
    kube = cluster(redis=(redis_obj("r", num=1),))
    kube.errors[("GET", "r-0")] = ApiError(403, "Forbidden", "pods is forbidden: cannot get")
    seen = one_pass(kube)
    assert seen.snapshot.pods is None
    assert "cannot get" in (seen.snapshot.pods_error or "")


# ------------------------------------------------------------ a sharded replica


def bucketed(obj: dict, bucket: int | None) -> dict:
    """The object with this bucket label (None: none)."""
    meta = dict(obj["metadata"])
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k != LABEL_BUCKET}
    if bucket is not None:
        labels[LABEL_BUCKET] = str(bucket)
    return {**obj, "metadata": {**meta, "labels": labels}}


def sharded_cluster() -> tuple[FakeKube, dict[str, int]]:
    """Eight Redis, each labelled with its true bucket of 4 but r7, not
    labelled yet, and r6, labelled by hand with a bucket not its own."""
    true = {f"r{i}": bucket_of(f"uid-r{i}", 4) for i in range(8)}
    redis = [bucketed(redis_obj(n), b) for n, b in true.items() if n not in ("r6", "r7")]
    redis += [bucketed(redis_obj("r6"), (true["r6"] + 1) % 4), redis_obj("r7")]
    pods = [
        bucketed(pod_obj(f"{n}-0", labelled=True, owner=f"uid-{n}"), b) for n, b in true.items()
    ]
    return cluster(*pods, redis=tuple(redis)), true


def sharded_pass(kube: FakeKube, scope: Scope):
    return observe(
        kube,
        (),
        MANAGED_POD_SELECTOR,
        protobuf=False,
        page_size=FULL,
        metadata_page_size=PAGE,
        scope=scope,
    )


def test_a_sharded_replica_lists_its_buckets_and_what_is_not_labelled_in_one_list_a_kind():
    kube, true = sharded_cluster()
    held = frozenset({true["r7"], (true["r7"] + 1) % 4})
    seen = sharded_pass(kube, Scope(4, held, select=True))
    others = ",".join(str(b) for b in range(4) if b not in held)
    assert kube.selectors == [
        ("Pod", f"{MANAGED_POD_SELECTOR},{LABEL_BUCKET} notin ({others})"),
        ("Redis", f"{LABEL_BUCKET} notin ({others})"),
        ("Xca", f"{LABEL_BUCKET} notin ({others})"),
        ("Service", MANAGED_POD_SELECTOR),  # of every bucket: kept by their controller
        ("PodDisruptionBudget", MANAGED_POD_SELECTOR),
        ("Namespace", None),
    ]
    ours = {n for n, b in true.items() if b in held and n != "r6"}
    assert "r7" in ours  # not labelled yet, and listed
    assert {r.name for r in seen.snapshot.of("Redis")} == ours
    # r6's pod, if in these buckets, is left out with its owner: no orphan.
    assert names(seen.snapshot.pods) == sorted(f"{n}-0" for n in ours)


def test_the_pod_of_an_object_whose_label_was_changed_by_hand_is_no_orphan():
    kube, true = sharded_cluster()
    held = frozenset({true["r6"]})
    seen = sharded_pass(kube, Scope(4, held, select=True))
    assert "r6-0" not in names(seen.snapshot.pods)
    the_plan = plan_pass(seen.snapshot, Config(), datetime(2026, 11, 25, tzinfo=UTC))
    assert not [a for a in the_plan.actions if getattr(a, "why", "") == "owner gone"]


def test_what_carries_the_label_of_a_held_bucket_not_its_own_is_reported_not_kept():
    kube, true = sharded_cluster()
    label = (true["r6"] + 1) % 4  # r6's label, changed by hand
    held = frozenset({label}) - {true["r6"]}
    seen = sharded_pass(kube, Scope(4, held, select=True))
    assert "r6" not in {r.name for r in seen.snapshot.of("Redis")}
    assert seen.mislabelled == {true["r6"]}
    # Nothing is reported where labels and buckets agree.
    honest = sharded_pass(kube, Scope(4, frozenset({true["r6"]}), select=True))
    assert honest.mislabelled == frozenset()


def test_a_pod_under_the_label_of_a_held_bucket_not_its_controllers_is_reported():
    kube, true = sharded_cluster()
    wrong = (true["r1"] + 1) % 4
    kube.lists["Pod"] = [
        bucketed(pod_obj("r1-0", labelled=True, owner="uid-r1"), wrong),
    ]
    seen = sharded_pass(kube, Scope(4, frozenset({wrong}), select=True))
    assert "r1-0" not in names(seen.snapshot.pods)
    assert seen.mislabelled == {true["r1"]}


def test_a_full_pass_finds_an_object_whose_label_was_changed_by_hand():
    kube, true = sharded_cluster()
    held = frozenset({true["r6"]})
    selected = sharded_pass(kube, Scope(4, held, select=True))
    assert "r6" not in {r.name for r in selected.snapshot.of("Redis")}
    kube.selectors.clear()
    full = sharded_pass(kube, Scope(4, held, select=False))
    assert kube.selectors[:2] == [("Pod", MANAGED_POD_SELECTOR), ("Redis", None)]
    assert "r6" in {r.name for r in full.snapshot.of("Redis")}
    assert {r.name for r in full.snapshot.of("Redis")} == {n for n, b in true.items() if b in held}


def test_a_full_pass_after_a_selected_one_reads_metadata_and_gets_only_what_it_holds():
    """Listing everything costs a LIST of metadata: what is in scope and new
    is fetched by name, what is not is dropped unread."""
    kube, true = sharded_cluster()
    held = frozenset({true["r6"]})
    selected = sharded_pass(kube, Scope(4, held, select=True))
    got: list[tuple[str, str]] = []
    kube.on_call = lambda verb, name: got.append((verb, name))
    kube.streamed.clear()
    full = observe(
        kube,
        (),
        MANAGED_POD_SELECTOR,
        protobuf=False,
        page_size=FULL,
        metadata_page_size=PAGE,
        scope=Scope(4, held, select=False),
        previous=selected.snapshot,
    )
    # metadata only: no full LIST
    assert kube.streamed == ["Pod", "Redis", "Xca", "Service", "PodDisruptionBudget"]
    mine = {n for n, b in true.items() if b in held}
    # No Service exists yet: each one in scope is looked up by name.
    services = [f"service/{n}" for n in mine]
    assert sorted(n for verb, n in got if verb == "GET") == sorted(["r6", "r6-0", *services])
    assert {r.name for r in full.snapshot.of("Redis")} == mine


# ------------------------------------------------------------ pods by namespace


def test_across_all_namespaces_a_later_pass_lists_pods_where_ours_were_seen():
    kube = cluster(
        pod_obj("r-0", labelled=True, owner="uid-r"),
        pod_obj("web-0", labelled=False, ns="team"),
        redis=(redis_obj("r", num=1),),
    )
    first = one_pass(kube)
    assert ("Pod", None) in kube.scopes  # nothing known yet: every namespace
    kube.scopes.clear()
    second = one_pass(kube, previous=first.snapshot)
    assert [s for s in kube.scopes if s[0] == "Pod"] == [("Pod", "a")]
    assert names(second.snapshot.pods) == ["r-0"]
    # Services and budgets are few: one LIST across the cluster, as before.
    assert [s for s in kube.scopes if s[0] == "Service"] == [("Service", None)]
    assert [s for s in kube.scopes if s[0] == "PodDisruptionBudget"] == [
        ("PodDisruptionBudget", None)
    ]


def test_a_pod_in_a_namespace_new_since_the_last_pass_is_found_by_name():
    kube = cluster(pod_obj("r-0", labelled=True, owner="uid-r"), redis=(redis_obj("r", num=1),))
    first = one_pass(kube)
    new = {**redis_obj("s", num=1), "metadata": {**redis_obj("s")["metadata"], "namespace": "b"}}
    kube.lists["Redis"].append(new)
    kube.objects[("Redis", "b", "s")] = new
    pod = pod_obj("s-0", labelled=True, owner="uid-s", ns="b")
    kube.lists["Pod"].append(pod)
    kube.objects[("Pod", "b", "s-0")] = pod
    second = one_pass(kube, previous=first.snapshot)
    assert ("Pod", "b") not in kube.scopes
    assert names(second.snapshot.pods) == ["r-0", "s-0"]


def test_past_the_limit_of_namespaces_one_list_covers_them_all():
    objs = tuple(
        {**redis_obj(f"r{i}"), "metadata": {**redis_obj(f"r{i}")["metadata"], "namespace": f"n{i}"}}
        for i in range(PER_NAMESPACE_MAX + 1)
    )
    kube = cluster(redis=objs)
    first = one_pass(kube)
    kube.scopes.clear()
    one_pass(kube, previous=first.snapshot)
    assert [s for s in kube.scopes if s[0] == "Pod"] == [("Pod", None)]


# ------------------------------------------------------------ Services


def service_obj(name: str, *, labelled: bool, owner: str | None = None, ns: str = "a") -> dict:
    svc = pod_obj(name, labelled=labelled, owner=owner, ns=ns)
    svc["metadata"]["uid"] = f"svc-{ns}-{name}"
    return {"metadata": svc["metadata"], "spec": {"clusterIP": "None"}}


def services(kube: FakeKube, *objs: dict) -> None:
    kube.lists["Service"] = list(objs)
    for obj in objs:
        kube.objects[("Service", obj["metadata"]["namespace"], obj["metadata"]["name"])] = obj


def service_gets(kube: FakeKube) -> list[str]:
    return sorted(c[1] for c in kube.calls if c[0] == "GET" and c[1].startswith("service/"))


def test_services_carrying_our_label_cost_one_list_and_no_get():
    kube = cluster(redis=(redis_obj("r"), redis_obj("s")))
    services(kube, *(service_obj(n, labelled=True, owner=f"uid-{n}") for n in ("r", "s")))
    seen = one_pass(kube)
    assert ("Service", MANAGED_POD_SELECTOR) in kube.selectors
    assert service_gets(kube) == []
    assert sorted(c.name for c in seen.snapshot.children["Service"]) == ["r", "s"]


def test_a_wanted_service_the_list_does_not_show_is_looked_up_by_name():
    """Another's Service holding the name, ours with its labels removed, and
    none at all: each Redis's Service is looked up; what exists is seen."""
    kube = cluster(redis=(redis_obj("r"), redis_obj("s"), redis_obj("t")))
    services(
        kube,
        service_obj("r", labelled=False),
        service_obj("s", labelled=False, owner="uid-s"),
        service_obj("web", labelled=False),
    )
    seen = one_pass(kube)
    assert service_gets(kube) == ["service/r", "service/s", "service/t"]
    found = {c.name: c.controller_uid for c in seen.snapshot.children["Service"]}
    assert found == {"r": None, "s": "uid-s"}


def test_past_fetch_max_missing_services_one_list_of_every_service_in_scope():
    kube = cluster(redis=tuple(redis_obj(f"r{i}") for i in range(FETCH_MAX + 1)))
    services(
        kube, service_obj("r0", labelled=False, owner="uid-r0"), service_obj("web", labelled=False)
    )
    seen = one_pass(kube)
    assert [s for kind, s in kube.selectors if kind == "Service"] == [MANAGED_POD_SELECTOR, None]
    assert service_gets(kube) == []
    assert [c.name for c in seen.snapshot.children["Service"]] == ["r0"]


def test_a_failed_service_lookup_leaves_the_services_unlisted():
    kube = cluster(redis=(redis_obj("r"),))
    kube.errors[("GET", "service/r")] = ApiError(500, "InternalError", "etcd is sad")
    seen = one_pass(kube)
    assert seen.snapshot.children["Service"] is None
    assert "Service" not in seen.snapshot.listed_children


def test_pods_that_moved_past_fetch_max_are_listed_in_full_at_once():
    def pods(version: str) -> list[dict]:
        made = [pod_obj(f"p{i}", labelled=True) for i in range(FETCH_MAX + 1)]
        for pod in made:
            pod["metadata"]["resourceVersion"] = version
        return made

    kube = cluster(*pods("1"))
    first = one_pass(kube)
    kube.lists["Pod"] = pods("2")
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
    kube.lists["Pod"] = [{**p, "metadata": {**p["metadata"], "resourceVersion": "2"}} for p in made]
    moved = one_pass(kube, first.snapshot)
    at_once = one_pass(kube, moved.snapshot)
    assert at_once.snapshot.churn["Pod"] == 0
    kube.accepts.clear()
    one_pass(kube, at_once.snapshot)
    assert [accept for kind, accept in kube.accepts if kind == "Pod"] == [META_ACCEPT_JSON]


# ------------------------------------------------------------ claims, on demand


def test_claims_are_listed_only_while_a_redis_has_storage_and_classes_once_one_exists():
    """A cluster without storage pays no LIST of claims (and a role from
    before claims meets no 403); the classes follow the first claim."""
    kube = cluster(redis=(redis_obj("r"),))
    seen = one_pass(kube)
    assert "PersistentVolumeClaim" not in {kind for kind, _ in kube.selectors}
    assert seen.snapshot.children["PersistentVolumeClaim"] is None
    stored = redis_obj("r")
    stored["spec"] = {"num": 1, "storage": {"size": "1Gi"}}
    kube = cluster(redis=(stored,))
    seen = one_pass(kube)
    assert ("PersistentVolumeClaim", MANAGED_POD_SELECTOR) in kube.selectors
    assert seen.snapshot.children["PersistentVolumeClaim"] == ()
    assert "StorageClass" not in seen.snapshot.children  # no claim yet: nothing to grow
    claim = {
        "metadata": {
            "name": "data-r-0",
            "namespace": "a",
            "uid": "pvc",
            "resourceVersion": "1",
            "labels": {"app.kubernetes.io/managed-by": "reconciler"},
        },
        "spec": {"storageClassName": "standard"},
    }
    kube.lists["PersistentVolumeClaim"] = [claim]
    kube.lists["StorageClass"] = [
        {"metadata": {"name": "standard", "uid": "sc"}, "allowVolumeExpansion": True}
    ]
    seen = one_pass(kube)
    (found,) = seen.snapshot.children["StorageClass"]
    assert (found.name, found.spec) == ("standard", {"allowVolumeExpansion": True})
