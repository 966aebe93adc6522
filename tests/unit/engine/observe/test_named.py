"""Observe, children by label and by name (engine/observe/named.py): pods,
Services and claims our LIST shows, and the wanted ones it does not."""

from __future__ import annotations

from reconciler.client.errors import ApiError
from reconciler.constants import MANAGED_POD_SELECTOR
from reconciler.engine.observe.lister import FETCH_MAX
from tests.unit.engine.observe.world import (
    cluster,
    gets,
    names,
    one_pass,
    pod_obj,
    redis_obj,
    service_gets,
    service_obj,
    services,
)


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
    kube.scripted_errors[("GET", "r-0")] = ApiError(500, "InternalError", "etcd timeout")
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
    kube.scripted_errors[("GET", "r-0")] = ApiError(
        403, "Forbidden", "pods is forbidden: cannot get"
    )
    seen = one_pass(kube)
    assert seen.snapshot.pods is None
    assert "cannot get" in (seen.snapshot.pods_error or "")


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
    kube.scripted_errors[("GET", "service/r")] = ApiError(500, "InternalError", "etcd is sad")
    seen = one_pass(kube)
    assert seen.snapshot.children["Service"] is None
    assert "Service" not in seen.snapshot.listed_children


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
    kube.held["PersistentVolumeClaim"] = [claim]
    kube.held["StorageClass"] = [
        {"metadata": {"name": "standard", "uid": "sc"}, "allowVolumeExpansion": True}
    ]
    seen = one_pass(kube)
    (found,) = seen.snapshot.children["StorageClass"]
    assert (found.name, found.spec) == ("standard", {"allowVolumeExpansion": True})
