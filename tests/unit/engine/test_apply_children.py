"""The executor's writes of what a kind makes besides pods (a Service, a
budget) and of its objects' labels: each guarded as the rules asked, and
"next pass" for what another writer changed meanwhile."""

from __future__ import annotations

from reconciler.actions import DeleteChild, EventSpec, ObjRef, PatchChild, PatchLabels
from reconciler.client.errors import ApiError
from reconciler.model import ObjKey
from reconciler.result import Result
from tests.unit.engine.executing import executor, plan_of
from tests.unit.fakes import FakeKube, conflict

OWNER = ObjKey("Redis", "team-a", "r")
SERVICE = ObjKey("Service", "team-a", "r")
BUDGET = ObjKey("PodDisruptionBudget", "team-a", "r")
REPAIRED = EventSpec(
    ObjRef("v1", "Service", "team-a", "r", "uid-svc"), "Normal", "Repaired", "put back", "c"
)


def run(kube, *actions):
    return executor(kube, concurrency=2).run(plan_of(actions))


def results(report):
    return [o.result for o in report.outcomes]


def events_in(kube):
    return [o for (k, _, _), o in kube.objects.items() if k == "Event"]


def patch_service(event: EventSpec | None = REPAIRED) -> PatchChild:
    body = {"metadata": {"labels": {"a": "b"}}, "spec": {"clusterIP": "None"}}
    return PatchChild(OWNER, SERVICE, "7", body, "drift", event)


def test_a_child_patch_carries_the_version_observed_beside_its_own_metadata():
    kube = FakeKube()
    kube.held.add("Service", "team-a", "r", "uid-svc", "7")
    action = patch_service()
    assert results(run(kube, action)) == [Result.OK]
    ((kind, name, body, sub),) = kube.patches
    assert (kind, name, sub) == ("Service", "r", "")
    assert body == {
        "metadata": {"labels": {"a": "b"}, "resourceVersion": "7"},
        "spec": {"clusterIP": "None"},
    }
    assert kube.writes[0][:4] == ("PATCH", "Service", "team-a", "r")
    assert action.body == {"metadata": {"labels": {"a": "b"}}, "spec": {"clusterIP": "None"}}
    assert [e["reason"] for e in events_in(kube)] == ["Repaired"]


def test_a_child_patch_without_metadata_of_its_own_still_sends_the_version():
    kube = FakeKube()
    kube.held.add("Service", "team-a", "r", "uid-svc", "7")
    run(kube, PatchChild(OWNER, SERVICE, "7", {"spec": {"x": 1}}, "drift"))
    ((_, _, body, _),) = kube.patches
    assert body == {"metadata": {"resourceVersion": "7"}, "spec": {"x": 1}}
    assert events_in(kube) == []


def test_a_child_changed_or_gone_meanwhile_is_the_next_passs_and_says_nothing():
    for error, want in (
        (conflict(), Result.CONFLICT),
        (ApiError(404, "NotFound", "gone"), Result.GONE),
    ):
        kube = FakeKube()
        kube.scripted_errors[("PATCH", "r")] = error
        assert results(run(kube, patch_service())) == [want]
        assert events_in(kube) == []


def test_labels_are_merged_with_the_version_our_last_patch_of_the_object_made():
    kube = FakeKube()
    kube.held.add("Redis", "team-a", "r", "uid-r", "10")
    first = PatchLabels(OWNER, "10", {"bucket": "3"}, "shard")
    second = PatchLabels(OWNER, "10", {"other": "x"}, "again")
    assert results(run(kube, first, second)) == [Result.OK, Result.OK]  # no 409
    bodies = [(kind, sub, body) for kind, _, body, sub in kube.patches]
    after_first = bodies[1][2]["metadata"]["resourceVersion"]
    assert after_first != "10"
    assert bodies == [
        ("Redis", "", {"metadata": {"labels": {"bucket": "3"}, "resourceVersion": "10"}}),
        ("Redis", "", {"metadata": {"labels": {"other": "x"}, "resourceVersion": after_first}}),
    ]
    labels = kube.objects[("Redis", "team-a", "r")]["metadata"]["labels"]
    assert labels == {"bucket": "3", "other": "x"}


def test_a_label_patch_refused_409_is_the_next_passs():
    kube = FakeKube()
    kube.scripted_errors[("PATCH", "r")] = conflict()
    assert results(run(kube, PatchLabels(OWNER, "10", {"bucket": "3"}, "shard"))) == [
        Result.CONFLICT
    ]


def test_a_child_is_deleted_with_its_uid_as_precondition():
    kube = FakeKube()
    kube.held.add("PodDisruptionBudget", "team-a", "r", "uid-pdb", "1")
    assert results(run(kube, DeleteChild(OWNER, BUDGET, "uid-pdb", "one pod"))) == [Result.OK]
    assert kube.writes == [("DELETE", "PodDisruptionBudget", "team-a", "r", "uid-pdb")]


def test_a_child_gone_or_replaced_before_its_delete_is_gone():
    for error in (ApiError(404, "NotFound", "gone"), conflict("uid precondition")):
        kube = FakeKube()
        kube.scripted_errors[("DELETE", "r")] = error
        assert results(run(kube, DeleteChild(OWNER, BUDGET, "uid-pdb", "x"))) == [Result.GONE]


def test_any_other_refusal_of_a_child_delete_fails_the_object():
    kube = FakeKube()
    kube.scripted_errors[("DELETE", "r")] = ApiError(403, "Forbidden", "no")
    report = run(kube, DeleteChild(OWNER, BUDGET, "uid-pdb", "x"))
    assert results(report) == [Result.FAILED]
