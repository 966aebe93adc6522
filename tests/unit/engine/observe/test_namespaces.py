"""Observe, the namespaces in scope (engine/observe/namespaces.py): those
being deleted, those missing, and where the pods of a later pass are listed."""

from __future__ import annotations

from reconciler.client.errors import ApiError
from reconciler.engine.observe import observe
from reconciler.engine.observe.lister import ListSettings
from reconciler.engine.observe.namespaces import PER_NAMESPACE_MAX
from tests.unit.engine.observe.world import (
    FULL,
    PAGE,
    cluster,
    names,
    ns_obj,
    one_pass,
    pod_obj,
    redis_obj,
)
from tests.unit.fakes import FakeKube


def test_all_namespaces_one_list_finds_those_being_deleted():
    kube = FakeKube()
    kube.held["Namespace"] = [ns_obj("a"), ns_obj("b", "Terminating")]
    obs = observe(
        kube, (), None, ListSettings(protobuf=False, page_size=FULL, metadata_page_size=PAGE)
    )
    assert obs.snapshot.terminating == {"b"}
    assert obs.warnings == ()


def test_a_scoped_namespace_is_read_by_name_and_a_missing_one_is_a_warning():
    kube = FakeKube()
    kube.objects[("Namespace", "", "a")] = ns_obj("a", "Terminating")
    obs = observe(
        kube,
        ("a", "nosuch"),
        None,
        ListSettings(protobuf=False, page_size=FULL, metadata_page_size=PAGE),
    )
    assert obs.snapshot.terminating == {"a"}
    assert obs.warnings == ("namespace nosuch does not exist (is it a typo in the scope?)",)
    assert obs.errors == ()


def test_namespaces_that_cannot_be_read_hold_nothing_back_and_say_so():
    kube = FakeKube()
    kube.scripted_errors[("LIST", "Namespace")] = ApiError(
        403, "Forbidden", "namespaces is forbidden"
    )
    obs = observe(
        kube, (), None, ListSettings(protobuf=False, page_size=FULL, metadata_page_size=PAGE)
    )
    assert obs.snapshot.terminating == frozenset()
    (warning,) = obs.warnings
    assert warning.startswith("cannot read namespaces (403 Forbidden")
    assert obs.snapshot.of("Redis") == ()  # the rest of the pass goes on


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
    kube.objects[("Redis", "b", "s")] = new
    pod = pod_obj("s-0", labelled=True, owner="uid-s", ns="b")
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
