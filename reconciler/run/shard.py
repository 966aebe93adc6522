"""Sharded replicas (`reconciler run --shard`): members and buckets on Leases.

Each replica renews one *member* Lease of its own; each of the B buckets has
a *bucket* Lease naming its holder. A bucket Lease is never renewed: its
holder's claim is good while the holder's member Lease lives. So the steady
cost is one PUT per replica per retry period, whatever B is, and a bucket
Lease is written only when it changes hands.

Safety (no two replicas write one bucket at once) rests on compare-and-swap:

- A replica writes a bucket only while its last member renewal is within
  the renew deadline, on its own monotonic clock, and the LIST that followed
  it showed the bucket's Lease naming it.
- Another replica takes a bucket only when the holder's member Lease is
  gone. It deletes a member Lease only after seeing it unchanged for its
  lease duration on its own monotonic clock (longer than the renew deadline,
  so the holder stopped writing before), and deletes it with a
  resourceVersion precondition, so a renewal that lands first wins.
- A replica whose member Lease was deleted (a zombie resumed after SIGSTOP)
  fails its renewal, drops every bucket, and registers under a new
  incarnation. Its old claims name the old incarnation and no longer count;
  to hold a bucket again it must swap the bucket Lease, which races by
  resourceVersion with any other taker.

Handover: every replica computes the same desired holders from the live
members (`buckets.assign`). Between passes a replica hands back the buckets
whose desired holder is another live member; the desired holder takes a
free bucket on its next round. A bucket that stays free longer than a lease
duration plus an interval (members that disagree) is taken by anyone.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from reconciler.buckets import Scope, assign, bucket_of
from reconciler.client.errors import ApiError, Conflict, KubeError, NotFound
from reconciler.client.interface import Client
from reconciler.config import Config
from reconciler.constants import LABEL_COMPONENT, LABEL_NAME, LABEL_PART_OF, MANAGED_BY
from reconciler.run.leader import LeaseConfig, Sighting, default_identity, micro_time
from reconciler.run.lease import Lease, Leases

log = logging.getLogger(__name__)

# On a member Lease: the buckets of which its replica's last pass saw an
# object or pod under the label of a bucket it holds itself (a label changed
# by hand), for their holders to list everything once and find them.
MISLABELLED = "myapp.demo.kubebuilder.io/shard-mislabelled"

MEMBER = "shard-member"
BUCKET = "shard-bucket"


@dataclass(frozen=True)
class ShardConfig(LeaseConfig):
    """The lease settings of leader election (``name`` prefixes the Lease
    names and is their part-of label), and the shard's own."""

    buckets: int = field(kw_only=True)
    interval: float = field(kw_only=True)

    @classmethod
    def from_config(cls, config: Config) -> ShardConfig:
        lease = LeaseConfig.from_config(config)
        return cls(**vars(lease), buckets=config.shard_buckets, interval=config.interval)

    @property
    def group(self) -> str:
        return self.name

    @property
    def selector(self) -> str:
        return f"{LABEL_PART_OF}={self.group},{LABEL_COMPONENT} in ({MEMBER},{BUCKET})"

    def bucket_lease(self, bucket: int) -> str:
        return f"{self.group}-bucket-{bucket}"

    def member_lease(self, identity: str) -> str:
        slug = re.sub(r"[^a-z0-9-]+", "-", identity.lower()).strip("-")
        return f"{self.group}-member-{slug}"[:253]


@dataclass
class _Seen:
    """A member Lease as last seen, and since when (our monotonic clock) its
    record has not changed."""

    version: str
    since: float


