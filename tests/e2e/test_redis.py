"""The Redis walkthrough of seed 002, replayed against a real apiserver."""

from __future__ import annotations

from typing import Any

from .conftest import Kubectl, NotYet, Reconciler, wait_for

FINALIZER = "myapp.demo.kubebuilder.io/pods"


def redis_yaml(ns: str, name: str = "redis-sample", port: int = 6379, num: int = 3) -> str:
    return f"""
apiVersion: myapp.demo.kubebuilder.io/v1
kind: Redis
metadata: {{name: {name}, namespace: {ns}}}
spec: {{port: {port}, num: {num}}}
"""


def pods(kubectl: Kubectl, ns: str) -> dict[str, dict[str, Any]]:
    items = kubectl.json("get", "pods", "-n", ns)["items"]
    return {p["metadata"]["name"]: p for p in items}


def is_ready(pod: dict[str, Any]) -> bool:
    return any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in pod.get("status", {}).get("conditions", [])
    )


def settled(kubectl: Kubectl, ns: str) -> bool | NotYet:
    """Every pod Ready and none terminating: kwok has caught up."""
    current = pods(kubectl, ns)
    behind = [
        f"{name} {'terminating' if p['metadata'].get('deletionTimestamp') else 'not Ready'}"
        for name, p in sorted(current.items())
        if not is_ready(p) or p["metadata"].get("deletionTimestamp")
    ]
    return NotYet(", ".join(behind)) if behind else True


def redis(kubectl: Kubectl, ns: str, name: str = "redis-sample") -> dict[str, Any]:
    return kubectl.json("get", "redis", name, "-n", ns)


def test_schema_rejects_port_out_of_range(kubectl: Kubectl, ns: str):
    bad = kubectl.apply(redis_yaml(ns, port=6399), check=False)
    assert bad.returncode != 0
    assert "spec.port" in bad.stderr and "6380" in bad.stderr
    assert kubectl.apply(redis_yaml(ns, port=6379)).returncode == 0


def test_schema_rejects_negative_num_and_wrong_types(kubectl: Kubectl, ns: str):
    bad = kubectl.apply(redis_yaml(ns, num=-1), check=False)
    assert bad.returncode != 0 and "spec.num" in bad.stderr
    wrong = kubectl.apply(redis_yaml(ns).replace("port: 6379", 'port: "six"'), check=False)
    assert wrong.returncode != 0 and "spec.port" in wrong.stderr


