"""Failure memory and the backoff schedule: the record kept in status, and the
planner and executor driving it pass by pass, each pass reading back only what
the previous one wrote to the object (as a cron `sync` with no state file does)."""

from __future__ import annotations

from datetime import UTC, datetime

from reconciler.actions import PatchStatus, Plan
from reconciler.backoff import (
    Failure,
    Policy,
    WriteError,
    after_failure,
    delay,
    from_status,
    gate,
    to_status,
)
from reconciler.client.errors import ApiError
from reconciler.engine.plan import plan_pass
from reconciler.kinds.redis.identity import Redis
from reconciler.kinds.redis.identity import from_api as redis_from_api

from .builders import CONFIG, NOW, redis, snap
from .engine.executing import executor, plan_of
from .fakes import FakeKube
from .stored import holding

POLICY = Policy(threshold=3, base=30, cap=600)


def test_backoff_grows_and_is_capped():
    assert [delay(n, POLICY) for n in (1, 2, 3, 4, 5, 9)] == [0, 0, 30, 60, 120, 600]
    assert delay(10_000, POLICY) == 600


def test_the_record_round_trips_through_status():
    failure = Failure(4, "403 Forbidden: exceeded quota", "QuotaExceeded", 1_795_000_000.0)
    stored = to_status(failure)
    assert stored == {
        "failures": 4,
        "reason": "QuotaExceeded",
        "message": "403 Forbidden: exceeded quota",
        "retryAfter": "2026-11-18T11:06:40Z",
    }
    assert from_status({"backoff": stored}) == failure
    assert to_status(None) is None


def test_a_malformed_record_is_no_record():
    for record in (None, "x", {}, {"failures": 0}, {"failures": True}, {"failures": "2"}):
        assert from_status({"backoff": record}) is None
    odd = from_status({"backoff": {"failures": 2, "retryAfter": "soon"}})
    assert odd == Failure(2, "", "ReconcileError", 0.0)


def test_the_gate_holds_only_inside_the_wait_past_the_threshold():
    t = NOW.timestamp()
    assert not gate(None, POLICY, NOW).hold
    assert not gate(Failure(2, "m", retry_at=t + 60), POLICY, NOW).hold  # below the threshold
    held = gate(Failure(3, "m", retry_at=t + 60), POLICY, NOW)
    assert held.hold and held.backing_off
    assert not gate(Failure(3, "m", retry_at=t), POLICY, NOW).hold  # the wait is over


def test_after_a_failure_the_count_goes_up_and_the_retry_is_in_whole_seconds():
    error = WriteError("500 InternalError: etcd", "ReconcileError")
    first = after_failure(None, error, 1000.5, POLICY)
    assert first.failure == Failure(1, "500 InternalError: etcd", "ReconcileError", 1001.0)
    assert first.hold and not first.backing_off
    third = after_failure(Failure(2, "old", retry_at=1.0), error, 1000.0, POLICY)
    assert third.failure == Failure(3, "500 InternalError: etcd", "ReconcileError", 1030.0)
    assert third.backing_off


def land(r: Redis, kube: FakeKube) -> Redis:
    """What the next LIST returns: r as the fake stores it after the pass."""
    return redis_from_api(kube.objects[("Redis", r.namespace, r.name)])


def one_pass(r: Redis, kube: FakeKube, t: float) -> tuple[Plan, Redis]:
    now = datetime.fromtimestamp(t, UTC)
    if ("Redis", r.namespace, r.name) not in kube.objects:
        holding(r, kube=kube)
    snapshot = snap((r,), (), ())
    p = plan_pass(snapshot, CONFIG, now)
    executor(kube, now=now).run(p)
    return p, land(r, kube)


def degraded(r: Redis) -> tuple[str, str]:
    c = next(c for c in r.status["conditions"] if c["type"] == "Degraded")
    return c["status"], c["reason"]


def test_failure_memory_across_passes_lives_in_the_status():
    r = redis(num=1)
    kube = FakeKube()
    kube.scripted_errors[("POST", "r-0")] = ApiError(
        422, "Invalid", "spec.containers[0].image: bad"
    )
    t, waits, reasons = NOW.timestamp(), [], []
    for _ in range(5):
        _, r = one_pass(r, kube, t)
        rec = r.failure
        assert rec is not None
        assert (rec.message, rec.reason) == (
            "422 Invalid: spec.containers[0].image: bad",
            "InvalidObject",
        )
        assert r.status["observedGeneration"] == r.generation
        waits.append(rec.retry_at - t)
        reasons.append(degraded(r))
        if rec.retry_at > t:
            # Inside the wait: no write at all, and the record stands as it is.
            writes = len(kube.calls)
            held, after = one_pass(r, kube, t + 1)
            assert held.backing_off == {r.key}
            assert held.actions == () and len(kube.calls) == writes
            assert after.failure == rec
        t = max(rec.retry_at, t + 1)
    assert [r.failure.count, *waits] == [5, 0, 0, 30, 60, 120]  # defaults: 3, 30s
    assert reasons[:3] == [
        ("True", "InvalidObject"),
        ("True", "InvalidObject"),
        ("True", "BackingOff"),
    ]
    # The write succeeds again: the record goes, and Degraded with it.
    kube.scripted_errors.clear()
    _, r = one_pass(r, kube, t)
    assert r.failure is None and "backoff" not in r.status
    assert degraded(r) == ("False", "AsExpected")


