"""Leader election: client-go's algorithm against a compare-and-swap Lease store."""

from __future__ import annotations

import copy
from datetime import UTC, datetime

from reconciler.client.errors import ApiError, Unreachable
from reconciler.run.leader import LeaderElector, LeaseConfig


class LeaseStore:
    """Just enough of the API for Leases: create, get, and PUT guarded by resourceVersion."""

    def __init__(self) -> None:
        self.lease: dict | None = None
        self.rv = 0
        self.down = False

    def _check(self) -> None:
        if self.down:
            raise Unreachable("connection refused")

    def get(self, kind, ns, name):
        self._check()
        if self.lease is None:
            raise ApiError(404, "NotFound", "lease not found")
        return copy.deepcopy(self.lease)

    def create(self, kind, ns, body):
        self._check()
        if self.lease is not None:
            raise ApiError(409, "AlreadyExists", "exists")
        self.rv += 1
        self.lease = copy.deepcopy(body)
        self.lease["metadata"]["resourceVersion"] = str(self.rv)
        return copy.deepcopy(self.lease)

    def replace(self, kind, ns, name, body):
        self._check()
        assert self.lease is not None
        if body["metadata"]["resourceVersion"] != self.lease["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", "the object has been modified")
        self.rv += 1
        self.lease = copy.deepcopy(body)
        self.lease["metadata"]["resourceVersion"] = str(self.rv)
        return copy.deepcopy(self.lease)


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


CFG = LeaseConfig(
    namespace="ns", name="lease", lease_duration=15, renew_deadline=10, retry_period=2
)


def elector(store, clock, who, wall=None):
    return LeaderElector(
        store,
        LeaseConfig(**{**CFG.__dict__, "identity": who}),
        clock,
        wall or (lambda: datetime(2026, 1, 1, tzinfo=UTC)),
    )


def test_first_comer_creates_the_lease_and_leads():
    store, clock = LeaseStore(), Clock()
    a = elector(store, clock, "a")
    assert a.try_acquire_or_renew() and a.is_leader
    spec = store.lease["spec"]
    assert spec["holderIdentity"] == "a" and spec["leaseTransitions"] == 0
    assert spec["leaseDurationSeconds"] == 15 and spec["renewTime"].endswith("Z")


def test_a_valid_lease_keeps_others_out_until_it_expires_on_their_clock():
    store, clock = LeaseStore(), Clock()
    a, b = elector(store, clock, "a"), elector(store, clock, "b")
    a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    clock.t += 14  # a stops renewing; b first saw the record 14 s ago
    assert not b.try_acquire_or_renew()
    clock.t += 2
    assert b.try_acquire_or_renew() and b.is_leader
    assert store.lease["spec"]["holderIdentity"] == "b"
    assert store.lease["spec"]["leaseTransitions"] == 1


def test_renewals_keep_the_lease_alive_for_the_holder():
    store, clock = LeaseStore(), Clock()
    a, b = elector(store, clock, "a"), elector(store, clock, "b")
    a.try_acquire_or_renew()
    for _ in range(20):
        clock.t += 2
        assert a.try_acquire_or_renew()
        assert not b.try_acquire_or_renew()
    assert store.lease["spec"]["leaseTransitions"] == 0


def test_skewed_wall_clocks_do_not_matter():
    """b's wall clock is an hour ahead; validity uses b's monotonic observation."""
    store, clock = LeaseStore(), Clock()
    a = elector(store, clock, "a", lambda: datetime(2026, 1, 1, 0, 0, tzinfo=UTC))
    b = elector(store, clock, "b", lambda: datetime(2026, 1, 1, 1, 0, tzinfo=UTC))
    a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()


def test_leader_steps_down_when_renewal_fails_past_the_deadline():
    store, clock = LeaseStore(), Clock()
    a = elector(store, clock, "a")
    a.try_acquire_or_renew()
    store.down = True
    clock.t += 9
    assert a.try_acquire_or_renew()  # still within renew_deadline
    clock.t += 2
    assert not a.try_acquire_or_renew() and not a.is_leader


def test_concurrent_acquire_is_decided_by_resource_version():
    store, clock = LeaseStore(), Clock()
    a, b = elector(store, clock, "a"), elector(store, clock, "b")
    a.try_acquire_or_renew()
    a.release()
    # Both see the released lease; only the first PUT wins.
    lease_seen = store.get("Lease", "ns", "lease")
    assert b.try_acquire_or_renew()
    store.lease, stale = store.lease, lease_seen
    try:
        store.replace("Lease", "ns", "lease", {**stale, "spec": {"holderIdentity": "a"}})
        raise AssertionError("a stale resourceVersion must conflict")
    except ApiError as exc:
        assert exc.status == 409


def test_release_lets_a_standby_take_over_at_once():
    store, clock = LeaseStore(), Clock()
    a, b = elector(store, clock, "a"), elector(store, clock, "b")
    a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    a.release()
    assert not a.is_leader and store.lease["spec"]["holderIdentity"] == ""
    assert b.try_acquire_or_renew()  # no need to wait out the lease


def test_leadership_changes_are_reported():
    store, clock = LeaseStore(), Clock()
    seen = []
    a = elector(store, clock, "a")
    a.on_change = seen.append
    a.try_acquire_or_renew()
    a.release()
    assert seen == [True, False]


def test_a_sighting_is_trouble_only_past_the_lease_duration_without_one() -> None:
    from reconciler.run.leader import Sighting

    now = [100.0]
    seen = Sighting(lambda: now[0], 6.0, "ns/reconciler")
    now[0] = 106.0
    assert seen.trouble() is None  # a grace of one duration from the start
    seen.failed(Exception("403 Forbidden: leases is forbidden"))
    now[0] = 107.0
    assert seen.trouble() == (
        "lease ns/reconciler neither held nor seen for 7s: 403 Forbidden: leases is forbidden"
    )
    seen.ok()
    assert seen.trouble() is None


class SlowStore(LeaseStore):
    """Each write lands at once and is answered ``slow`` seconds later."""

    def __init__(self, clock: Clock, slow: float) -> None:
        super().__init__()
        self.clock, self.slow = clock, slow

    def create(self, kind, ns, body):
        answer = super().create(kind, ns, body)
        self.clock.t += self.slow
        return answer

    def replace(self, kind, ns, name, body):
        answer = super().replace(kind, ns, name, body)
        self.clock.t += self.slow
        return answer


def test_a_renewal_counts_from_when_it_was_sent_not_answered():
    """A standby counts its wait from when it sees the renewal land, so an
    answer 8 s late must not give the leader 8 s more: it leads for
    renew_deadline (10 s) after it sent the renewal, no longer."""
    clock = Clock()
    store = SlowStore(clock, 8)
    a = elector(store, clock, "a")
    sent = clock.t
    assert a.try_acquire_or_renew() and clock.t == sent + 8
    clock.t = sent + 10
    assert a.is_leader
    clock.t = sent + 10.5  # 2.5 s after the answer: past the deadline from the sending
    assert not a.is_leader
    sent = clock.t
    assert a.try_acquire_or_renew()  # renewed: a replace this time
    clock.t = sent + 10.5
    assert not a.is_leader


def test_a_renewal_answered_past_the_renew_deadline_does_not_lead():
    clock = Clock()
    a = elector(SlowStore(clock, 11), clock, "a")
    seen: list[bool] = []
    a.on_change = seen.append
    assert not a.try_acquire_or_renew() and not a.is_leader
    assert seen == []
