"""Sharded replicas on the local cluster, proven from the apiserver's audit log.

Three `reconciler run --shard` split 8 buckets; one is killed, one is paused
past its lease and resumed; every Redis still ends with exactly its pods, and
the audit log shows that no replica wrote an object of a bucket it did not
hold, and no bucket was held by two replicas at once.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from . import audit
from .conftest import Kubectl, Reconciler, free_port, wait_for
from .test_leader import Replica
from .test_redis import pods, redis_yaml

BUCKETS = 8
LEASE = {
    "RECONCILER_LEASE_DURATION": "6",
    "RECONCILER_RENEW_DEADLINE": "4",
    "RECONCILER_RETRY_PERIOD": "1",
    "RECONCILER_SHARD_BUCKETS": str(BUCKETS),
}
LEASE_DURATION, RENEW_DEADLINE, RETRY, INTERVAL = 6.0, 4.0, 1.0, 1.0


def held(r: Replica) -> int:
    return int(r.metric("reconciler_shard_buckets_held"))


class Shards:
    def __init__(self, reconciler: Reconciler, ns: str) -> None:
        self.reconciler, self.ns = reconciler, ns
        self.replicas: list[Replica] = []

    def start(self, *extra: str) -> Replica:
        port = free_port()
        proc = self.reconciler.daemon(
            self.ns,
            "--shard",
            "--leader-election-namespace",
            self.ns,
            "--metrics-address",
            f"127.0.0.1:{port}",
            *extra,
            env=LEASE,
            stdout=None,
        )
        r = Replica(proc, port)
        wait_for(lambda: r.get("/readyz")[0] == 200, what="replica ready", timeout=30)
        self.replicas.append(r)
        return r

    def live(self) -> list[Replica]:
        return [r for r in self.replicas if r.proc.poll() is None]

    def balanced(self, n: int) -> bool:
        counts = sorted(held(r) for r in self.live())
        low, high = BUCKETS // n, -(-BUCKETS // n)
        return len(counts) == n and sum(counts) == BUCKETS and all(low <= c <= high for c in counts)

    def stop(self) -> None:
        for r in self.replicas:
            if r.proc.poll() is None:
                r.proc.send_signal(signal.SIGCONT)
                r.proc.send_signal(signal.SIGKILL)
            r.proc.wait(timeout=10)


@pytest.fixture
def shards(reconciler: Reconciler, ns: str) -> Iterator[Shards]:
    s = Shards(reconciler, ns)
    yield s
    s.stop()


@pytest.fixture
def audit_log(cluster: Any) -> Path:
    log = Path(cluster.state_dir) / "logs" / "audit.log"
    if not log.exists():
        pytest.fail(
            f"no audit log at {log}: this cluster was started without it; "
            "restart it (`make cluster-down`, then the tests start it anew)"
        )
    return log


def redis_uids(kubectl: Kubectl, ns: str) -> dict[str, str]:
    items = kubectl.json("get", "redis", "-n", ns)["items"]
    return {o["metadata"]["name"]: o["metadata"]["uid"] for o in items}


def converged(kubectl: Kubectl, ns: str, want: dict[str, int]) -> bool:
    names = set(pods(kubectl, ns))
    expected = {f"{name}-{i}" for name, num in want.items() for i in range(num)}
    return names == expected


def lease_holders(kubectl: Kubectl, ns: str) -> dict[str, str]:
    items = kubectl.json("get", "leases", "-n", ns)["items"]
    return {o["metadata"]["name"]: o["spec"].get("holderIdentity") or "" for o in items}


def apply_all(kubectl: Kubectl, ns: str, want: dict[str, int]) -> None:
    kubectl.apply("---".join(redis_yaml(ns, name=n, num=k) for n, k in want.items()))


def test_replicas_split_the_buckets_and_survive_a_kill_and_a_pause(
    kubectl: Kubectl, ns: str, shards: Shards, audit_log: Path
):
    for _ in range(3):
        shards.start()
    wait_for(lambda: shards.balanced(3), what="8 buckets over 3 replicas", timeout=30)
    holders = lease_holders(kubectl, ns)
    members = {h for n, h in holders.items() if "-member-" in n}
    buckets = {n: h for n, h in holders.items() if "-bucket-" in n}
    assert len(members) == 3 and len(buckets) == BUCKETS
    assert set(buckets.values()) <= members  # every bucket held by a live member

    want = {f"r{i}": 1 for i in range(12)}
    apply_all(kubectl, ns, want)
    wait_for(lambda: converged(kubectl, ns, want), what="12 Redis with their pods", timeout=60)

    # kill -9: its buckets go to the two others within the bound.
    shards.replicas[0].proc.send_signal(signal.SIGKILL)
    shards.replicas[0].proc.wait(timeout=10)
    killed = time.monotonic()
    late = {f"late{i}": 1 for i in range(4)}
    apply_all(kubectl, ns, late)
    want |= late
    wait_for(lambda: converged(kubectl, ns, want), what="Redis made after the kill", timeout=60)
    took = time.monotonic() - killed
    bound = LEASE_DURATION + 2 * INTERVAL + RETRY + 5  # + one pass, and kubectl's own time
    assert took <= bound, f"objects of the killed replica waited {took:.1f}s (bound {bound}s)"
    wait_for(lambda: shards.balanced(2), what="8 buckets over 2 replicas", timeout=30)

    # SIGSTOP past the lease: the other takes its buckets; resumed, it writes
    # nothing of them and joins again as a new member.
    paused = shards.replicas[1]
    paused.proc.send_signal(signal.SIGSTOP)
    time.sleep(LEASE_DURATION + 2 * RETRY)
    want = {name: 2 for name in want}
    apply_all(kubectl, ns, want)
    wait_for(lambda: converged(kubectl, ns, want), what="scaled while one was paused", timeout=60)
    paused.proc.send_signal(signal.SIGCONT)
    wait_for(lambda: shards.balanced(2), what="the resumed replica back in", timeout=30)

    # A one-shot sync beside them: the same preconditions, nothing to do.
    assert shards.reconciler.sync(ns).code == 0
    assert converged(kubectl, ns, want)

    found = audit.violations(
        audit_log, ns, "reconciler", BUCKETS, redis_uids(kubectl, ns), RENEW_DEADLINE
    )
    assert found == []
    replicas = {w.replica for w in audit.writes(audit.events(audit_log, ns))}
    assert len(replicas) == 3, f"every replica wrote: {replicas}"


def test_the_audit_check_catches_a_replica_that_ignores_the_buckets(
    kubectl: Kubectl, ns: str, shards: Shards, audit_log: Path
):
    """A replica of another group holds every bucket of its own and so writes
    objects whose buckets the real group's replicas hold: caught."""
    shards.start()
    shards.start()
    wait_for(lambda: shards.balanced(2), what="8 buckets over 2 replicas", timeout=30)
    shards.start("--leader-election-id", "rogue")
    want = {f"r{i}": 1 for i in range(8)}
    apply_all(kubectl, ns, want)
    wait_for(lambda: converged(kubectl, ns, want), what="8 Redis with their pods", timeout=60)
    time.sleep(2 * INTERVAL)
    found = audit.violations(
        audit_log, ns, "reconciler", BUCKETS, redis_uids(kubectl, ns), RENEW_DEADLINE
    )
    assert any("without holding bucket" in f for f in found), found
