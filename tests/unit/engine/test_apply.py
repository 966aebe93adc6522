"""The executor: ordering, per-object isolation, 404/409 handling, failure memory."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from reconciler.actions import EventSpec, ObjRef, PatchStatus, Plan
from reconciler.client.errors import ApiError, Unreachable
from reconciler.engine.events import merge_pod_events
from reconciler.engine.plan import plan_pass
from reconciler.kinds.redis.identity import FINALIZER
from reconciler.model import ObjKey
from reconciler.result import Result
from tests.unit.builders import CONFIG, NOW, plan_redis, pod, redis, snap, xca
from tests.unit.engine.executing import Fence, executor, plan_of
from tests.unit.fakes import FakeKube, conflict
from tests.unit.stored import holding

OK, GONE, CONFLICT = Result.OK, Result.GONE, Result.CONFLICT
FAILED, SKIPPED = Result.FAILED, Result.SKIPPED


def status_of(actions):
    (patch,) = [a for a in actions if a.verb == "patch-status"]
    return patch


def run(kube, actions):
    return executor(kube, concurrency=4).run(plan_of(actions))


def results(report):
    return [(o.action.verb, o.result) for o in report.outcomes]


def test_actions_of_one_object_run_in_order_and_thread_the_resource_version():
    r = redis(num=1, finalizers=())
    kube = holding(r)
    report = run(kube, plan_redis(r, [], CONFIG, NOW))
    # The status patch landed: a patch with the version observed would be a 409.
    assert results(report) == [("patch-finalizers", OK), ("create", OK), ("patch-status", OK)]
    writes = [c for c in kube.calls if c[0] in ("POST", "PATCH", "PATCH/status")]
    assert [c[0] for c in writes][:2] == ["PATCH", "POST"]
    fin, status = kube.patches[0][2], kube.patches[1][2]
    assert fin["metadata"]["resourceVersion"] == "10"
    # Our own finalizer patch bumped the version; the status patch uses the new one.
    assert status["metadata"]["resourceVersion"] not in ("10", None)


def test_events_are_posted_after_successful_writes():
    kube = FakeKube()
    run(kube, plan_redis(redis(num=1), [], CONFIG, NOW))
    events = [o for (k, _, _), o in kube.objects.items() if k == "Event"]
    assert [(e["reason"], e["type"]) for e in events] == [("CreatePod", "Normal")]
    assert events[0]["involvedObject"]["kind"] == "Redis"
    assert events[0]["source"]["component"] == "redis-controller"


def test_failure_stops_that_object_only():
    a, b = redis("a", num=2), redis("b", num=1)
    kube = holding(a, b)
    kube.scripted_errors[("POST", "a-1")] = ApiError(
        422, "Invalid", "spec.containers[0].image: bad"
    )
    actions = plan_redis(a, [], CONFIG, NOW) + plan_redis(b, [], CONFIG, NOW)
    report = run(kube, actions)
    by_owner = {}
    for o in report.outcomes:
        by_owner.setdefault(o.action.owner.name, []).append(o.result)
    assert by_owner["a"] == [OK, FAILED, SKIPPED]  # status not written on a failure
    assert by_owner["b"] == [OK, OK]
    (failed,) = report.failed()
    assert failed.reason == "InvalidObject" and "spec.containers[0].image" in failed.error


def test_conflict_and_not_found_mean_next_pass():
    kube = FakeKube()
    r = redis(num=0, finalizers=())
    kube.scripted_errors[("PATCH", "r")] = conflict()
    report = run(kube, plan_redis(r, [], CONFIG, NOW))
    assert results(report) == [("patch-finalizers", CONFLICT), ("patch-status", SKIPPED)]
    assert report.failed() == []
    kube = FakeKube()
    kube.scripted_errors[("PATCH/status", "r")] = ApiError(404, "NotFound", "gone")
    assert results(run(kube, plan_redis(redis(num=0), [], CONFIG, NOW))) == [("patch-status", GONE)]


def test_already_exists_is_fine_for_our_own_pod():
    kube = FakeKube()
    r = redis(num=1)
    actions = plan_redis(r, [], CONFIG, NOW)
    create = actions[0]
    kube.objects[("Pod", "default", "r-0")] = create.manifest
    kube.scripted_errors[("POST", "r-0")] = ApiError(409, "AlreadyExists", "exists")
    assert results(run(kube, actions))[0] == ("create", OK)


def test_already_exists_for_a_foreign_pod_is_a_conflict_failure():
    kube = FakeKube()
    kube.objects[("Pod", "default", "r-0")] = {"metadata": {"name": "r-0"}}
    kube.scripted_errors[("POST", "r-0")] = ApiError(409, "AlreadyExists", "exists")
    report = run(kube, plan_redis(redis(num=1), [], CONFIG, NOW))
    (failed,) = report.failed()
    assert failed.reason == "PodConflict" and "not owned" in failed.error


def test_delete_of_a_gone_pod_is_not_an_error():
    r = redis(num=0)
    kube = FakeKube()
    kube.scripted_errors[("DELETE", "r-0")] = ApiError(404, "NotFound", "gone")
    report = run(kube, plan_redis(r, [pod(r, 0, ready=False)], CONFIG, NOW))
    assert results(report)[0] == ("delete", GONE)


def test_unreachable_is_a_failure():
    kube = FakeKube()
    kube.scripted_errors[("PATCH/status", "x")] = Unreachable("connection refused")
    report = run(kube, plan_pass(snap((), (xca(),), ()), CONFIG, NOW).actions)
    assert [o.result for o in report.outcomes] == [FAILED]


def test_dry_run_writes_nothing():
    kube = FakeKube()
    actions = plan_redis(redis(finalizers=()), [], CONFIG, NOW)
    report = executor(kube, concurrency=2, dry_run=True).run(plan_of(actions))
    assert kube.calls == [] and {o.result for o in report.outcomes} == {"dry-run"}


def test_failure_is_reported_as_a_warning_event_on_the_object():
    from reconciler.actions import ObjRef

    r = redis(num=1)
    kube = FakeKube()
    kube.scripted_errors[("POST", "r-0")] = ApiError(
        422, "Invalid", "spec.containers[0].image: bad"
    )
    refs = {r.key: ObjRef("myapp.demo.kubebuilder.io/v1", "Redis", "default", "r", r.uid)}
    executor(kube).run(plan_of(plan_redis(r, [], CONFIG, NOW), refs))
    (event,) = [o for (k, _, _), o in kube.objects.items() if k == "Event"]
    assert (event["type"], event["reason"]) == ("Warning", "FailedCreatePod")
    assert "spec.containers[0].image" in event["message"]
    assert event["involvedObject"]["uid"] == r.uid


def test_pod_events_of_one_pass_are_merged_per_object_and_reason():
    kube = FakeKube()
    run(kube, plan_redis(redis(num=3), [], CONFIG, NOW))
    events = [o for (k, _, _), o in kube.objects.items() if k == "Event"]
    assert [e["message"] for e in events] == ["Created pods r-0, r-1, r-2: scale up"]


def test_merge_keeps_different_reasons_and_single_events_apart():
    from reconciler.actions import EventSpec, ObjRef, pod_event
    from reconciler.engine.events import merge_pod_events

    ref = ObjRef("v1", "Redis", "ns", "r", "u")
    other = ObjRef("v1", "Redis", "ns", "s", "u2")

    def ev(pod, why, ref=ref, reason="CreatePod"):
        return pod_event(ref, reason, [pod], why, "redis-controller")

    # Looks like a pod event but is not one: merging never reads the text.
    lookalike = EventSpec(ref, "Normal", "CreatePod", "Created pod r-9: scale up", "x")
    plain = EventSpec(ref, "Normal", "CreatePod", "Something else entirely", "redis-controller")
    merged = merge_pod_events(
        [
            ev("r-0", "scale up"),
            ev("r-1", "deleted by hand"),
            ev("r-2", "scale up"),
            ev("r-5", "scale down to 3", reason="DeletePod"),
            ev("r-6", "scale down to 3", reason="DeletePod"),
            ev("s-0", "scale up", ref=other),
            lookalike,
            plain,
            plain,
        ]
    )
    assert [(m.message, m.pods) for m in merged] == [
        ("Created pods r-0, r-2: scale up", ("r-0", "r-2")),
        ("Created pod r-1: deleted by hand", ("r-1",)),
        ("Deleted pods r-5, r-6: scale down to 3", ("r-5", "r-6")),
        ("Created pod s-0: scale up", ("s-0",)),
        ("Created pod r-9: scale up", ()),
        ("Something else entirely", ()),
        ("Something else entirely", ()),
    ]
    assert merged[0].why == "scale up" and merged[2].reason == "DeletePod"


def test_merged_event_name_is_unchanged():
    """The event name hashes the message, so a batch posted by an older
    version is found (and counted) again, not posted anew."""
    from reconciler.actions import ObjRef, pod_event
    from reconciler.engine.events import event_name, merge_pod_events

    ref = ObjRef("myapp.demo.kubebuilder.io/v1", "Redis", "default", "r", "uid-default-r")
    (merged,) = merge_pod_events(
        [pod_event(ref, "CreatePod", [f"r-{i}"], "scale up", "redis-controller") for i in range(3)]
    )
    assert merged.message == "Created pods r-0, r-1, r-2: scale up"
    assert event_name(merged) == "r.6cee7e4adda2d104"  # as named before the change


def test_events_of_successful_writes_are_posted_even_when_a_later_write_fails():
    kube = FakeKube()
    kube.scripted_errors[("POST", "r-2")] = ApiError(500, "InternalError", "etcd")
    run(kube, plan_redis(redis(num=3), [], CONFIG, NOW))
    events = [o["message"] for (k, _, _), o in kube.objects.items() if k == "Event"]
    assert events == ["Created pods r-0, r-1: scale up"]


# ------------------------------------------------------------ each action, each answer


def events_in(kube):
    return [o for (k, _, _), o in kube.objects.items() if k == "Event"]


def test_losing_the_lease_mid_pass_skips_every_later_object():
    a, b = redis("a", num=1), redis("b", num=1)
    kube = holding(a, b)
    answers = iter([True, True, False, False])
    actions = plan_redis(a, [], CONFIG, NOW) + plan_redis(b, [], CONFIG, NOW)
    report = executor(kube, fence=Fence(lambda bucket: next(answers))).run(plan_of(actions))
    by_owner = {}
    for o in report.outcomes:
        by_owner.setdefault(o.action.owner.name, []).append(o.result)
    assert by_owner == {"a": [OK, OK], "b": [SKIPPED, SKIPPED]}
    assert ("POST", "b-0") not in kube.calls


def test_each_write_is_checked_so_a_bucket_lost_between_two_writes_stops_the_object():
    kube = FakeKube()
    asked = []

    def may_write(bucket):
        asked.append(bucket)
        return len(asked) == 1

    actions = plan_redis(redis("a", num=1), [], CONFIG, NOW)
    report = executor(kube, fence=Fence(may_write)).run(plan_of(actions))
    assert [o.result for o in report.outcomes] == [OK, SKIPPED]
    assert asked == ["a", "a"]


def test_a_delete_error_other_than_not_found_is_a_failure():
    r = redis(num=0)
    kube = FakeKube()
    kube.scripted_errors[("DELETE", "r-0")] = ApiError(403, "Forbidden", "no")
    report = run(kube, plan_redis(r, [pod(r, 0, ready=False)], CONFIG, NOW))
    assert results(report) == [("delete", FAILED), ("patch-status", SKIPPED)]
    (failed,) = report.failed()
    assert failed.error == "403 Forbidden: no" and failed.reason == "Forbidden"


def test_a_successful_delete_is_ok_and_posts_its_event():
    r = redis(num=0)
    kube = FakeKube()
    kube.objects[("Pod", "default", "r-0")] = {"metadata": {"name": "r-0"}}
    report = run(kube, plan_redis(r, [pod(r, 0, ready=False)], CONFIG, NOW))
    assert results(report)[0] == ("delete", OK)
    assert ("Pod", "default", "r-0") not in kube.objects
    assert [e["message"] for e in events_in(kube)] == ["Deleted pod r-0: scale down to 0"]


def test_a_delete_without_an_event_posts_none():
    from reconciler.actions import DeletePod

    kube = holding(pod(None, 0, name="gone-0"))
    orphan = DeletePod(redis().key, "default", "gone-0", None, "owner gone")
    assert results(run(kube, [orphan])) == [("delete", OK)]
    assert events_in(kube) == []


def test_events_attached_to_a_status_patch_are_posted_once_it_lands():
    r = redis(num=2)
    kube = holding(r)
    patch = status_of(plan_redis(r, [pod(r, 0), pod(r, 1, owner_uid="x")], CONFIG, NOW))
    assert results(run(kube, [patch])) == [("patch-status", OK)]
    assert [(e["type"], e["reason"]) for e in events_in(kube)] == [("Warning", "PodConflict")]
    kube = FakeKube()
    kube.scripted_errors[("PATCH/status", "r")] = conflict()
    assert results(run(kube, [patch])) == [("patch-status", CONFLICT)]
    assert events_in(kube) == []


def test_already_exists_then_not_found_is_a_conflict_for_the_next_pass():
    kube = FakeKube()
    kube.scripted_errors[("POST", "r-0")] = ApiError(409, "AlreadyExists", "exists")
    report = run(kube, plan_redis(redis(num=1), [], CONFIG, NOW))
    assert results(report) == [("create", CONFLICT), ("patch-status", SKIPPED)]
    assert report.failed() == []


def test_already_exists_then_a_failed_get_is_a_failure():
    kube = FakeKube()
    kube.scripted_errors[("POST", "r-0")] = ApiError(409, "AlreadyExists", "exists")
    kube.scripted_errors[("GET", "r-0")] = ApiError(500, "InternalError", "etcd")
    report = run(kube, plan_redis(redis(num=1), [], CONFIG, NOW))
    assert results(report)[0] == ("create", FAILED)


def test_failure_events_carry_the_kind_of_the_object():
    """The plan names the object its events are about (`Plan.owners`)."""
    x = xca()
    kube = FakeKube()
    kube.scripted_errors[("PATCH/status", "x")] = ApiError(422, "Invalid", "status.active: bad")
    report = executor(kube).run(plan_pass(snap((), (x,), ()), CONFIG, NOW))
    assert report.failed()[0].reason == "InvalidObject"
    (event,) = events_in(kube)
    assert (event["reason"], event["source"]["component"]) == (
        "FailedUpdateStatus",
        "xca-controller",
    )
    involved = event["involvedObject"]
    assert (involved["apiVersion"], involved["kind"], involved["uid"]) == (
        "apps.xca.k8s.kb.cx/v1beta1",
        "Xca",
        x.uid,
    )
    assert (
        event["message"]
        == f"patch xca {x.key} status (active, last_update_time): 422 Invalid: status.active: bad"
    )


def test_failure_reason_per_verb():
    from reconciler.actions import ObjRef

    r = redis(num=0, finalizers=())
    kube = FakeKube()
    kube.scripted_errors[("PATCH", "r")] = ApiError(500, "InternalError", "etcd")
    refs = {r.key: ObjRef("v1", "Redis", "default", "r", r.uid)}
    executor(kube).run(plan_of(plan_redis(r, [], CONFIG, NOW), refs))
    (event,) = events_in(kube)
    assert (event["reason"], event["source"]["component"]) == (
        "FailedUpdateFinalizers",
        "redis-controller",
    )


def test_a_patch_uses_the_resource_version_it_observed_and_the_status_subresource():
    r = redis(num=0)
    kube = holding(r)
    run(kube, plan_redis(r, [], CONFIG, NOW))
    ((kind, name, body, sub),) = kube.patches
    assert (kind, name, sub) == ("Redis", "r", "status")
    assert body["metadata"] == {"resourceVersion": "10"}
    assert body["status"]["replicas"] == 0


# ------------------------------------------------------------ requests, logs, concurrency


def test_each_write_names_its_namespace_uid_and_subresource():
    r = redis("r", "team-a", num=1, finalizers=())
    stale = pod(r, 1)
    kube = holding(r, stale)
    run(kube, plan_redis(r, [stale], CONFIG, NOW))
    assert [w for w in kube.writes if w[1] != "Event"] == [
        ("PATCH", "Redis", "team-a", "r", ""),
        ("EVICT", "Pod", "team-a", "r-1", stale.uid),
        ("POST", "Pod", "team-a", "r-0", None),
        ("PATCH", "Redis", "team-a", "r", "status"),
    ]
    assert kube.patches[0][2]["metadata"] == {"finalizers": [FINALIZER], "resourceVersion": "10"}


def test_a_later_patch_of_the_same_object_uses_the_version_our_last_patch_made():
    from reconciler.actions import PatchFinalizers

    r = redis(num=0)
    status = status_of(plan_redis(r, [], CONFIG, NOW))
    release = PatchFinalizers(r.key, r.resource_version, (), "test")
    kube = holding(r)
    report = run(kube, [status, release])
    assert results(report) == [("patch-status", OK), ("patch-finalizers", OK)]
    (first, second) = [p[2]["metadata"]["resourceVersion"] for p in kube.patches]
    assert first == "10" and second not in ("10", None)
    # An answer without a resourceVersion: keep the one we sent.
    kube = holding(r)
    kube.scripted_patch_answer = {}
    run(kube, [status, release])
    assert [p[2]["metadata"]["resourceVersion"] for p in kube.patches] == ["10", "10"]


def test_a_patch_of_something_not_of_our_kinds_is_a_bug():
    from reconciler.actions import PatchStatus

    with pytest.raises(TypeError, match="not one of our kinds: Pod"):
        run(FakeKube(), [PatchStatus(ObjKey("Pod", "ns", "p"), "1", {})])


def test_an_unreachable_apiserver_fails_the_object_with_its_message():
    kube = FakeKube()
    kube.scripted_errors[("POST", "r-0")] = Unreachable("https://127.0.0.1:1: connection refused")
    (failed,) = run(kube, plan_redis(redis(num=1), [], CONFIG, NOW)).failed()
    assert (failed.error, failed.reason) == (
        "https://127.0.0.1:1: connection refused",
        "ReconcileError",
    )


def test_already_exists_under_another_controller_is_a_pod_conflict_event():
    from reconciler.actions import ObjRef

    r = redis(num=1)
    kube = FakeKube()
    other = {"metadata": {"ownerReferences": [{"controller": True, "uid": "other"}]}}
    kube.objects[("Pod", "default", "r-0")] = other
    kube.scripted_errors[("POST", "r-0")] = ApiError(409, "AlreadyExists", "exists")
    refs = {r.key: ObjRef("v1", "Redis", "default", "r", r.uid)}
    report = executor(kube).run(plan_of(plan_redis(r, [], CONFIG, NOW), refs))
    (failed,) = report.failed()
    assert failed.reason == "PodConflict"
    assert failed.error == "pod r-0 already exists and is not owned by this Redis"
    (event,) = events_in(kube)
    assert (event["type"], event["reason"]) == ("Warning", "PodConflict")


def test_each_action_is_logged_with_its_object_result_and_pass(caplog):
    caplog.set_level(logging.INFO, logger="reconciler.engine.apply")
    kube = FakeKube()
    kube.scripted_errors[("POST", "r-1")] = ApiError(500, "InternalError", "etcd")
    executor(kube, pass_id="p1").run(plan_of(plan_redis(redis(num=2), [], CONFIG, NOW)))
    lines = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert lines == [
        ("INFO", "[default/r] create pod default/r-0 (Created pod r-0: scale up) -> ok"),
        (
            "WARNING",
            "[default/r] create pod default/r-1 (Created pod r-1: scale up):"
            " 500 InternalError: etcd -> failed",
        ),
    ]
    first = caplog.records[0]
    assert (first.object, first.kind, first.action, first.result, first.pass_id) == (
        "default/r",
        "Redis",
        "create",
        "ok",
        "p1",
    )


def test_dry_run_logs_each_action(caplog):
    caplog.set_level(logging.INFO, logger="reconciler.engine.apply")
    executor(FakeKube(), dry_run=True).run(plan_of(plan_redis(redis(num=0), [], CONFIG, NOW)))
    (record,) = caplog.records
    assert record.getMessage().endswith("-> dry-run") and record.pass_id == ""


@pytest.mark.parametrize("concurrency", [1, 2])
def test_objects_are_written_concurrently_up_to_the_bound(concurrency):
    lock, state = threading.Lock(), {"now": 0, "most": 0, "threads": set()}

    def slow(verb, name):
        with lock:
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
            state["threads"].add(threading.current_thread().name)
        time.sleep(0.05)
        with lock:
            state["now"] -= 1

    kube = FakeKube()
    kube.on_call = slow
    actions = [a for i in range(6) for a in plan_redis(redis(f"r{i}", num=0), [], CONFIG, NOW)]
    executor(kube, concurrency=concurrency).run(plan_of(actions))
    assert state["most"] == concurrency
    assert all(name.startswith("apply") for name in state["threads"])


def test_a_long_pass_logs_its_progress_every_few_seconds(caplog, monkeypatch):
    """Every EVERY (5) seconds of a pass: objects done, rate and time left."""
    from types import SimpleNamespace

    from reconciler.engine import apply

    caplog.set_level(logging.INFO, logger="reconciler.engine.apply")
    ticks = iter([100.0, 104.0, 105.0, 109.0, 110.0])  # the start, then after each object
    monkeypatch.setattr(apply, "time", SimpleNamespace(monotonic=lambda: next(ticks)))
    actions = [a for i in range(4) for a in plan_redis(redis(f"r{i}", num=0), [], CONFIG, NOW)]
    executor(FakeKube(), pass_id="p9").run(plan_of(actions))
    progress = [r for r in caplog.records if "applied" in r.getMessage()]
    # +4 s: too soon; +5 s: logged; +9 s: 4 s after that line; the last object: done.
    assert [r.getMessage() for r in progress] == [
        "pass p9: applied 2/4 objects (0/s, about 5s left)"
    ]
    assert progress[0].pass_id == "p9"


def test_merging_never_drops_an_event_that_carries_no_why():
    from reconciler.actions import EventSpec, ObjRef

    ref = ObjRef("v1", "Redis", "ns", "r", "u")
    a = EventSpec(ref, "Normal", "Other", "a", "c", pods=("r-0",))
    b = EventSpec(ref, "Normal", "Other", "b", "c", pods=("r-1",))
    assert merge_pod_events([a, b]) == [a, b]
    lone = EventSpec(ref, "Normal", "CreatePod", "custom text", "c", ("r-0",), "scale up")
    assert merge_pod_events([lone]) == [lone]


def test_refusals_are_named_for_what_a_user_must_do():
    from reconciler.engine.failures import failure_reason

    quota = 'pods "r-2" is forbidden: exceeded quota: q, requested: pods=1, used: pods=2'
    assert failure_reason(ApiError(403, "Forbidden", quota)) == "QuotaExceeded"
    assert failure_reason(ApiError(403, "Forbidden", "cannot create pods")) == "Forbidden"
    assert failure_reason(ApiError(422, "Invalid", "bad")) == "InvalidObject"
    assert failure_reason(ApiError(500, "InternalError", "etcd")) == "ReconcileError"


def test_one_warning_per_failure_the_status_event_when_there_is_one():
    from reconciler.actions import EventSpec, ObjRef

    r = redis(num=1)
    ref = ObjRef("v1", "Redis", "default", "r", r.uid)
    degraded = EventSpec(ref, "Warning", "QuotaExceeded", "exceeded quota", "redis-controller")

    def status_after(key, error, landed):
        return [PatchStatus(key, "10", {"replicas": 0}, (degraded,))]

    kube = holding(r)
    kube.scripted_errors[("POST", "r-0")] = ApiError(403, "Forbidden", "exceeded quota: q")
    executor(kube).run(plan_of(plan_redis(r, [], CONFIG, NOW), {r.key: ref}, status_after))
    assert [(e["type"], e["reason"]) for e in events_in(kube)] == [("Warning", "QuotaExceeded")]
    # Without a status event, the executor's own Warning names the failed write.
    kube = holding(r)
    kube.scripted_errors[("POST", "r-0")] = ApiError(403, "Forbidden", "exceeded quota: q")
    nothing = lambda k, e, d: []  # noqa: E731
    executor(kube).run(plan_of(plan_redis(r, [], CONFIG, NOW), {r.key: ref}, nothing))
    assert [(e["type"], e["reason"]) for e in events_in(kube)] == [("Warning", "FailedCreatePod")]


def test_the_status_after_a_failure_runs_with_the_objects_latest_version():
    r = redis(num=1, finalizers=())
    seen = []

    def status_after(key, error, landed):
        seen.append((key, error.reason, [a.verb for a in landed]))
        return [PatchStatus(key, r.resource_version, {"replicas": 0})]

    kube = holding(r)
    kube.scripted_errors[("POST", "r-0")] = ApiError(403, "Forbidden", "exceeded quota: q")
    report = executor(kube).run(plan_of(plan_redis(r, [], CONFIG, NOW), None, status_after))
    assert seen == [(r.key, "QuotaExceeded", ["patch-finalizers"])]
    assert results(report) == [
        ("patch-finalizers", OK),
        ("create", FAILED),
        ("patch-status", SKIPPED),
        ("patch-status", OK),
    ]
    # The finalizer patch moved the version on; the status after the failure uses it.
    assert kube.patches[-1][2]["metadata"]["resourceVersion"] not in ("10", None)


def test_a_pod_metadata_repair_is_a_guarded_merge_patch_with_a_drift_event():
    import dataclasses

    r = redis(num=1)
    bare = dataclasses.replace(pod(r, 0), labels={})
    (patch,) = [a for a in plan_redis(r, [bare], CONFIG, NOW) if a.verb == "patch-metadata"]
    kube = holding(bare)
    assert results(run(kube, [patch])) == [("patch-metadata", OK)]
    (kind, name, body, sub) = kube.patches[0]
    assert (kind, name, sub) == ("Pod", "r-0", "")
    assert body["metadata"]["resourceVersion"] == "5"
    assert set(body["metadata"]["labels"]) == {
        "app.kubernetes.io/name",
        "app.kubernetes.io/instance",
        "app.kubernetes.io/managed-by",
    }
    events = [o for (k, _, _), o in kube.objects.items() if k == "Event"]
    assert [(e["reason"], e["involvedObject"]["name"]) for e in events] == [("Drift", "r")]
    # Someone wrote the pod meanwhile: next pass, and no event.
    kube = holding(bare)
    kube.scripted_errors[("PATCH", "r-0")] = conflict()
    assert results(run(kube, [patch])) == [("patch-metadata", CONFLICT)]
    assert not [k for (k, _, _) in kube.objects if k == "Event"]


def test_a_pod_written_meanwhile_does_not_hold_back_the_status():
    """A 409 on a pod's metadata says nothing about the Redis's own
    resourceVersion: the status of that pass is still written."""
    import dataclasses

    r = redis(num=1)
    bare = dataclasses.replace(pod(r, 0), labels={})
    actions = plan_redis(r, [bare], CONFIG, NOW)  # r has no status yet: a status patch too
    kube = holding(r, bare)
    kube.scripted_errors[("PATCH", "r-0")] = conflict()
    report = run(kube, actions)
    assert sorted(results(report)) == [("patch-metadata", CONFLICT), ("patch-status", OK)]


def test_throttling_past_the_retries_is_not_the_objects_failure():
    from reconciler.actions import ObjRef
    from reconciler.client.errors import Throttled

    r = redis(num=2)
    ref = ObjRef("v1", "Redis", "default", "r", r.uid)
    asked = []

    def status_after(key, error, landed):
        asked.append(key)
        return [PatchStatus(key, "10", {"replicas": 0})]

    kube = FakeKube()
    kube.scripted_errors[("POST", "r-0")] = Throttled(429, "TooManyRequests", "too many requests")
    plan = plan_of(plan_redis(r, [], CONFIG, NOW), {r.key: ref}, status_after)
    report = executor(kube).run(plan)
    assert results(report)[0] == ("create", Result.THROTTLED)
    assert {res for _, res in results(report)[1:]} == {SKIPPED}
    assert report.failed() == [] and len(report.throttled()) == 1
    assert asked == [] and events_in(kube) == []  # no status, no Warning: no backoff either


def test_a_throttled_write_stops_the_passes_other_writes():
    from reconciler.client.errors import Throttled

    kube = FakeKube()
    kube.scripted_errors[("POST", "a-0")] = Throttled(429, "TooManyRequests", "too many requests")
    first = plan_redis(redis("a", num=1), [], CONFIG, NOW)
    later = plan_redis(redis("b", num=1), [], CONFIG, NOW)
    report = executor(kube).run(plan_of(first + later))
    by_owner: dict[str, list[Result]] = {}
    for o in report.outcomes:
        by_owner.setdefault(o.action.owner.name, []).append(o.result)
    assert by_owner == {"a": [Result.THROTTLED, SKIPPED], "b": [SKIPPED, SKIPPED]}
    assert [c for c in kube.calls if c[1] == "b" or c[1].startswith("b-")] == []


def test_a_status_field_the_apiserver_drops_is_reported_as_pruned():
    r = redis(num=1)
    kube = holding(r)
    # A CRD whose schema has no lastProgressTime prunes it from what it stores.
    kube.scripted_patch_answer = {"metadata": {"resourceVersion": "11"}, "status": {"replicas": 1}}
    action = PatchStatus(r.key, "10", {"replicas": 1, "lastProgressTime": "t", "backoff": None})
    report = run(kube, [action])
    assert report.pruned == {"Redis": {"lastProgressTime": r.key}}


def test_a_status_write_refused_404_while_the_object_exists_names_the_crd():
    r = redis(num=1)
    kube = FakeKube()
    kube.objects[("Redis", "default", "r")] = {"metadata": {"name": "r", "namespace": "default"}}
    kube.scripted_errors[("PATCH/status", "r")] = ApiError(404, "NotFound", 'redis "r" not found')
    report = run(kube, [PatchStatus(r.key, "10", {"replicas": 1})])
    (failed,) = report.failed()
    assert failed.reason == "NoStatusSubresource"
    assert failed.error == (
        "the installed CRD redis.myapp.demo.kubebuilder.io has no status subresource: "
        "apply the CRDs of this release"
    )
    gone = FakeKube()
    gone.scripted_errors[("PATCH/status", "r")] = ApiError(404, "NotFound", 'redis "r" not found')
    assert results(run(gone, [PatchStatus(r.key, "10", {"replicas": 1})])) == [
        ("patch-status", GONE)
    ]


REDIS_REF = ObjRef("myapp.demo.kubebuilder.io/v1", "Redis", "default", "r", "uid-default-r")


def failed_create(status_after=None, fence=None, **status_error):
    """A Redis whose pod create fails with a 500, as the executor reports it:
    its status after the failure from ``status_after``, answered by
    ``status_error`` (a 409) when given."""
    r = redis(num=1)
    kube = holding(r)
    kube.scripted_errors[("POST", "r-0")] = ApiError(500, "InternalError", "etcd")
    if status_error:
        kube.scripted_errors[("PATCH/status", "r")] = conflict()
    run = executor(kube, fence=fence) if fence else executor(kube)
    report = run.run(plan_of(plan_redis(r, [], CONFIG, NOW), {r.key: REDIS_REF}, status_after))
    return report, [e["reason"] for e in events_in(kube)]


def said(event=False):
    """A status after the failure, with the Degraded event or without."""
    degraded = EventSpec(REDIS_REF, "Warning", "ReconcileError", "etcd", "redis-controller")

    def status_after(key, error, landed):
        return [PatchStatus(key, "10", {"replicas": 0}, (degraded,) if event else ())]

    return status_after


def test_the_failure_is_announced_once_by_the_status_event_that_landed():
    assert failed_create(said(event=True))[1] == ["ReconcileError"]


def test_a_status_that_says_it_without_an_event_leaves_the_warning_to_the_executor():
    assert failed_create(said(event=False))[1] == ["FailedCreatePod"]


def test_a_status_event_that_did_not_land_leaves_the_warning_to_the_executor():
    report, reasons = failed_create(said(event=True), conflict=True)
    assert [o.result for o in report.outcomes][-1] == CONFLICT
    assert reasons == ["FailedCreatePod"]


def test_a_replica_that_lost_the_objects_bucket_announces_nothing_after_its_failure():
    """The fence is asked for the object's bucket before the Warning too:
    another replica holds the object now, and says what it sees."""
    asked = []

    def may_write(bucket):
        asked.append(bucket)
        return bucket is None or len(asked) == 1  # still holds some bucket, not this one

    report, reasons = failed_create(fence=Fence(may_write))
    assert [o.result for o in report.outcomes] == [FAILED, SKIPPED]
    assert reasons == [] and asked == ["r", "r"]


def test_a_plan_that_names_no_owner_still_runs_and_reports_its_failure():
    """A plan built by hand (as the benches do) carries no owners: its
    failures are outcomes, with no event, since no object is named."""
    kube = FakeKube()
    kube.scripted_errors[("POST", "r-0")] = ApiError(500, "InternalError", "etcd")
    report = executor(kube).run(Plan(tuple(plan_redis(redis(num=1), [], CONFIG, NOW))))
    assert [o.result for o in report.outcomes] == [FAILED, SKIPPED]
    assert events_in(kube) == []


def test_behind_a_fence_an_owner_the_plan_does_not_name_gets_no_write():
    """Its bucket is unknown, so no fence can say the write is still ours:
    fail closed (a replica asked "any bucket?" would say yes)."""
    kube = FakeKube()
    actions = plan_redis(redis(num=1), [], CONFIG, NOW)
    report = executor(kube, fence=Fence(lambda bucket: True)).run(Plan(tuple(actions)))
    assert {o.result for o in report.outcomes} == {SKIPPED}
    assert kube.calls == []
