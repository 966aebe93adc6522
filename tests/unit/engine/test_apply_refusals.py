"""What the executor says when the apiserver holds a write back: a budget
refusing an eviction, throttling past the retries, a status write failing
after another write did. Said in the outcome, in one log line with the
object, the result and the pass, and in the status written after it."""

from __future__ import annotations

import logging

from reconciler.actions import DeletePod, EvictPod, ObjRef, PatchStatus, Plan
from reconciler.backoff import EVICTION_REFUSED
from reconciler.client.errors import ApiError, EvictionRefused, Throttled
from reconciler.model import ObjKey
from reconciler.result import Result
from tests.unit.engine import executing
from tests.unit.engine.executing import plan_of
from tests.unit.fakes import FakeKube, conflict

OWNER = ObjKey("Redis", "default", "r")
REF = ObjRef("myapp.demo.kubebuilder.io/v1", "Redis", "default", "r", "uid-r")
BUDGET_SAYS = "Cannot evict pod as it would violate the pod's disruption budget."


def evict(name: str = "r-1") -> EvictPod:
    return EvictPod(OWNER, "default", name, f"uid-{name}", "rolling update")


def pods(*names: str) -> FakeKube:
    """A cluster holding these pods of r (uid uid-NAME, as `evict` asks)."""
    kube = FakeKube()
    for name in names:
        kube.held.add("Pod", "default", name, f"uid-{name}", "5")
    return kube


class executor:  # noqa: N801: called as the executor it wraps
    """The executor of pass p7, for plans of OWNER, whose status after a
    failed write is ``after_failure``'s."""

    def __init__(self, kube, after_failure=None, concurrency=1):
        self.ran = executing.executor(kube, concurrency=concurrency, pass_id="p7")
        self.after_failure = after_failure

    def run(self, plan: Plan):
        return self.ran.run(plan_of(plan.actions, {OWNER: REF}, self.after_failure))


def test_a_refused_eviction_is_said_in_the_outcome_the_log_and_the_status(caplog):
    caplog.set_level(logging.INFO, logger="reconciler.engine.apply")
    asked = []

    def status_after(key, error, landed):
        asked.append((key, error.message, error.reason, error.pod))
        return [PatchStatus(key, "10", {"state": "held"})]

    kube = pods("r-1", "r-2")
    kube.held.add("Redis", "default", "r", "uid-r", "10")
    kube.scripted_errors[("EVICT", "r-1")] = EvictionRefused(429, "TooManyRequests", BUDGET_SAYS)
    later = evict("r-2")
    report = executor(kube, status_after).run(Plan((evict(), later)))
    refused, status, skipped = report.outcomes
    assert (refused.result, refused.error, refused.reason) == (
        Result.REFUSED,
        BUDGET_SAYS,
        EVICTION_REFUSED,
    )
    assert (skipped.action, skipped.result) == (later, Result.SKIPPED)
    assert (status.action.verb, status.result) == ("patch-status", Result.OK)
    assert asked == [(OWNER, BUDGET_SAYS, EVICTION_REFUSED, "r-1")]
    (line,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert line.getMessage() == (
        f"[default/r] evict pod default/r-1 (rolling update) -> refused: {BUDGET_SAYS}"
    )
    assert (line.object, line.result, line.pass_id) == ("default/r", "refused", "p7")


def test_throttling_stops_the_pass_with_one_warning_that_names_it(caplog):
    caplog.set_level(logging.INFO, logger="reconciler.engine.apply")
    kube = FakeKube()
    kube.scripted_errors[("EVICT", "r-1")] = Throttled(429, "TooManyRequests", "slow down")
    report = executor(kube).run(Plan((evict(), evict("r-2"))))
    throttled, skipped = report.outcomes
    assert (throttled.result, throttled.error) == (
        Result.THROTTLED,
        "429 TooManyRequests: slow down",
    )
    assert skipped.result is Result.SKIPPED
    lines = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert lines == [
        (
            "INFO",
            "[default/r] evict pod default/r-1 (rolling update): 429 TooManyRequests: slow down"
            " -> throttled",
        ),
        (
            "WARNING",
            "pass p7: the apiserver throttles our writes (429); the rest wait for the next one",
        ),
    ]
    assert caplog.records[1].pass_id == "p7"


def test_a_pod_is_deleted_with_its_uid_as_precondition():
    kube = pods("r-4")
    delete = DeletePod(OWNER, "default", "r-4", "uid-r-4", "scale down")
    assert [o.result for o in executor(kube).run(Plan((delete,))).outcomes] == [Result.OK]
    assert kube.writes == [("DELETE", "Pod", "default", "r-4", "uid-r-4")]


def test_a_conflict_skips_exactly_the_objects_later_writes():
    kube = pods("r-1", "r-2", "r-3", "r-4")
    kube.scripted_errors[("EVICT", "r-2")] = conflict("uid precondition")
    actions = (evict("r-1"), evict("r-2"), evict("r-3"), evict("r-4"))
    results = [o.result for o in executor(kube).run(Plan(actions)).outcomes]
    assert results == [Result.OK, Result.CONFLICT, Result.SKIPPED, Result.SKIPPED]


def test_the_status_after_a_failure_that_fails_too_is_logged_with_its_error(caplog):
    caplog.set_level(logging.INFO, logger="reconciler.engine.apply")
    status = PatchStatus(OWNER, "10", {"state": "failed"})
    kube = FakeKube()
    kube.scripted_errors[("EVICT", "r-1")] = ApiError(500, "InternalError", "etcd")
    kube.scripted_errors[("PATCH/status", "r")] = ApiError(500, "InternalError", "etcd again")
    report = executor(kube, lambda key, error, landed: [status]).run(Plan((evict(),)))
    assert [(o.result, o.error) for o in report.outcomes] == [
        (Result.FAILED, "500 InternalError: etcd"),
        (Result.FAILED, "500 InternalError: etcd again"),
    ]
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(m.endswith(": 500 InternalError: etcd again -> failed") for m in messages)
