"""Sharded replicas on the local cluster, proven from the apiserver's audit log.

Three `reconciler run --shard` split 8 buckets; one is killed, one is paused
past its lease and resumed; every Redis still ends with exactly its pods, and
the audit log shows that no replica wrote an object of a bucket it did not
hold, and no bucket was held by two replicas at once.
"""

from __future__ import annotations

import glob
import random
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reconciler.buckets import bucket_of
from reconciler.model import LABEL_BUCKET

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

    def start(self, *extra: str, env: dict[str, str] | None = None) -> Replica:
        port = free_port()
        proc = self.reconciler.daemon(
            self.ns,
            "--shard",
            "--leader-election-namespace",
            self.ns,
            "--metrics-address",
            f"127.0.0.1:{port}",
            *extra,
            env=LEASE | (env or {}),
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


def apply_all(
    kubectl: Kubectl,
    ns: str,
    want: dict[str, int],
    uids: dict[str, str] | None = None,
    port: int = 6379,
) -> None:
    """Apply these Redis; note their uids in ``uids`` (the audit log names
    objects, and a deleted one's uid is gone from the cluster)."""
    kubectl.apply("---".join(redis_yaml(ns, name=n, num=k, port=port) for n, k in want.items()))
    if uids is not None:
        uids.update(redis_uids(kubectl, ns))


def no_violations(audit_log: Path, ns: str, uids: dict[str, str]) -> None:
    found = audit.violations(audit_log, ns, "reconciler", BUCKETS, uids, RENEW_DEADLINE)
    assert found == []


def cover_every_holder(kubectl: Kubectl, ns: str, by_bucket: dict[int, str]) -> dict[str, int]:
    """Add Redis until every holder's buckets hold one of them, and return
    those added: uids hash at random, and 12 objects leave a replica holding
    3 of 8 buckets with none about once in 300 runs, so the test could not
    see it write."""
    added: dict[str, int] = {}
    for i in range(64):
        uids = redis_uids(kubectl, ns).values()
        if {by_bucket[bucket_of(u, BUCKETS)] for u in uids} == set(by_bucket.values()):
            return added
        extra = {f"extra{i}": 1}
        apply_all(kubectl, ns, extra)
        added |= extra
    pytest.fail(f"64 more Redis and still a holder of none: {by_bucket}")


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

    by_bucket = {int(n.rsplit("-", 1)[1]): h for n, h in buckets.items()}

    want = {f"r{i}": 1 for i in range(12)}
    apply_all(kubectl, ns, want)
    want |= cover_every_holder(kubectl, ns, by_bucket)
    wait_for(lambda: converged(kubectl, ns, want), what="Redis with their pods", timeout=60)

    # A bucket label changed by hand to another replica's bucket: that one
    # lists the object and reports it; its holder lists everything once, as
    # metadata, and puts the label back.
    uid = redis_uids(kubectl, ns)["r0"]
    true = bucket_of(uid, BUCKETS)
    wrong = next(b for b in range(BUCKETS) if by_bucket[b] != by_bucket[true])
    kubectl.run("label", "redis", "r0", "-n", ns, f"{LABEL_BUCKET}={wrong}", "--overwrite")

    def label_back() -> bool:
        meta = kubectl.json("get", "redis", "r0", "-n", ns)["metadata"]
        return meta["labels"].get(LABEL_BUCKET) == str(true)

    wait_for(label_back, what="the true bucket label back on r0", timeout=15)

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
    other = shards.replicas[2]
    wait_for(lambda: held(other) == BUCKETS, what="the other holding every bucket", timeout=30)
    want = {name: 2 for name in want}
    apply_all(kubectl, ns, want)
    wait_for(lambda: converged(kubectl, ns, want), what="scaled while one was paused", timeout=60)
    paused.proc.send_signal(signal.SIGCONT)
    wait_for(lambda: shards.balanced(2), what="the resumed replica back in", timeout=30)

    # A one-shot sync beside them: the same preconditions, nothing to do.
    assert shards.reconciler.sync(ns).code == 0
    assert converged(kubectl, ns, want)

    no_violations(audit_log, ns, redis_uids(kubectl, ns))
    replicas = {w.replica for w in audit.writes(audit.events(audit_log, ns))}
    assert len(replicas) == 3, f"every replica wrote: {replicas}"
    # Each replica names itself in its user agent, yet every write names one
    # field manager: managedFields does not grow with replicas and restarts.
    shown = ("-n", ns, "--show-managed-fields")
    objects = [*kubectl.json("get", "pods", *shown)["items"]]
    objects += kubectl.json("get", "redis", *shown)["items"]
    ours = {
        m["manager"]
        for o in objects
        for m in o["metadata"].get("managedFields", [])
        if m["manager"].startswith("reconciler")
    }
    assert ours == {"reconciler"}


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
    uids = redis_uids(kubectl, ns)

    def caught() -> list[str]:
        found = audit.violations(audit_log, ns, "reconciler", BUCKETS, uids, RENEW_DEADLINE)
        return found if any("without holding bucket" in f for f in found) else []

    wait_for(caught, what="the audit log to show a write without its bucket", timeout=30)


def test_a_fourth_replica_and_a_rolling_restart_during_a_rollout(
    kubectl: Kubectl, ns: str, shards: Shards, audit_log: Path
):
    """Buckets follow the members as one joins and each is restarted in turn,
    while every Redis rolls its pods to a new port: the rollout still replaces
    one pod of a Redis at a time across the handovers."""
    for _ in range(3):
        shards.start()
    wait_for(lambda: shards.balanced(3), what="8 buckets over 3 replicas", timeout=30)
    uids: dict[str, str] = {}
    want = {f"r{i}": 3 for i in range(6)}
    apply_all(kubectl, ns, want, uids)
    wait_for(lambda: converged(kubectl, ns, want), what="6 Redis with 3 pods each", timeout=60)

    joined = time.monotonic()
    shards.start()
    wait_for(lambda: shards.balanced(4), what="8 buckets over 4 replicas", timeout=30)
    assert time.monotonic() - joined <= 15, "a new replica got its share within a few rounds"

    apply_all(kubectl, ns, want, uids, port=6380)  # every pod stale: a rollout
    for old in list(shards.live()):
        old.proc.send_signal(signal.SIGTERM)
        assert old.proc.wait(timeout=30) == 0
        shards.start()
        wait_for(lambda: shards.balanced(4), what="4 replicas again", timeout=30)

    def rolled() -> bool:
        found = pods(kubectl, ns)
        ports = {p["spec"]["containers"][0]["ports"][0]["containerPort"] for p in found.values()}
        return converged(kubectl, ns, want) and ports == {6380}

    wait_for(rolled, what="every pod on the new port", timeout=120)
    no_violations(audit_log, ns, uids)
    assert audit.rollout_breaks(audit_log, ns) == []


# libfaketime preloaded into the replica itself: the `faketime` command would
# run it as a child, which a SIGKILL of the command would leave behind.
FAKETIME = next(iter(glob.glob("/usr/lib/*/faketime/libfaketimeMT.so.1")), None)


@pytest.mark.skipif(FAKETIME is None, reason="libfaketime: `make deps` installs faketime")
def test_a_replica_whose_wall_clock_is_minutes_off(
    kubectl: Kubectl, ns: str, shards: Shards, audit_log: Path
):
    """Liveness is measured on each replica's own monotonic clock: a replica
    five minutes ahead neither takes live buckets nor loses its own, and its
    death is noticed in the same time as any other's."""
    # The wall clock only: each host's monotonic clock is its own anyway (and
    # libfaketime's faked one stalls timed waits).
    assert FAKETIME is not None
    skew = {"LD_PRELOAD": FAKETIME, "FAKETIME": "+5m", "DONT_FAKE_MONOTONIC": "1"}
    skewed = shards.start(env=skew)
    shards.start()
    shards.start()
    wait_for(lambda: shards.balanced(3), what="8 buckets over 3 replicas", timeout=30)
    uids: dict[str, str] = {}
    want = {f"r{i}": 1 for i in range(9)}
    apply_all(kubectl, ns, want, uids)
    wait_for(lambda: converged(kubectl, ns, want), what="9 Redis with their pods", timeout=60)
    time.sleep(LEASE_DURATION + 2 * RETRY)  # past a lease: no one took the skewed one's buckets
    assert shards.balanced(3) and held(skewed) >= BUCKETS // 3
    shards.replicas[1].proc.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    wait_for(lambda: shards.balanced(2), what="the killed one's buckets taken", timeout=30)
    took = time.monotonic() - killed
    assert took <= LEASE_DURATION + 2 * INTERVAL + RETRY + 5
    no_violations(audit_log, ns, uids)


def test_random_kills_and_restarts_while_redis_come_and_go(
    kubectl: Kubectl, ns: str, shards: Shards, audit_log: Path
):
    """A minute of SIGKILLs, SIGTERMs and restarts of three replicas while
    Redis objects are created, scaled and deleted; then every Redis ends with
    exactly its pods, within the bound after the last disturbance, and no
    replica wrote outside the buckets it held."""
    rnd = random.Random(20261125)
    for _ in range(3):
        shards.start()
    wait_for(lambda: shards.balanced(3), what="8 buckets over 3 replicas", timeout=30)
    uids: dict[str, str] = {}
    want: dict[str, int] = {}
    ends = time.monotonic() + 60
    while time.monotonic() < ends:
        live = shards.live()
        victim = rnd.choice(live)
        if rnd.random() < 0.5:
            victim.proc.send_signal(signal.SIGKILL)
        else:
            victim.proc.send_signal(signal.SIGTERM)
        victim.proc.wait(timeout=30)
        if want and rnd.random() < 0.25:
            name = rnd.choice(sorted(want))
            kubectl.run("delete", "redis", name, "-n", ns, "--wait=false")
            del want[name]
        else:
            # A new name each time a Redis is made: the audit log names objects,
            # and a name used again would stand for two uids.
            name = rnd.choice([*sorted(want), f"r{len(uids)}"])
            want[name] = rnd.randint(0, 3)
            apply_all(kubectl, ns, {name: want[name]}, uids)
        shards.start()
        time.sleep(rnd.uniform(1, 6))
    last = time.monotonic()
    wait_for(lambda: converged(kubectl, ns, want), what="every Redis with its pods", timeout=90)
    took = time.monotonic() - last
    bound = LEASE_DURATION + 2 * INTERVAL + RETRY + 10
    assert took <= bound, f"converged {took:.1f}s after the last disturbance (bound {bound}s)"
    wait_for(lambda: shards.balanced(3), what="8 buckets over the 3 left", timeout=30)
    no_violations(audit_log, ns, uids)
