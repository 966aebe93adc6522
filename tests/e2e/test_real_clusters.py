"""What production clusters do to our pods, played on the local cluster:
admission that injects a sidecar or rewrites the image (a real mutating
webhook on loopback), an eviction, a finalizer that holds a deleted pod, an
image that cannot be pulled, a pod no node can take. Each case checks the end
state, and that it stays: the same pod uids over passes that write nothing."""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from reconciler.kinds.redis.server import OPEN_ARGS
from reconciler.kinds.redis.status import PROGRESS_FIELD, STUCK_MARGIN
from reconciler.model import parse_time

from . import kubelet
from .conftest import Kubectl, Reconciler, wait_for
from .test_redis import pods, redis, redis_yaml, settled
from .webhook import image_rewrite, mutating_webhook, node_selector, sidecar_injection

pytestmark = pytest.mark.e2e

LABEL = "e2e.reconciler.local/admission"


def uids(kubectl: Kubectl, ns: str) -> dict[str, str]:
    return {name: p["metadata"]["uid"] for name, p in pods(kubectl, ns).items()}


def events(kubectl: Kubectl, ns: str, reason: str) -> list[str]:
    items = kubectl.json("get", "events", "-n", ns, "--field-selector", f"reason={reason}")
    return [e["message"] for e in items["items"]]


def event_counts(kubectl: Kubectl, ns: str, reason: str) -> dict[str, int]:
    """How often each event was posted, by the first part of its message."""
    items = kubectl.json("get", "events", "-n", ns, "--field-selector", f"reason={reason}")
    return {e["message"].split(":")[0]: int(e.get("count") or 1) for e in items["items"]}


def columns(kubectl: Kubectl, ns: str) -> dict[str, str]:
    """`kubectl get redis -o wide`, header to value."""
    header, row = kubectl.run("get", "redis", "-n", ns, "-o", "wide").stdout.splitlines()[:2]
    # kubectl aligns each value under its header: slice at the headers' starts.
    starts = [m.start() for m in re.finditer(r"\S+", header)]
    ends = [*starts[1:], None]
    return {header[a:b].strip(): row[a:b].strip() for a, b in zip(starts, ends, strict=True)}


def stays_converged(
    kubectl: Kubectl, reconciler: Reconciler, ns: str, *extra: str, passes: int = 3
) -> None:
    """Passes after convergence write nothing and keep every pod."""
    before = uids(kubectl, ns)
    for _ in range(passes):
        result = reconciler.sync(ns, *extra)
        assert (result.writes, result.summary["planned"]) == (0, 0), result.summary
        time.sleep(0.3)
    assert uids(kubectl, ns) == before


def status(kubectl: Kubectl, ns: str) -> dict[str, Any]:
    return dict(redis(kubectl, ns)["status"])


def condition(st: dict[str, Any], type_: str) -> tuple[str, str]:
    c = next(c for c in st["conditions"] if c["type"] == type_)
    return c["status"], c["reason"]


def test_pods_admission_changed_are_kept_and_hand_edits_still_repaired(
    kubectl: Kubectl, reconciler: Reconciler, ns: str
):
    with mutating_webhook(
        kubectl, f"{LABEL}={ns}", [sidecar_injection, image_rewrite], namespaces=[ns]
    ) as hook:
        kubectl.apply(redis_yaml(ns, num=2, port=6375))
        reconciler.converge(ns, settle=lambda: settled(kubectl, ns))
        assert {"redis-sample-0", "redis-sample-1"} <= set(hook.mutated_in(ns))
        got = pods(kubectl, ns)
        for p in got.values():
            containers = {c["name"]: c for c in p["spec"]["containers"]}
            assert set(containers) == {"redis", "istio-proxy"}
            mine = containers["redis"]
            assert mine["image"] == "mirror.local/redis:5-alpine"
            # The server listens where the spec says, and Ready means it answers there.
            assert mine["args"] == ["--port", "6375", *OPEN_ARGS]
            assert mine["ports"][0]["containerPort"] == 6375
            assert mine["readinessProbe"]["tcpSocket"]["port"] == 6375
        stays_converged(kubectl, reconciler, ns)
        shown = columns(kubectl, ns)
        assert (shown["READY"], shown["UP-TO-DATE"], shown["STATUS"]) == ("2", "2", "Ready")
        assert sorted(events(kubectl, ns, "ChangedAtAdmission")) == [
            f"Pod redis-sample-{i}: image is mirror.local/redis:5-alpine, asked "
            "redis:5-alpine: changed at admission"
            for i in range(2)
        ]

        # A hand edit after admission is still drift, named against what admission gave.
        before = uids(kubectl, ns)
        kubectl.run("set", "image", "pod/redis-sample-0", "redis=redis:6-alpine", "-n", ns)
        shown_plan = reconciler.cli("plan", "-n", ns).stdout
        assert "drift (image is redis:6-alpine, want mirror.local/redis:5-alpine)" in shown_plan
        reconciler.converge(ns, settle=lambda: settled(kubectl, ns))
        after = uids(kubectl, ns)
        assert after["redis-sample-0"] != before["redis-sample-0"]
        assert after["redis-sample-1"] == before["redis-sample-1"]
        stays_converged(kubectl, reconciler, ns)
        # Announced once per pod created: the replacement too (the same message,
        # so the event is counted again), not again the other.
        counts = event_counts(kubectl, ns, "ChangedAtAdmission")
        assert [counts[f"Pod redis-sample-{i}"] for i in range(2)] == [2, 1]


