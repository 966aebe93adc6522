"""`reconciler restart redis NAME` on a real apiserver: the passes that
follow roll every pod once, one at a time; further passes roll nothing; a
second restart rolls every pod once more. A dry run and a name that is not
there change nothing."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime

import pytest

from reconciler.model import rfc3339

from .conftest import Kubectl, Reconciler, SyncResult, wait_for
from .test_real_clusters import stays_converged, uids
from .test_redis import redis, redis_yaml, settled

pytestmark = pytest.mark.e2e

NAME = "redis-sample"
NUM = 2
SHOWN = f"redis.myapp.demo.kubebuilder.io/{NAME}"


def created(kubectl: Kubectl, ns: str) -> Counter[str]:
    """How often CreatePod events say each pod was created: an event names
    one pod or several ("Created pods r-0, r-1: scale up"), and one posted
    again for the same pod and reason bumps its count."""
    items = kubectl.json("get", "events", "-n", ns, "--field-selector", "reason=CreatePod")
    made: Counter[str] = Counter()
    for e in items["items"]:
        named = e["message"].split(":")[0].split(" ", 2)[2]  # "Created pod(s) <names>"
        for pod in named.split(", "):
            made[pod] += int(e.get("count") or 1)
    return made


def roll(kubectl: Kubectl, reconciler: Reconciler, ns: str) -> list[SyncResult]:
    """Passes until one writes nothing; never more than one pod replaced in a pass."""
    passes = reconciler.converge(ns, settle=lambda: settled(kubectl, ns), passes=30)
    for p in passes:
        actions = p.summary["actions"]
        gone = actions.get("Pod/evict/ok", 0) + actions.get("Pod/delete/ok", 0)
        assert gone <= 1, f"more than one pod replaced in one pass: {actions}"
    return passes


def restarted_once_each(
    kubectl: Kubectl, reconciler: Reconciler, ns: str, before: dict[str, str], creates: Counter[str]
) -> tuple[dict[str, str], Counter[str]]:
    """After a restart: the passes roll each pod once, then stay still."""
    roll(kubectl, reconciler, ns)
    after = uids(kubectl, ns)
    assert sorted(after) == sorted(before) == [f"{NAME}-{i}" for i in range(NUM)]
    assert not set(after.values()) & set(before.values()), "a pod was not replaced"
    now = created(kubectl, ns)
    assert now - creates == Counter(after.keys()), "not each pod created exactly once"
    stays_converged(kubectl, reconciler, ns)  # passes after it roll nothing more
    assert created(kubectl, ns) == now
    status = redis(kubectl, ns, NAME)["status"]
    assert status["updatedReplicas"] == NUM and status["readyReplicas"] == NUM
    return after, now


def test_restart_rolls_every_pod_once_and_again(kubectl: Kubectl, reconciler: Reconciler, ns: str):
    kubectl.apply(redis_yaml(ns, NAME, num=NUM))
    reconciler.converge(ns, settle=lambda: settled(kubectl, ns))
    wait_for(lambda: settled(kubectl, ns), what="pods Ready")
    stays_converged(kubectl, reconciler, ns)
    before, creates = uids(kubectl, ns), created(kubectl, ns)
    assert creates == Counter(before.keys())  # each pod created once

    # Neither a dry run nor a name that is not there writes anything.
    dry = reconciler.cli("restart", "redis", NAME, "-n", ns, "--dry-run")
    assert dry.stdout == f"{SHOWN} restarted (dry run)\n"
    absent = reconciler.cli("restart", "redis", "absent", "-n", ns, expect=1)
    assert absent.stderr == (
        f'reconciler: error: redis.myapp.demo.kubebuilder.io "absent" not found'
        f' in namespace "{ns}"\n'
    )
    assert "restartedAt" not in redis(kubectl, ns, NAME)["spec"]
    stays_converged(kubectl, reconciler, ns)

    first = reconciler.cli("restart", "redis", NAME, "-n", ns)
    assert (first.stdout, first.stderr) == (f"{SHOWN} restarted\n", "")
    stamp = redis(kubectl, ns, NAME)["spec"]["restartedAt"]
    assert datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")  # RFC 3339, UTC, seconds
    before, creates = restarted_once_each(kubectl, reconciler, ns, before, creates)

    # Again: a new time, every pod once more. (A restart in the same second
    # as the last writes the same value, and rolls nothing.)
    wait_for(lambda: rfc3339(datetime.now(UTC)) != stamp, what="the clock past the first stamp")
    again = reconciler.cli("restart", "redis", NAME, "-n", ns, "-o", "json")
    doc = json.loads(again.stdout)
    assert doc["result"] == "restarted" and doc["exit_code"] == 0
    assert doc["restarted_at"] == redis(kubectl, ns, NAME)["spec"]["restartedAt"] != stamp
    restarted_once_each(kubectl, reconciler, ns, before, creates)
