"""Sharded replicas on Leases, against a compare-and-swap Lease store.

The property that matters: at no instant do two members both hold (may
write) one bucket, whatever order their rounds run in, whoever is paused or
killed; and once they are left alone, every bucket is held, balanced.
"""

from __future__ import annotations

import copy
import dataclasses
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.buckets import bucket_of
from reconciler.client.errors import ApiError, Unreachable
from reconciler.run.shard import ShardConfig, ShardMember

CFG = ShardConfig(
    namespace="ns",
    name="rec",
    buckets=8,
    lease_duration=15,
    renew_deadline=10,
    retry_period=2,
    interval=30,
)


class LeaseStore:
    """Leases by name: create, get, list, PUT and DELETE guarded by resourceVersion."""

    def __init__(self) -> None:
        self.leases: dict[str, dict] = {}
        self.rv = 0
        self.down = False
        self.writes: list[tuple[str, str]] = []

    def _check(self) -> None:
        if self.down:
            raise Unreachable("connection refused")

    def _stored(self, body: dict) -> dict:
        self.rv += 1
        lease = copy.deepcopy(body)
        lease["metadata"]["resourceVersion"] = str(self.rv)
        self.leases[lease["metadata"]["name"]] = lease
        return copy.deepcopy(lease)

    def list(self, res, ns, selector):
        self._check()
        return [copy.deepcopy(v) for v in self.leases.values()]

    def get(self, res, ns, name):
        self._check()
        if name not in self.leases:
            raise ApiError(404, "NotFound", "not found")
        return copy.deepcopy(self.leases[name])

    def create(self, res, ns, body):
        self._check()
        if body["metadata"]["name"] in self.leases:
            raise ApiError(409, "AlreadyExists", "exists")
        self.writes.append(("create", body["metadata"]["name"]))
        return self._stored(body)

    def replace(self, res, ns, name, body):
        self._check()
        if name not in self.leases:
            raise ApiError(404, "NotFound", "not found")
        if body["metadata"]["resourceVersion"] != self.leases[name]["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", "the object has been modified")
        self.writes.append(("replace", name))
        return self._stored(body)

    def delete(self, res, ns, name, uid=None, *, resource_version=None):
        self._check()
        if name not in self.leases:
            raise ApiError(404, "NotFound", "not found")
        if (
            resource_version
            and resource_version != self.leases[name]["metadata"]["resourceVersion"]
        ):
            raise ApiError(409, "Conflict", "precondition failed")
        self.writes.append(("delete", name))
        del self.leases[name]


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def members(store: LeaseStore, clock: Clock, n: int) -> list[ShardMember]:
    wall = lambda: datetime(2026, 1, 1, tzinfo=UTC)  # noqa: E731
    return [
        ShardMember(store, CFG.__class__(**{**CFG.__dict__, "identity": f"m{i}"}), clock, wall)
        for i in range(n)
    ]


def assert_no_bucket_held_twice(ms: list[ShardMember]) -> None:
    seen: dict[int, str] = {}
    for m in ms:
        for b in m.held():
            assert b not in seen, f"bucket {b} held by {seen[b]} and {m.identity}"
            seen[b] = m.identity


def settle(ms: list[ShardMember], clock: Clock, rounds: int = 4) -> None:
    for _ in range(rounds):
        for m in ms:
            m.round()
            assert_no_bucket_held_twice(ms)
            m.hand_back()
            assert_no_bucket_held_twice(ms)
        clock.t += CFG.retry_period


def held_counts(ms: list[ShardMember]) -> list[int]:
    return sorted(len(m.held()) for m in ms)


def test_three_members_hold_every_bucket_once_and_balanced():
    store, clock = LeaseStore(), Clock()
    ms = members(store, clock, 3)
    settle(ms, clock)
    assert set().union(*(m.held() for m in ms)) == set(range(8))
    assert held_counts(ms) == [2, 3, 3]


def test_a_steady_round_writes_only_its_own_member_lease():
    store, clock = LeaseStore(), Clock()
    ms = members(store, clock, 3)
    settle(ms, clock)
    store.writes.clear()
    settle(ms, clock, rounds=1)
    assert sorted(store.writes) == sorted(
        ("replace", m.config.member_lease(m.identity)) for m in ms
    )


def test_a_killed_member_loses_its_buckets_to_the_others_after_its_lease_duration():
    store, clock = LeaseStore(), Clock()
    ms = members(store, clock, 3)
    settle(ms, clock)
    dead, alive = ms[0], ms[1:]
    orphaned = dead.held()
    t0 = clock.t
    while not orphaned <= set().union(*(m.held() for m in alive)):
        settle(alive, clock, rounds=1)
        assert clock.t - t0 <= CFG.lease_duration + 3 * CFG.retry_period
    settle(alive, clock, rounds=2)
    assert held_counts(alive) == [4, 4]


def test_a_member_that_leaves_frees_its_buckets_at_once():
    store, clock = LeaseStore(), Clock()
    ms = members(store, clock, 3)
    settle(ms, clock)
    ms[0].leave()
    assert ms[0].held() == frozenset()
    settle(ms[1:], clock, rounds=2)
    assert held_counts(ms[1:]) == [4, 4]