def test_an_evicted_pod_is_replaced_with_its_reason(
    kubectl: Kubectl, reconciler: Reconciler, ns: str
):
    kubectl.apply(redis_yaml(ns, num=2))
    reconciler.converge(ns, settle=lambda: settled(kubectl, ns))
    before = uids(kubectl, ns)
    kubelet.evict(kubectl, ns, "redis-sample-1")

    first = reconciler.sync(ns)
    assert first.summary["actions"]["Pod/delete/ok"] == 1
    st = status(kubectl, ns)
    assert (st["readyReplicas"], st["updatedReplicas"]) == (1, 1)
    assert condition(st, "Progressing") == ("True", "ReplacingEndedPods")
    (deleted,) = events(kubectl, ns, "DeletePod")
    assert deleted.startswith("Deleted pod redis-sample-1: Evicted: The node was low on resource")

    reconciler.converge(ns, settle=lambda: settled(kubectl, ns))
    wait_for(lambda: settled(kubectl, ns), what="pods Ready")
    reconciler.converge(ns)
    after = uids(kubectl, ns)
    assert after["redis-sample-0"] == before["redis-sample-0"]
    assert after["redis-sample-1"] != before["redis-sample-1"]
    assert any("replaces a pod that ended" in m for m in events(kubectl, ns, "CreatePod"))
    stays_converged(kubectl, reconciler, ns)
    assert columns(kubectl, ns)["STATUS"] == "Ready"


def test_a_pod_held_terminating_is_not_a_replica_and_is_named(
    kubectl: Kubectl, reconciler: Reconciler, ns: str
):
    kubectl.apply(redis_yaml(ns, num=2))
    reconciler.converge(ns, settle=lambda: settled(kubectl, ns))
    kubelet.hold_with_finalizer(kubectl, ns, "redis-sample-0")
    try:
        kubectl.run("delete", "pod", "redis-sample-0", "-n", ns, "--grace-period=1", "--wait=false")
        reconciler.sync(ns)
        shown = columns(kubectl, ns)
        assert (shown["READY"], shown["UP-TO-DATE"], shown["STATUS"]) == ("1", "1", "ScalingUp")
        # Past its grace period (the deletionTimestamp) and the margin, the
        # status names what holds it: a wait on the clock, polled.
        ends = kubectl.json("get", "pod", "redis-sample-0", "-n", ns)["metadata"]
        ends_at = parse_time(ends["deletionTimestamp"])
        assert ends_at is not None, ends
        due = ends_at + STUCK_MARGIN + timedelta(seconds=1)
        wait_for(lambda: datetime.now(UTC) >= due, what=f"{due}", timeout=60)
        reconciler.sync(ns)
        st = status(kubectl, ns)
        assert "redis-sample-0 terminating for" in st["message"]
        assert st["message"].endswith("held by finalizer example.com/hold")
        progressing = next(c for c in st["conditions"] if c["type"] == "Progressing")
        assert progressing["message"] == st["message"]
    finally:
        kubelet.release(kubectl, ns, "redis-sample-0")
    reconciler.converge(ns, settle=lambda: settled(kubectl, ns))
    wait_for(lambda: settled(kubectl, ns), what="pods Ready")
    reconciler.converge(ns)
    assert columns(kubectl, ns)["STATUS"] == "Ready"


