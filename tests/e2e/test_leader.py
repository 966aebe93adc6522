"""Two daemons, one cluster: exactly one writes, and the other takes over."""

from __future__ import annotations

import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from .conftest import Kubectl, Reconciler, free_port, wait_for
from .test_redis import pods, redis_yaml

LEASE = {
    "RECONCILER_LEASE_DURATION": "6",
    "RECONCILER_RENEW_DEADLINE": "4",
    "RECONCILER_RETRY_PERIOD": "1",
}
INTERVAL = 1.0


@dataclass
class Replica:
    proc: subprocess.Popen[str]
    port: int

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=2) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, ""
        except OSError:
            return 0, ""

    def metric(self, name: str) -> float:
        """Sum of a metric's samples (0 when absent)."""
        _, body = self.get("/metrics")
        total = 0.0
        for line in body.splitlines():
            if line.startswith(name) and not line.startswith("#"):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def writes(self) -> float:
        """Writes the apiserver accepted. Both replicas may try to create the
        Lease at start-up; the one that loses gets 409 and wrote nothing."""
        _, body = self.get("/metrics")
        return sum(
            float(m.group(2))
            for m in re.finditer(
                r"reconciler_api_requests_total"
                r'\{code="2\d\d",verb="(POST|PATCH|PUT|DELETE)"\} (\S+)',
                body,
            )
        )

    @property
    def leader(self) -> bool:
        return self.metric("reconciler_leader") == 1.0


@pytest.fixture
def replicas(reconciler: Reconciler, ns: str) -> Iterator[list[Replica]]:
    started = []
    for _ in range(2):
        port = free_port()
        proc = reconciler.daemon(
            ns,
            "--leader-elect",
            "--leader-election-namespace",
            ns,
            "--metrics-address",
            f"127.0.0.1:{port}",
            env=LEASE,
        )
        started.append(Replica(proc, port))
    for r in started:
        wait_for(lambda r=r: r.get("/readyz")[0] == 200, what="replica ready", timeout=30)
    yield started
    for r in started:
        if r.proc.poll() is None:
            r.proc.send_signal(signal.SIGKILL)
        r.proc.wait(timeout=10)


def the_leader(replicas: list[Replica]) -> tuple[Replica, Replica]:
    leaders = wait_for(lambda: [r for r in replicas if r.leader] or None, what="a leader")
    assert len(leaders) == 1, "two leaders at once"
    follower = next(r for r in replicas if r is not leaders[0])
    return leaders[0], follower


def test_exactly_one_replica_writes(kubectl: Kubectl, ns: str, replicas: list[Replica]):
    leader, follower = the_leader(replicas)
    kubectl.apply(redis_yaml(ns, num=2))
    wait_for(lambda: len(pods(kubectl, ns)) == 2, what="pods from the leader")
    passes = leader.metric("reconciler_passes_total")
    wait_for(
        lambda: leader.metric("reconciler_passes_total") >= passes + 3,
        what="three more passes of the leader (the follower ticks alike)",
    )
    assert leader.writes() > 0
    assert follower.writes() == 0
    assert follower.metric("reconciler_passes_total") == 0
    assert not follower.leader
    assert follower.get("/healthz")[0] == 200  # a standby is healthy, not stalled
    holder = kubectl.json("get", "lease", "reconciler", "-n", ns)["spec"]["holderIdentity"]
    assert holder  # held by exactly one identity


def test_killed_leader_is_replaced_within_lease_duration(
    kubectl: Kubectl, ns: str, replicas: list[Replica]
):
    leader, follower = the_leader(replicas)
    leader.proc.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    wait_for(lambda: follower.leader, what="takeover", timeout=30, interval=0.1)
    took = time.monotonic() - killed
    assert took <= 6 + INTERVAL + 1.5, f"takeover took {took:.1f}s"
    kubectl.apply(redis_yaml(ns, name="after", num=1))
    wait_for(lambda: "after-0" in pods(kubectl, ns), what="the new leader to reconcile")
    lease = kubectl.json("get", "lease", "reconciler", "-n", ns)["spec"]
    assert lease["leaseTransitions"] >= 1


def test_terminated_leader_releases_the_lease(kubectl: Kubectl, ns: str, replicas: list[Replica]):
    leader, follower = the_leader(replicas)
    leader.proc.send_signal(signal.SIGTERM)
    stopped = time.monotonic()
    assert leader.proc.wait(timeout=20) == 0
    wait_for(lambda: follower.leader, what="takeover", timeout=30, interval=0.1)
    took = time.monotonic() - stopped
    assert took < 6, f"a released lease should be taken over at once, took {took:.1f}s"
    out = leader.proc.stdout.read() if leader.proc.stdout else ""
    assert "released lease" in out