class ShardMember:
    def __init__(
        self,
        kube: Client,
        config: ShardConfig,
        monotonic: Callable[[], float] = time.monotonic,
        wallclock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.leases = Leases(kube, config.namespace)
        self.config = config
        self.monotonic = monotonic
        self.wallclock = wallclock
        self.base = config.identity or default_identity()
        self.identity = ""  # this incarnation; set when the member Lease is created
        self.member: Lease | None = None
        self.seen: dict[str, _Seen] = {}
        self.free_since: dict[int, float] = {}
        self.bucket_leases: dict[int, Lease] = {}
        self.members: frozenset[str] = frozenset()  # live, as the last round saw them
        self.lock = threading.Lock()
        self._held: frozenset[int] = frozenset()
        self._valid_from = -1e18  # monotonic start of the last round that renewed
        self.mislabelled: frozenset[int] = frozenset()  # what our last pass saw
        self.wanted: frozenset[int] = frozenset()  # what the others' passes saw
        self.fresh = False  # joined this round: claims nothing yet
        self.on_change: Callable[[frozenset[int]], None] | None = None
        self.sighting = Sighting(
            monotonic, config.lease_duration, f"{config.namespace}/{config.group}"
        )

    # ---------------------------------------------------------------- reads

    @property
    def name(self) -> str:
        return self.base

    def _valid(self) -> bool:
        return self.monotonic() - self._valid_from <= self.config.renew_deadline

    def held(self) -> frozenset[int]:
        """The buckets this replica may write now (none past the renew deadline)."""
        with self.lock:
            return self._held if self._valid() else frozenset()

    def scope(self) -> Scope:
        """The buckets held, asked once per pass. The pass selects on the
        bucket label, unless another member reports an object of a held
        bucket under another label: then it lists everything."""
        held = self.held()
        return Scope(self.config.buckets, held, select=not (held & self.wanted))

    def report(self, mislabelled: frozenset[int]) -> None:
        """What a pass saw (`Holder.report`): told to the others at the next
        renewal of our member Lease."""
        if mislabelled and mislabelled != self.mislabelled:
            log.warning(
                "shard: objects of bucket(s) %s carry the label of a bucket of ours"
                " (changed by hand?); their holders are told",
                _values(mislabelled),
            )
        elif self.mislabelled and not mislabelled:
            log.info("shard: no object under the label of a bucket of ours is another's now")
        self.mislabelled = mislabelled

    def may_write(self, owner_uid: str | None = None) -> bool:
        """The write fence (`Holder.may_write`): a replica writes for the
        objects of the buckets it holds now; a retry, which knows no object,
        while it holds any."""
        held = self.held()
        if owner_uid is None:
            return bool(held)
        return bucket_of(owner_uid, self.config.buckets) in held

    # ---------------------------------------------------------------- one round

    def round(self) -> None:
        """Renew our member Lease, read every Lease of the group, delete dead
        members, take the free buckets we should hold."""
        started = self.monotonic()
        if not self._renew():
            return
        try:
            leases = self.leases.list(self.config.selector)
        except KubeError as exc:
            log.warning("shard: LIST leases: %s", exc)
            self.sighting.failed(exc)
            return
        self.sighting.ok()
        member_leases = [lz for lz in leases if _role(lz) == MEMBER]
        members = self._live_members(member_leases)
        self.wanted = frozenset(
            b
            for lz in member_leases
            if lz.holder in members - {self.identity}
            for b in _buckets(lz.annotations.get(MISLABELLED, ""))
        )
        desired = assign(self.config.buckets, members)
        if self.fresh:
            # Just joined: take nothing this round, so that replicas started
            # together see each other before they divide the buckets (the
            # first alone would take them all, and list all their objects).
            self.fresh = False
            held: frozenset[int] = frozenset()
        else:
            held = self._claim([lz for lz in leases if _role(lz) == BUCKET], members, desired)
        self.members = frozenset(members)
        with self.lock:
            changed = held != self._held
            self._held, self._valid_from = held, started
        if changed:
            log.info(
                "shard %s holds %d of %d buckets", self.identity, len(held), self.config.buckets
            )
            if self.on_change is not None:
                self.on_change(held)

    def _renew(self) -> bool:
        if self.member is None:
            return self._register()
        notes = {k: v for k, v in self.member.annotations.items() if k != MISLABELLED}
        if self.mislabelled:
            notes[MISLABELLED] = _values(self.mislabelled)
        renewed = replace(self.member, annotations=notes, renewed=self._now())
        try:
            self.member = self.leases.replace(renewed)
            return True
        except ApiError as exc:
            if isinstance(exc, Conflict) and self._still_ours():
                return False  # our last renewal landed unanswered; renew again next round
            if not isinstance(exc, NotFound | Conflict):
                log.warning("shard: renew %s: %s", self.member.name, exc)
                self.sighting.failed(exc)
                return False
            log.warning(
                "shard: member lease %s was taken away (%s); starting over",
                self.identity,
                exc.status,
            )
        except KubeError as exc:
            log.warning("shard: renew %s: %s", self.member.name, exc)
            self.sighting.failed(exc)
            return False
        self._drop()
        return self._register()

    def _still_ours(self) -> bool:
        assert self.member is not None
        try:
            lease = self.leases.get(self.member.name)
        except KubeError:
            return False
        if lease.holder != self.identity:
            return False
        self.member = lease
        return True

    def _drop(self) -> None:
        with self.lock:
            self._held, self._valid_from = frozenset(), -1e18
        self.member = None
        if self.on_change is not None:
            self.on_change(frozenset())

    def _register(self) -> bool:
        identity = f"{self.base}_{uuid.uuid4().hex[:6]}"
        now = self._now()
        lease = replace(
            self._lease(self.config.member_lease(identity), MEMBER),
            holder=identity,
            duration=int(self.config.lease_duration),
            acquired=now,
            renewed=now,
        )
        try:
            self.member = self.leases.create(lease)
        except KubeError as exc:
            log.warning("shard: create member lease: %s", exc)
            self.sighting.failed(exc)
            return False
        self.identity, self.fresh = identity, True
        log.info("shard: joined as %s", identity)
        return True

    def _live_members(self, leases: list[Lease]) -> set[str]:
        """The members whose Lease record changed within its duration; the
        others are deleted (with a resourceVersion precondition)."""
        now, live, seen = self.monotonic(), set(), {}
        for lease in leases:
            name, holder, version = lease.name, lease.holder, lease.version
            before = self.seen.get(name)
            since = before.since if before is not None and before.version == version else now
            seen[name] = _Seen(version, since)
            duration = lease.duration_or(self.config.lease_duration)
            if holder == self.identity or now - since < duration:
                live.add(holder)
            elif self._evict(lease):
                del seen[name]
            else:
                live.add(holder)  # not deleted: it may have renewed meanwhile
        self.seen = seen
        live.discard("")
        return live

    def _evict(self, lease: Lease) -> bool:
        try:
            self.leases.delete(lease)
        except NotFound:
            return True
        except KubeError as exc:
            log.info("shard: could not delete member lease %s: %s", lease.name, exc)
            return False
        log.info("shard: member %s stopped renewing; its lease is deleted", lease.holder)
        return True

    def _claim(
        self, leases: list[Lease], members: set[str], desired: Mapping[int, str]
    ) -> frozenset[int]:
        """The buckets we hold after taking the free ones that are ours to take."""
        by_bucket = {_bucket_index(lz, self.config): lz for lz in leases}
        self.bucket_leases = {b: lz for b, lz in by_bucket.items() if b is not None}
        now, held = self.monotonic(), set()
        for bucket in range(self.config.buckets):
            lease = self.bucket_leases.get(bucket)
            holder = lease.holder if lease else ""
            if holder == self.identity:
                held.add(bucket)
                continue
            if holder in members:
                self.free_since.pop(bucket, None)
                continue
            since = self.free_since.setdefault(bucket, now)
            stale = now - since > self.config.lease_duration + self.config.interval
            if (desired.get(bucket) == self.identity or stale) and self._take(bucket, lease):
                held.add(bucket)
        return frozenset(held)

    def _take(self, bucket: int, lease: Lease | None) -> bool:
        before = lease or self._lease(self.config.bucket_lease(bucket), BUCKET)
        wanted = before.held_by(self.identity, self._now(), int(self.config.lease_duration))
        try:
            taken = self.leases.replace(wanted) if lease else self.leases.create(wanted)
        except KubeError as exc:
            log.info("shard: could not take bucket %d: %s", bucket, exc)
            return False
        self.bucket_leases[bucket] = taken
        self.free_since.pop(bucket, None)
        log.info("shard %s took bucket %d", self.identity, bucket)
        return True

    # ---------------------------------------------------------------- handover

    def hand_back(self) -> None:
        """Release each held bucket whose desired holder is another live
        member. Call it only between passes: no write of ours is in flight."""
        desired = assign(self.config.buckets, self.members)
        for bucket in sorted(self.held()):
            if desired.get(bucket, self.identity) != self.identity:
                self._release(bucket)

    def _release(self, bucket: int) -> None:
        with self.lock:
            self._held = self._held - {bucket}
        lease = self.bucket_leases.get(bucket)
        if lease is None:
            return
        try:
            self.bucket_leases[bucket] = self.leases.replace(
                replace(lease, holder="", renewed=self._now())
            )
        except KubeError as exc:
            log.info("shard: could not hand back bucket %d: %s", bucket, exc)
            return
        log.info("shard %s handed back bucket %d", self.identity, bucket)
        if self.on_change is not None:
            self.on_change(self._held)

    def leave(self) -> None:
        """On shutdown, after the last pass: delete our member Lease, which
        frees every bucket we held at once (claims of a member with no Lease
        do not count)."""
        member = self.member
        self._drop()
        if member is None:
            return
        try:
            self.leases.delete(member)
            log.info("shard: left; member lease %s deleted", member.name)
        except KubeError as exc:
            log.warning("shard: could not delete member lease %s: %s", member.name, exc)

    # ---------------------------------------------------------------- loop

    def run(self, stop: threading.Event, between_passes: threading.Lock) -> None:
        """A round every retry_period until stop is set (its own thread); the
        buckets to hand back are handed back when no pass is running."""
        while not stop.is_set():
            try:
                self.round()
            except Exception as exc:  # a bug in one round must not end the rounds
                log.exception("shard: round crashed; the next one starts over")
                self.sighting.failed(exc)
            if between_passes.acquire(blocking=False):
                try:
                    if not stop.is_set():
                        self.hand_back()
                finally:
                    between_passes.release()
            stop.wait(self.config.retry_period)

    # ---------------------------------------------------------------- helpers

    def _now(self) -> str:
        return micro_time(self.wallclock())

    def _lease(self, name: str, role: str) -> Lease:
        """A Lease of this group, before anyone holds it."""
        labels = {LABEL_NAME: MANAGED_BY, LABEL_PART_OF: self.config.group, LABEL_COMPONENT: role}
        return Lease(name=name, labels=labels)


def _role(lease: Lease) -> str:
    return lease.labels.get(LABEL_COMPONENT, "")


def _bucket_index(lease: Lease, config: ShardConfig) -> int | None:
    prefix = f"{config.group}-bucket-"
    if not lease.name.startswith(prefix) or not lease.name[len(prefix) :].isdigit():
        return None
    index = int(lease.name[len(prefix) :])
    return index if index < config.buckets else None


def _values(buckets: frozenset[int]) -> str:
    return ",".join(str(b) for b in sorted(buckets))


def _buckets(text: str) -> set[int]:
    """A MISLABELLED annotation's buckets; anything else in it is ignored."""
    return {int(part) for part in text.split(",") if part.strip().isdigit()}