def test_a_rollout_that_cannot_pull_its_image_is_named_then_flagged(
    kubectl: Kubectl, reconciler: Reconciler, ns: str
):
    # Long enough that the three passes before the first check fit in it on a
    # loaded machine: with 3 s, a CI run once saw the deadline pass before it.
    deadline = ("--progress-deadline", "10")
    kubectl.apply(redis_yaml(ns, num=2))
    reconciler.converge(ns, settle=lambda: settled(kubectl, ns))
    patch = {"spec": {"image": "redis:does-not-exist"}}
    kubectl.run("patch", "redis", "redis-sample", "-n", ns, "--type=merge", "-p", json.dumps(patch))
    reconciler.sync(ns, *deadline)  # the first pod of the rollout goes
    wait_for(lambda: "redis-sample-0" not in pods(kubectl, ns), what="redis-sample-0 gone")
    reconciler.sync(ns, *deadline)  # and comes back with the new image
    kubelet.image_pull_backoff(kubectl, ns, "redis-sample-0")
    reconciler.sync(ns, *deadline)
    st = status(kubectl, ns)
    assert condition(st, "Progressing") == ("True", "RollingUpdate")
    assert st["message"] == (
        "1/2 pods updated to the current spec; redis-sample-0 not Ready: "
        'ImagePullBackOff: Back-off pulling image "redis:does-not-exist"'
    )

    # Past the deadline since the pods last moved, as the status records it.
    moved = parse_time(st[PROGRESS_FIELD])
    assert moved is not None, st
    due = moved + timedelta(seconds=float(deadline[1]) + 1)
    wait_for(lambda: datetime.now(UTC) >= due, what=f"{due}", timeout=30)
    flagged = reconciler.sync(ns, *deadline)
    assert flagged.code == 0
    st = status(kubectl, ns)
    assert condition(st, "Progressing") == ("False", "ProgressDeadlineExceeded")
    assert condition(st, "Degraded") == ("True", "ProgressDeadlineExceeded")
    assert columns(kubectl, ns)["STATUS"] == "ProgressDeadlineExceeded"
    assert len(events(kubectl, ns, "ProgressDeadlineExceeded")) == 1
    shown = reconciler.cli("plan", "-n", ns, *deadline).stdout
    assert "ProgressDeadlineExceeded" in shown and "ImagePullBackOff" in shown
    # Nothing moves: later passes write nothing, and --wait says it will not converge.
    stays_converged(kubectl, reconciler, ns, *deadline)
    waited = reconciler.sync(ns, *deadline, "--wait", "--timeout", "20", expect=1)
    assert "ProgressDeadlineExceeded" in json.dumps(waited.summary)

    # Fixing the spec finishes the rollout, and the flag clears.
    patch = {"spec": {"image": "redis:5-alpine"}}
    kubectl.run("patch", "redis", "redis-sample", "-n", ns, "--type=merge", "-p", json.dumps(patch))
    reconciler.converge(ns, *deadline, settle=lambda: settled(kubectl, ns))
    wait_for(lambda: settled(kubectl, ns), what="pods Ready")
    reconciler.converge(ns, *deadline)
    assert columns(kubectl, ns)["STATUS"] == "Ready"


def set_image(kubectl: Kubectl, ns: str, image: str) -> None:
    patch = json.dumps({"spec": {"image": image}})
    kubectl.run("patch", "redis", "redis-sample", "-n", ns, "--type=merge", "-p", patch)


def images(kubectl: Kubectl, ns: str) -> dict[str, str]:
    return {n: p["spec"]["containers"][0]["image"] for n, p in pods(kubectl, ns).items()}


def rolled_to(kubectl: Kubectl, reconciler: Reconciler, ns: str, image: str) -> None:
    """Passes until the pods are Ready: then all three run ``image``, Ready."""
    reconciler.converge(ns, settle=lambda: settled(kubectl, ns))
    wait_for(lambda: settled(kubectl, ns), what="pods Ready")
    reconciler.converge(ns)
    shown = columns(kubectl, ns)
    assert (shown["READY"], shown["UP-TO-DATE"], shown["STATUS"]) == ("3", "3", "Ready")
    assert set(images(kubectl, ns).values()) == {image}


def test_a_fix_rolls_to_a_redis_whose_pods_all_crash(
    kubectl: Kubectl, reconciler: Reconciler, ns: str
):
    """No pod will turn Ready on the old spec, so none is waited for: the
    rollout of the fix replaces every crashing pod in one pass."""
    kubectl.apply(redis_yaml(ns, num=3))
    reconciler.converge(ns, settle=lambda: settled(kubectl, ns))
    before = uids(kubectl, ns)
    for i in range(3):
        kubelet.crash_loop(kubectl, ns, f"redis-sample-{i}")
    reconciler.converge(ns)
    assert columns(kubectl, ns)["READY"] == "0"

    set_image(kubectl, ns, "redis:6-alpine")
    fixed = reconciler.sync(ns)
    assert fixed.summary["actions"]["Pod/delete/ok"] == 3
    assert events(kubectl, ns, "DeletePod") == [
        "Deleted pods redis-sample-0, redis-sample-1, redis-sample-2: "
        "spec changed; not Ready, so replaced without waiting"
    ]
    rolled_to(kubectl, reconciler, ns, "redis:6-alpine")
    assert not set(uids(kubectl, ns).values()) & set(before.values())
    stays_converged(kubectl, reconciler, ns)


