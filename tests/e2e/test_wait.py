"""`reconciler sync --wait` on the real apiserver: it blocks until the Redis
objects are served, fails fast on what only a person can fix, and exits 4 on
a timeout with what is still pending."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator

import pytest

from .conftest import Kubectl, Reconciler
from .test_redis import redis, redis_yaml

pytestmark = pytest.mark.e2e


def sync_wait(reconciler: Reconciler, ns: str, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "reconciler", "sync", "--wait", "-n", ns]
    cmd += ["--kubeconfig", str(reconciler.kubeconfig), *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_wait_returns_once_every_redis_is_ready(
    kubectl: Kubectl, reconciler: Reconciler, ns: str
) -> None:
    kubectl.apply(redis_yaml(ns, num=3))
    done = sync_wait(reconciler, ns, "--timeout", "60")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1].startswith("converged after ")
    # The first pass creates the pods; Ready is written later; an empty plan ends it.
    assert "Pod/create/ok=3" in lines[0]
    assert "no changes" in lines[-2]
    status = redis(kubectl, ns)["status"]
    assert (status["readyReplicas"], status["state"]) == (3, "Ready")

    again = reconciler.sync(ns, "--wait", "--timeout", "60")
    assert again.summary["wait"] == {
        "result": "converged",
        "passes": 1,
        "seconds": again.summary["wait"]["seconds"],
        "timeout_seconds": 60.0,
    }
    assert again.writes == 0


def test_wait_fails_at_once_when_only_a_person_can_help(
    kubectl: Kubectl, reconciler: Reconciler, ns: str
) -> None:
    # A pod the Redis does not own holds one of the names it wants.
    kubectl.run("run", "redis-sample-0", "-n", ns, "--image=nginx", "--restart=Never")
    kubectl.apply(redis_yaml(ns, num=2))
    stuck = sync_wait(reconciler, ns, "--timeout", "60")
    assert stuck.returncode == 1, stuck.stdout + stuck.stderr
    lines = stuck.stdout.splitlines()
    assert "nothing is in motion and 1 object not Ready" in lines[-2]
    assert lines[-1].startswith(f"  Redis {ns}/redis-sample: PodConflict: ")
    assert "redis-sample-0" in lines[-1]


@pytest.fixture
def cordoned(kubectl: Kubectl) -> Iterator[None]:
    """No node takes new pods, so they stay Pending."""
    nodes = [n["metadata"]["name"] for n in kubectl.json("get", "nodes")["items"]]
    kubectl.run("cordon", *nodes)
    try:
        yield
    finally:
        kubectl.run("uncordon", *nodes)


@pytest.mark.serial("cordons every node: no other test's new pod is scheduled meanwhile")
def test_wait_times_out_with_exit_4_and_names_what_is_pending(
    kubectl: Kubectl, reconciler: Reconciler, ns: str, cordoned: None
) -> None:
    kubectl.apply(redis_yaml(ns, num=2))
    late = sync_wait(reconciler, ns, "--timeout", "4")
    assert late.returncode == 4, late.stdout + late.stderr
    lines = late.stdout.splitlines()
    assert "timed out after " in lines[-2] and lines[-2].endswith(": 1 object not Ready")
    # The nodes are cordoned: the scheduler says so on each pod, and the line says why.
    assert re.match(
        rf"  Redis {ns}/redis-sample: WaitingForReady: waiting for 2 of 2 pods to be Ready; "
        r"redis-sample-0 not Ready: Unschedulable: 0/(\d+) nodes are available: "
        r"\1 node\(s\) were unschedulable\.",
        lines[-1],
    ), lines[-1]
    assert "; redis-sample-1 not Ready: Unschedulable: " in lines[-1]
    assert "next pass in" in late.stderr  # it kept looking while it waited