def test_create_scale_down_recreate_and_events(kubectl: Kubectl, reconciler: Reconciler, ns: str):
    kubectl.apply(redis_yaml(ns, num=3))
    first = reconciler.sync(ns)
    assert first.summary["actions"]["Pod/create/ok"] == 3

    got = pods(kubectl, ns)
    assert sorted(got) == ["redis-sample-0", "redis-sample-1", "redis-sample-2"]
    r = redis(kubectl, ns)
    assert r["metadata"]["finalizers"] == [FINALIZER]
    for p in got.values():
        (ref,) = p["metadata"]["ownerReferences"]
        assert (ref["kind"], ref["name"], ref["uid"]) == (
            "Redis",
            "redis-sample",
            r["metadata"]["uid"],
        )
        assert ref["controller"] is True and ref["blockOwnerDeletion"] is True
        assert p["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "reconciler"
        assert p["spec"]["containers"][0]["ports"][0]["containerPort"] == 6379

    wait_for(lambda: settled(kubectl, ns), what="pods Ready")
    reconciler.converge(ns, settle=lambda: settled(kubectl, ns))
    table = kubectl.run("get", "redis", "-n", ns).stdout.splitlines()
    assert table[0].split() == ["NAME", "DESIRED", "READY", "UP-TO-DATE", "STATUS", "AGE"]
    assert table[1].split()[:5] == ["redis-sample", "3", "3", "3", "Ready"]
    wide = kubectl.run("get", "redis", "-n", ns, "-o", "wide").stdout.splitlines()
    assert wide[0].split()[-4:] == ["PORT", "MESSAGE", "SERVICE", "SHARD"]
    # Its Service; not sharded: the SHARD column is empty.
    assert wide[1].split()[6:] == ["6379", "3/3", "replicas", "ready", "redis-sample"]

    # Scale down: the highest index goes, status follows.
    kubectl.run(
        "patch", "redis", "redis-sample", "-n", ns, "--type=merge", "-p", '{"spec":{"num":2}}'
    )
    reconciler.sync(ns)
    wait_for(lambda: "redis-sample-2" not in pods(kubectl, ns), what="redis-sample-2 gone")
    assert sorted(pods(kubectl, ns)) == ["redis-sample-0", "redis-sample-1"]
    status = redis(kubectl, ns)["status"]
    assert status["replicas"] == 2 and status["observedGeneration"] == 2

    # A pod deleted by hand is back after the next pass.
    kubectl.run("delete", "pod", "redis-sample-1", "-n", ns, "--wait=true")
    reconciler.sync(ns)
    assert "redis-sample-1" in pods(kubectl, ns)

    described = kubectl.run("describe", "redis", "redis-sample", "-n", ns).stdout
    assert "CreatePod" in described and "EvictPod" in described
    assert "Created pod redis-sample-1: deleted by hand" in described
    assert "Evicted pod redis-sample-2: scale down to 2" in described
    assert "redis-controller" in described


def test_port_change_rolls_one_pod_at_a_time(kubectl: Kubectl, reconciler: Reconciler, ns: str):
    kubectl.apply(redis_yaml(ns, num=3))
    reconciler.converge(ns, settle=lambda: settled(kubectl, ns))
    kubectl.run(
        "patch", "redis", "redis-sample", "-n", ns, "--type=merge", "-p", '{"spec":{"port":6380}}'
    )

    def ports() -> dict[str, int]:
        return {
            n: p["spec"]["containers"][0]["ports"][0]["containerPort"]
            for n, p in pods(kubectl, ns).items()
            if not p["metadata"].get("deletionTimestamp")
        }

    history = []
    for _ in range(30):
        result = reconciler.sync(ns)
        actions = result.summary["actions"]
        deleted = actions.get("Pod/delete/ok", 0) + actions.get("Pod/evict/ok", 0)
        assert deleted <= 1, "more than one pod replaced in one pass"
        wait_for(lambda: settled(kubectl, ns), what="pods Ready")
        history.append(ports())
        if sorted(history[-1].values()) == [6380] * 3 and result.writes == 0:
            break
    else:
        raise AssertionError(f"rollout did not finish: {history}")
    # Never fewer than two serving pods while rolling.
    assert all(len(h) >= 2 for h in history)
    status = redis(kubectl, ns)["status"]
    assert status["updatedReplicas"] == 3 and status["readyReplicas"] == 3
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True"


def _release(kubectl: Kubectl, reconciler: Reconciler, ns: str) -> None:
    """Run passes until the Redis is gone; its pods must be gone first."""
    for _ in range(20):
        reconciler.sync(ns)
        gone = kubectl.run("get", "redis", "redis-sample", "-n", ns, check=False)
        if gone.returncode != 0:
            assert "NotFound" in gone.stderr
            break
        wait_for(lambda: settled(kubectl, ns) or not pods(kubectl, ns), what="pods settle")
    else:
        raise AssertionError("Redis was never released")
    assert pods(kubectl, ns) == {}


def _delete_and_converge(kubectl: Kubectl, reconciler: Reconciler, ns: str, *flags: str):
    kubectl.run("delete", "redis", "redis-sample", "-n", ns, "--wait=false", *flags)
    assert redis(kubectl, ns)["metadata"].get("deletionTimestamp")  # our finalizer holds it
    _release(kubectl, reconciler, ns)


def test_delete_removes_pods_then_releases_the_redis(
    kubectl: Kubectl, reconciler: Reconciler, ns: str
):
    kubectl.apply(redis_yaml(ns, num=3))
    reconciler.converge(ns, settle=lambda: settled(kubectl, ns))
    _delete_and_converge(kubectl, reconciler, ns)


def test_delete_while_reconciler_was_down(kubectl: Kubectl, reconciler: Reconciler, ns: str):
    kubectl.apply(redis_yaml(ns, num=2))
    reconciler.sync(ns)
    # The reconciler is "down": the delete waits on our finalizer meanwhile.
    kubectl.run("delete", "redis", "redis-sample", "-n", ns, "--wait=false")
    assert redis(kubectl, ns)["metadata"]["finalizers"] == [FINALIZER]
    assert len(pods(kubectl, ns)) == 2
    _release(kubectl, reconciler, ns)


def test_delete_with_foreground_cascade(kubectl: Kubectl, reconciler: Reconciler, ns: str):
    kubectl.apply(redis_yaml(ns, num=3))
    reconciler.converge(ns, settle=lambda: settled(kubectl, ns))
    _delete_and_converge(kubectl, reconciler, ns, "--cascade=foreground")
