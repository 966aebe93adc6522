"""The status tells the truth in one-shot mode (cron, the CronJob: `sync` with no
state file), under refused writes: conflicts, quotas."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import Kubectl, Reconciler, wait_for
from .test_redis import pods, redis, redis_yaml

pytestmark = pytest.mark.e2e


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    return next(c for c in obj["status"]["conditions"] if c["type"] == type_)


def test_one_shot_sync_shows_a_conflict_in_status_on_its_first_pass(
    kubectl: Kubectl, reconciler: Reconciler, ns: str
):
    kubectl.apply(redis_yaml(ns, num=2))
    reconciler.sync(ns)
    # A pod the Redis does not own (and that carries none of our labels) on a
    # name the Redis is about to want.
    kubectl.run("run", "redis-sample-2", "-n", ns, "--image=nginx", "--restart=Never")
    kubectl.run(
        "patch", "redis", "redis-sample", "-n", ns, "--type=merge", "-p", '{"spec":{"num":3}}'
    )

    # Seen, not learnt from a refused create: no create, and the status says it.
    first = reconciler.sync(ns)
    assert "Pod/create/failed" not in first.summary["actions"]
    assert first.summary["actions"].get("Redis/patch-status/ok") == 1
    r = redis(kubectl, ns)
    degraded = condition(r, "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "PodConflict")
    assert "redis-sample-2" in degraded["message"]
    assert r["status"]["observedGeneration"] == r["metadata"]["generation"]
    described = kubectl.run("describe", "redis", "redis-sample", "-n", ns).stdout
    assert "PodConflict" in described and "redis-sample-2" in described
    row = kubectl.run("get", "redis", "-n", ns, "--no-headers").stdout.split()
    assert row[:5] == ["redis-sample", "3", "2", "2", "PodConflict"]
    wide = kubectl.run("get", "redis", "-n", ns, "-o", "wide").stdout
    assert "pods not owned by this Redis hold desired names: redis-sample-2" in wide
    shown = reconciler.cli("plan", "-n", ns).stdout
    assert f"  Redis {ns}/redis-sample: PodConflict: pods not owned" in shown
    # The next pass has nothing new to say: no write, no second Warning.
    again = reconciler.sync(ns)
    assert again.writes == 0
    warnings = kubectl.json(
        "get", "events", "-n", ns, "--field-selector", "type=Warning,involvedObject.kind=Redis"
    )["items"]
    assert [(e["reason"], e.get("count", 1)) for e in warnings] == [("PodConflict", 1)]
    foreign = pods(kubectl, ns)["redis-sample-2"]
    assert "nginx" in foreign["spec"]["containers"][0]["image"]
    assert "ownerReferences" not in foreign["metadata"]

    # Once the foreign pod is gone, the name is taken over.
    kubectl.run("delete", "pod", "redis-sample-2", "-n", ns, "--wait=true")
    reconciler.sync(ns)
    refs = pods(kubectl, ns)["redis-sample-2"]["metadata"]["ownerReferences"]
    assert refs[0]["name"] == "redis-sample"
    assert condition(redis(kubectl, ns), "Degraded")["status"] == "False"


def test_quota_refusal_is_degraded_then_converges_when_raised(
    kubectl: Kubectl, reconciler: Reconciler, ns: str
):
    kubectl.run("create", "quota", "pods", "-n", ns, "--hard=pods=2")
    # Admission enforces a quota once its controller has computed the usage.
    wait_for(
        lambda: kubectl.json("get", "quota", "pods", "-n", ns).get("status", {}).get("hard"),
        what="the quota controller",
    )
    kubectl.apply(redis_yaml(ns, num=3))
    failed = reconciler.sync(ns, expect=1)
    assert any("exceeded quota" in e for e in failed.summary["errors"])
    (pending,) = failed.summary["not_ready"]
    assert (pending["object"], pending["state"]) == (
        "Redis " + ns + "/redis-sample",
        "QuotaExceeded",
    )
    row = kubectl.run("get", "redis", "-n", ns, "--no-headers").stdout.split()
    # Desired 3; two pods were created, just now, so none is Ready yet.
    assert row[1:5] == ["3", "0", "2", "QuotaExceeded"]
    r = redis(kubectl, ns)
    degraded = condition(r, "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "QuotaExceeded")
    assert "exceeded quota" in degraded["message"]
    assert r["status"]["replicas"] == 2
    warnings = kubectl.json(
        "get", "events", "-n", ns, "--field-selector", "type=Warning,involvedObject.kind=Redis"
    )["items"]
    assert [e["reason"] for e in warnings] == ["QuotaExceeded"]

    kubectl.run(
        "patch", "quota", "pods", "-n", ns, "--type=merge", "-p", '{"spec":{"hard":{"pods":"3"}}}'
    )
    reconciler.sync(ns)
    assert sorted(pods(kubectl, ns)) == [f"redis-sample-{i}" for i in range(3)]
    r = redis(kubectl, ns)
    assert condition(r, "Degraded")["status"] == "False"
    assert "backoff" not in r["status"]


def test_admission_refuses_a_name_too_long_for_a_label_value(kubectl: Kubectl, ns: str):
    refused = kubectl.apply(redis_yaml(ns, name="r" * 64, num=1), check=False)
    assert refused.returncode != 0
    assert "metadata.name must be at most 63 characters" in refused.stderr
    assert "app.kubernetes.io/instance" in refused.stderr
    kubectl.apply(redis_yaml(ns, name="r" * 63, num=1))


def test_a_namespace_being_deleted_gets_no_creates_and_goes_away(
    kubectl: Kubectl, reconciler: Reconciler, ns: str
):
    kubectl.apply(redis_yaml(ns, num=2))
    reconciler.sync(ns)
    assert len(pods(kubectl, ns)) == 2
    kubectl.run("delete", "namespace", ns, "--wait=false")
    # The namespace controller deletes the pods; the passes recreate none, fail
    # nothing, and release the Redis's finalizer so the namespace can go.
    passes = []

    def gone() -> bool:
        passes.append(reconciler.sync(ns))  # exit 0, or this raises
        return kubectl.run("get", "namespace", ns, check=False).returncode != 0

    wait_for(gone, what="the namespace to go", timeout=120, interval=0.5)
    for result in passes:
        assert not [k for k in result.summary["actions"] if k.startswith("Pod/create")]
        assert result.summary["errors"] == []
        assert "could not post event" not in result.stderr


def test_a_namespace_in_scope_that_does_not_exist_is_reported(reconciler: Reconciler):
    result = reconciler.sync("nosuch-namespace")
    warning = "namespace nosuch-namespace does not exist (is it a typo in the scope?)"
    assert result.summary["warnings"] == [warning]
    assert warning in result.stderr


def test_the_daemon_counts_degraded_objects_until_they_are_fixed(
    kubectl: Kubectl, reconciler: Reconciler, ns: str
):
    from .conftest import free_port
    from .test_leader import Replica

    degraded = 'reconciler_objects{condition="Degraded",kind="Redis"}'
    kubectl.run("run", "redis-sample-1", "-n", ns, "--image=nginx", "--restart=Never")
    kubectl.apply(redis_yaml(ns, num=2))
    port = free_port()
    proc = reconciler.daemon(ns, "--metrics-address", f"127.0.0.1:{port}")
    daemon = Replica(proc, port)
    try:
        wait_for(lambda: daemon.metric(degraded) == 1, what="the Degraded gauge", timeout=30)
        kubectl.run("delete", "pod", "redis-sample-1", "-n", ns, "--wait=true")
        wait_for(lambda: daemon.metric(degraded) == 0, what="the gauge to clear", timeout=30)
        assert daemon.metric('reconciler_objects_backing_off{kind="Redis"}') == 0
    finally:
        proc.kill()
        proc.wait(timeout=10)