def test_the_status_after_a_failure_counts_pods_as_they_are():
    r = redis_from_api(
        {
            "metadata": {"name": "r", "namespace": "default", "uid": "u", "resourceVersion": "10"},
            "spec": {"num": 2},
        }
    )
    kube = FakeKube()
    kube.scripted_errors[("POST", "r-0")] = ApiError(403, "Forbidden", "exceeded quota: pods")
    p, after = one_pass(r, kube, NOW.timestamp())
    (status,) = [a for a in p.actions if isinstance(a, PatchStatus)]
    assert status.status["replicas"] == 2  # as planned, had the creates landed
    assert after.status["replicas"] == 0  # as written after the create failed
    assert after.failure is not None and after.failure.count == 1


def test_the_status_after_a_failure_counts_the_writes_that_landed_before_it():
    r = redis(num=3)
    kube = FakeKube()
    kube.scripted_errors[("POST", "r-2")] = ApiError(403, "Forbidden", "exceeded quota: pods")
    _, after = one_pass(r, kube, NOW.timestamp())
    assert (after.status["replicas"], after.status["updatedReplicas"]) == (2, 2)
    assert degraded(after) == ("True", "QuotaExceeded")


def test_the_record_is_decoded_with_each_object():
    from reconciler.kinds.xca import from_api as xca_from_api

    record = {
        "failures": 2,
        "reason": "Forbidden",
        "message": "m",
        "retryAfter": "2026-11-22T12:00:00Z",
    }
    expected = Failure(2, "m", "Forbidden", NOW.timestamp())
    body = {"metadata": {"name": "o"}, "status": {"backoff": record}}
    assert redis_from_api(body).failure == expected
    assert xca_from_api(body).failure == expected


def test_an_xca_keeps_its_record_in_status_and_clears_it():
    from reconciler.backoff import Gate
    from reconciler.kinds import xca as xca_kind
    from reconciler.kinds.base import PlanInput
    from reconciler.model import PodIndex

    from .builders import failing, xca

    fail = Failure(1, "500 InternalError: etcd", "ReconcileError", NOW.timestamp())
    held = PlanInput(PodIndex(()), CONFIG, NOW, Gate(fail, True, False))
    (patch,) = xca_kind.plan(xca(active=False), held)
    assert patch.status == {"backoff": to_status(fail)}
    assert xca_kind.plan(failing(xca(active=False), fail), held) == []  # stored already
    open_gate = PlanInput(PodIndex(()), CONFIG, NOW, gate(None, POLICY, NOW))
    (clear,) = xca_kind.plan(failing(xca(active=True), fail), open_gate)
    assert clear.status == {"backoff": None}
    (activate,) = xca_kind.plan(failing(xca(active=False), fail), open_gate)
    assert activate.status["backoff"] is None and activate.status["active"] is True


def test_the_status_after_a_failure_counts_a_landed_rollout_and_scale_down():
    from reconciler.backoff import Gate
    from reconciler.kinds.base import PlanInput
    from reconciler.model import ObjKey, PodIndex

    from .builders import current_hash, pod, redis_writes

    fail = Failure(1, "boom", "ReconcileError", 0.0)
    r = redis(num=2, port=6380)
    pods = [pod(r, 0, hash_=current_hash(6379)), pod(r, 1, port=6380), pod(r, 2)]

    def held_status(landed):
        inp = PlanInput(PodIndex(pods), CONFIG, NOW, Gate(fail, True, False), frozenset(landed))
        (patch,) = redis_writes(r, inp)  # status only, whatever landed
        return patch.status

    none = held_status([])
    both = held_status(
        [("evict", ObjKey("Pod", "default", "r-2")), ("evict", ObjKey("Pod", "default", "r-0"))]
    )
    assert (none["replicas"], none["updatedReplicas"]) == (2, 1)
    assert (both["replicas"], both["updatedReplicas"]) == (1, 1)
    progressing = {c["type"]: c["reason"] for c in both["conditions"]}["Progressing"]
    assert progressing == "RollingUpdate"


def test_a_landed_create_is_counted_not_planned_again():
    from reconciler.backoff import Gate
    from reconciler.kinds.base import PlanInput
    from reconciler.model import ObjKey, PodIndex

    from .builders import redis_writes

    fail = Failure(1, "boom", "ReconcileError", 0.0)
    landed = frozenset({("create", ObjKey("Pod", "default", "r-0"))})
    inp = PlanInput(PodIndex(()), CONFIG, NOW, Gate(fail, True, False), landed)
    (patch,) = redis_writes(redis(num=2), inp)
    assert isinstance(patch, PatchStatus) and patch.status["replicas"] == 1


def test_a_failed_status_after_a_failure_is_reported_and_the_write_warned_about():
    from reconciler.actions import ObjRef

    r = redis(num=1)
    ref = ObjRef("v1", "Redis", "default", "r", r.uid)
    kube = FakeKube()
    kube.scripted_errors[("POST", "r-0")] = ApiError(500, "InternalError", "etcd")
    kube.scripted_errors[("PATCH/status", "r")] = ApiError(403, "Forbidden", "no status for you")
    plain = PatchStatus(r.key, "10", {"replicas": 0})  # no event of its own
    report = executor(kube).run(plan_of(snap_actions(r), {r.key: ref}, lambda k, e, d: [plain]))
    last = report.outcomes[-1]
    assert (last.result, last.error, last.reason) == (
        "failed",
        "403 Forbidden: no status for you",
        "Forbidden",
    )
    events = [o for (k, _, _), o in kube.objects.items() if k == "Event"]
    assert [e["reason"] for e in events] == ["FailedCreatePod"]


def snap_actions(r):
    from .builders import plan_redis

    return plan_redis(r, [], CONFIG, NOW)