def test_a_zombie_writes_nothing_once_past_its_deadline_and_comes_back_as_someone_new():
    store, clock = LeaseStore(), Clock()
    ms = members(store, clock, 3)
    settle(ms, clock)
    zombie, others = ms[0], ms[1:]
    old_identity, had = zombie.identity, zombie.held()
    assert had
    clock.t += CFG.renew_deadline + 0.1
    assert zombie.held() == frozenset()  # stopped: no renewal within the deadline
    settle(others, clock, rounds=6)  # its lease is deleted, its buckets taken
    assert had <= set().union(*(m.held() for m in others))
    zombie.round()  # resumed: its renewal finds its lease gone
    assert zombie.identity != old_identity
    assert_no_bucket_held_twice(ms)
    settle(ms, clock)
    assert held_counts(ms) == [2, 3, 3]


def test_a_member_writes_for_the_buckets_it_holds_and_retries_while_it_holds_any():
    """Its write fence (`Holder.may_write`): a uid of a held bucket, and a
    retry (no uid); nothing once past its renew deadline."""
    store, clock = LeaseStore(), Clock()
    ms = members(store, clock, 2)
    assert not ms[0].may_write() and not ms[0].may_write("a")
    settle(ms, clock)
    uids = [f"uid-{i}" for i in range(40)]
    for m in ms:
        assert m.may_write()
        assert [u for u in uids if m.may_write(u)] == [
            u for u in uids if bucket_of(u, CFG.buckets) in m.held()
        ]
    assert {u for u in uids if ms[0].may_write(u)}.isdisjoint(u for u in uids if ms[1].may_write(u))
    clock.t += CFG.renew_deadline + 0.1
    assert not ms[0].may_write() and not any(ms[0].may_write(u) for u in uids)


def test_a_member_that_cannot_reach_the_apiserver_stops_at_its_renew_deadline():
    store, clock = LeaseStore(), Clock()
    (m,) = members(store, clock, 1)
    settle([m], clock)
    m.round()
    assert len(m.held()) == 8
    store.down = True
    clock.t += CFG.renew_deadline - 1
    m.round()
    assert len(m.held()) == 8
    clock.t += 2
    m.round()
    assert m.held() == frozenset()


def test_a_renewal_whose_answer_was_lost_is_not_taken_for_eviction():
    store, clock = LeaseStore(), Clock()
    (m,) = members(store, clock, 1)
    settle([m], clock)
    identity = m.identity
    # Our PUT landed but its answer did not: our copy is one version behind.
    store.replace(None, "ns", m.config.member_lease(identity), m.member.encode("ns"))
    m.round()
    m.round()
    assert m.identity == identity and len(m.held()) == 8


def test_a_member_told_of_an_object_of_its_bucket_under_another_label_lists_everything_once():
    store, clock = LeaseStore(), Clock()
    ms = members(store, clock, 2)
    settle(ms, clock)
    seer, holder = ms
    assert holder.scope().select and seer.scope().select
    lost = min(holder.held())  # an object of this bucket carries a label of the seer's
    seer.report(frozenset({lost}))
    settle(ms, clock, rounds=1)  # the seer renews with the report; the holder reads it
    assert not holder.scope().select
    assert seer.scope().select  # not its bucket: nothing for it to find
    seer.report(frozenset())  # the holder put the label back: the seer sees none
    settle(ms, clock, rounds=1)
    assert holder.scope().select


def test_a_report_of_a_member_that_is_gone_is_not_heeded():
    store, clock = LeaseStore(), Clock()
    ms = members(store, clock, 2)
    settle(ms, clock)
    seer, holder = ms
    seer.report(frozenset(holder.held()))
    settle(ms, clock, rounds=1)
    seer.leave()
    settle([holder], clock, rounds=1)
    assert holder.scope().select


steps = st.lists(
    st.tuples(st.sampled_from(["round", "hand_back", "tick", "pause", "leave"]), st.integers(0, 3)),
    max_size=80,
)


@settings(max_examples=150, deadline=None)
@given(steps)
def test_no_bucket_is_ever_held_by_two_members(script):
    """Rounds in any order, members paused past their lease, members leaving
    and coming back: at no instant may two members write one bucket."""
    store, clock = LeaseStore(), Clock()
    ms = members(store, clock, 4)
    for what, i in script:
        m = ms[i]
        if what == "round":
            m.round()
        elif what == "hand_back":
            m.hand_back()
        elif what == "tick":
            clock.t += CFG.retry_period
        elif what == "pause":
            clock.t += CFG.lease_duration + 1
        elif what == "leave":
            m.leave()
        assert_no_bucket_held_twice(ms)
    settle(ms, clock, rounds=CFG.buckets + 4)
    assert set().union(*(m.held() for m in ms)) == set(range(CFG.buckets))
    assert held_counts(ms) == [2, 2, 2, 2]


def test_a_round_that_crashes_does_not_end_the_rounds(caplog: pytest.LogCaptureFixture) -> None:
    import threading

    (member,) = members(LeaseStore(), Clock(), 1)
    stop, rounds = threading.Event(), []

    def round() -> None:
        rounds.append(1)
        if len(rounds) == 1:
            raise OSError(22, "Invalid argument")
        stop.set()

    member.round = round  # type: ignore[method-assign]
    member.config = dataclasses.replace(member.config, retry_period=0.0)
    member.run(stop, threading.Lock())
    assert len(rounds) == 2
    assert "shard: round crashed" in caplog.text
    assert member.sighting.last_error == "[Errno 22] Invalid argument"
