"""Observe: the namespaces in scope (being deleted, or missing) and what a
failed LIST leaves out; the client is replaced by FakeKube."""

from __future__ import annotations

from reconciler.kube import ApiError
from reconciler.observe import observe

from .fakes import FakeKube


def ns_obj(name: str, phase: str = "Active") -> dict:
    return {"metadata": {"name": name}, "status": {"phase": phase}}


def test_all_namespaces_one_list_finds_those_being_deleted():
    kube = FakeKube()
    kube.lists["Namespace"] = [ns_obj("a"), ns_obj("b", "Terminating")]
    obs = observe(kube, (), None, protobuf=False)
    assert obs.snapshot.terminating == {"b"}
    assert obs.warnings == ()


def test_a_scoped_namespace_is_read_by_name_and_a_missing_one_is_a_warning():
    kube = FakeKube()
    kube.objects[("Namespace", "", "a")] = ns_obj("a", "Terminating")
    obs = observe(kube, ("a", "nosuch"), None, protobuf=False)
    assert obs.snapshot.terminating == {"a"}
    assert obs.warnings == ("namespace nosuch does not exist (is it a typo in the scope?)",)
    assert obs.errors == ()


def test_namespaces_that_cannot_be_read_hold_nothing_back_and_say_so():
    kube = FakeKube()
    kube.lists["Namespace"] = ApiError(403, "Forbidden", "namespaces is forbidden")
    obs = observe(kube, (), None, protobuf=False)
    assert obs.snapshot.terminating == frozenset()
    (warning,) = obs.warnings
    assert warning.startswith("cannot read namespaces (403 Forbidden")
    assert obs.snapshot.of("Redis") == ()  # the rest of the pass goes on