def test_a_fixed_image_replaces_the_pods_that_cannot_pull_first(
    kubectl: Kubectl, reconciler: Reconciler, ns: str
):
    """A bad image rolls to redis-sample-0; redis-sample-2, deleted by hand,
    comes back on it too. The fix replaces both at once, without waiting for
    either to turn Ready; the Ready redis-sample-1 serves throughout."""
    kubectl.apply(redis_yaml(ns, num=3))
    reconciler.converge(ns, settle=lambda: settled(kubectl, ns))
    serving = uids(kubectl, ns)["redis-sample-1"]
    set_image(kubectl, ns, "redis:does-not-exist")
    reconciler.sync(ns)  # the first pod of the rollout goes
    wait_for(lambda: "redis-sample-0" not in pods(kubectl, ns), what="redis-sample-0 gone")
    reconciler.sync(ns)  # and comes back with the new image
    kubelet.image_pull_backoff(kubectl, ns, "redis-sample-0")
    kubectl.run("delete", "pod", "redis-sample-2", "-n", ns)
    reconciler.sync(ns)  # recreated on the bad template
    kubelet.image_pull_backoff(kubectl, ns, "redis-sample-2")
    reconciler.converge(ns)  # the rollout waits: redis-sample-1 is the one pod serving
    assert images(kubectl, ns) == {
        "redis-sample-0": "redis:does-not-exist",
        "redis-sample-1": "redis:5-alpine",
        "redis-sample-2": "redis:does-not-exist",
    }

    set_image(kubectl, ns, "redis:5-alpine")
    fixed = reconciler.sync(ns)
    assert fixed.summary["actions"]["Pod/delete/ok"] == 2
    assert (
        "Deleted pods redis-sample-0, redis-sample-2: "
        "spec changed; not Ready, so replaced without waiting"
    ) in events(kubectl, ns, "DeletePod")
    rolled_to(kubectl, reconciler, ns, "redis:5-alpine")
    assert uids(kubectl, ns)["redis-sample-1"] == serving
    stays_converged(kubectl, reconciler, ns)


def test_a_pod_no_node_can_take_is_named_with_the_schedulers_reason(
    kubectl: Kubectl, reconciler: Reconciler, ns: str
):
    selector = node_selector(kubelet.UNSCHEDULABLE_NODE_SELECTOR)
    with mutating_webhook(kubectl, f"{LABEL}={ns}", [selector], namespaces=[ns]):
        kubectl.apply(redis_yaml(ns, num=1))
        reconciler.sync(ns)  # finalizer, pod, status
        kubelet.unschedulable(kubectl, ns, "redis-sample-0")
        reconciler.sync(ns)
        st = status(kubectl, ns)
        # 0 of however many nodes the cluster has (the real node, where it runs).
        assert re.match(
            r"waiting for 1 of 1 pods to be Ready; redis-sample-0 not Ready: "
            r"Unschedulable: 0/\d+ nodes are available: ",
            st["message"],
        ), st["message"]
        stays_converged(kubectl, reconciler, ns)


def test_a_container_that_keeps_crashing_is_named_and_recovers(
    kubectl: Kubectl, reconciler: Reconciler, ns: str
):
    kubectl.apply(redis_yaml(ns, num=2))
    reconciler.converge(ns, settle=lambda: settled(kubectl, ns))
    before = uids(kubectl, ns)
    kubelet.crash_loop(kubectl, ns, "redis-sample-1")
    reconciler.sync(ns)
    st = status(kubectl, ns)
    assert (st["readyReplicas"], st["state"]) == (1, "WaitingForReady")
    assert st["message"].startswith(
        "waiting for 1 of 2 pods to be Ready; redis-sample-1 not Ready: "
        "CrashLoopBackOff: back-off 40s restarting failed container=redis"
    )
    stays_converged(kubectl, reconciler, ns)  # a crashing pod is the kubelet's to restart
    kubelet.ready(kubectl, ns, "redis-sample-1")
    reconciler.converge(ns)
    assert columns(kubectl, ns)["STATUS"] == "Ready"
    assert uids(kubectl, ns) == before
