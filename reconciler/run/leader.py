"""Leader election on a coordination.k8s.io/v1 Lease, after client-go's algorithm.

Two reconcilers on two bastion hosts must not both write. A lease held by
someone else is valid until ``leaseDurationSeconds`` after *we last saw its
record change*, measured on our own monotonic clock, so clock skew between
hosts does not matter. Every update is a compare-and-swap on resourceVersion.
A leader that cannot renew within ``renew_deadline`` stops reconciling.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from reconciler.client.errors import KubeError, NotFound
from reconciler.client.interface import Client
from reconciler.config import Config
from reconciler.constants import LABEL_NAME, MANAGED_BY
from reconciler.run.lease import Lease, Leases

log = logging.getLogger(__name__)

# The Lease requests' own client budget (Kube.with_budget). A renewal every
# retry_period is well under 1 request/s; a shard round is two, but one that
# takes every bucket of the default 32 sends 34 at once, within the burst. No
# retries: a throttled renewal is tried again at the next retry_period, as
# client-go's leader election does, rather than sleeping past its renew deadline.
LEASE_QPS = 20.0
LEASE_BURST = 50
LEASE_RETRIES = 0


def default_identity() -> str:
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def micro_time(now: datetime) -> str:
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class LeaseConfig:
    """The lease settings; their defaults are `Config`'s (see `from_config`)."""

    namespace: str
    name: str
    lease_duration: float
    renew_deadline: float
    retry_period: float
    identity: str = ""  # empty: host name and a random suffix

    @classmethod
    def from_config(cls, config: Config) -> LeaseConfig:
        return cls(
            namespace=config.leader_election_namespace,
            name=config.leader_election_id,
            lease_duration=config.lease_duration,
            renew_deadline=config.renew_deadline,
            retry_period=config.retry_period,
        )


class Sighting:
    """When this replica last held or saw the holder of its Lease. Past the
    lease duration without either, it cannot know whether anyone reconciles:
    /readyz says so (``trouble``) instead of answering ok."""

    def __init__(self, monotonic: Callable[[], float], duration: float, what: str) -> None:
        self.monotonic, self.duration, self.what = monotonic, duration, what
        self.last_ok = monotonic()  # a grace of one duration from the start
        self.last_error = ""

    def ok(self) -> None:
        self.last_ok = self.monotonic()

    def failed(self, exc: BaseException) -> None:
        self.last_error = str(exc)

    def trouble(self) -> str | None:
        """Why this replica is blind to its Lease, or None."""
        blind = self.monotonic() - self.last_ok
        if blind <= self.duration:
            return None
        why = f": {self.last_error}" if self.last_error else ""
        return f"lease {self.what} neither held nor seen for {blind:.0f}s{why}"


class LeaderElector:
    def __init__(
        self,
        kube: Client,
        config: LeaseConfig,
        monotonic: Callable[[], float] = time.monotonic,
        wallclock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.leases = Leases(kube, config.namespace)
        self.config = config
        self.identity = config.identity or default_identity()
        self.monotonic = monotonic
        self.wallclock = wallclock
        self.observed_record: tuple[object, ...] | None = None
        self.observed_at = 0.0
        self.last_renew = -1e18
        self._leader = False
        self.lock = threading.Lock()
        self.on_change: Callable[[bool], None] | None = None
        self.sighting = Sighting(
            monotonic, config.lease_duration, f"{config.namespace}/{config.name}"
        )

    # ---------------------------------------------------------------- state

    @property
    def is_leader(self) -> bool:
        """Leader only while the last successful renewal is within the deadline."""
        with self.lock:
            if self._leader and self.monotonic() - self.last_renew > self.config.renew_deadline:
                self._set(False, "renewal deadline passed")
            return self._leader

    def _set(self, leader: bool, why: str) -> None:
        if leader != self._leader:
            self._leader = leader
            log.info(
                "%s leadership of lease %s/%s (%s)",
                "acquired" if leader else "lost",
                self.config.namespace,
                self.config.name,
                why,
            )
            if self.on_change is not None:
                self.on_change(leader)

    # ---------------------------------------------------------------- protocol

    def _observe(self, lease: Lease) -> None:
        """Note when the record last changed; any write bumps resourceVersion."""
        if lease.record() != self.observed_record:
            self.observed_record = lease.record()
            self.observed_at = self.monotonic()

    def try_acquire_or_renew(self) -> bool:
        """One round of the algorithm; True if we hold the lease afterwards."""
        cfg = self.config
        now = micro_time(self.wallclock())
        try:
            lease = self.leases.get(cfg.name)
        except NotFound:
            return self._create(now)
        except KubeError as exc:
            log.warning("lease %s/%s: %s", cfg.namespace, cfg.name, exc)
            self.sighting.failed(exc)
            return self._renew_failed()

        self.sighting.ok()
        self._observe(lease)
        holder, duration = lease.holder, lease.duration_or(cfg.lease_duration)
        if holder and holder != self.identity and (self.monotonic() < self.observed_at + duration):
            with self.lock:
                self._set(False, f"held by {holder}")
            return False
        sent = self.monotonic()
        try:
            updated = self.leases.replace(
                lease.held_by(self.identity, now, int(cfg.lease_duration))
            )
        except KubeError as exc:
            log.info("lease %s/%s update failed: %s", cfg.namespace, cfg.name, exc)
            return self._renew_failed()
        self._observe(updated)
        return self._renewed(holder, sent)

    def _create(self, now: str) -> bool:
        cfg = self.config
        lease = Lease(
            name=cfg.name,
            holder=self.identity,
            duration=int(cfg.lease_duration),
            acquired=now,
            renewed=now,
            transitions=0,
            labels={LABEL_NAME: MANAGED_BY},
        )
        sent = self.monotonic()
        try:
            created = self.leases.create(lease)
        except KubeError as exc:
            log.info("lease %s/%s create failed: %s", cfg.namespace, cfg.name, exc)
            self.sighting.failed(exc)
            return self._renew_failed()
        self.sighting.ok()
        self._observe(created)
        return self._renewed("", sent)

    def _renewed(self, previous_holder: str, sent: float) -> bool:
        """The lease is ours from ``sent``, when the write that took it left,
        not from its answer: the others count their wait from when they saw
        it land, which may be long before a slow answer reached us (as
        run/shard.py counts a round from its start)."""
        with self.lock:
            self.last_renew = sent
            if self.monotonic() - sent > self.config.renew_deadline:
                self._set(False, "the renewal was answered past the renew deadline")
                return False
            self._set(
                True,
                "new lease"
                if not previous_holder
                else "renewed"
                if previous_holder == self.identity
                else f"taken over from {previous_holder}",
            )
        return True

    def _renew_failed(self) -> bool:
        return self.is_leader  # still leader until the renew deadline passes

    def release(self) -> None:
        """Give the lease up on shutdown so a standby takes over at once."""
        with self.lock:
            was_leader = self._leader
            self._set(False, "shutting down")
        if not was_leader:
            return
        cfg = self.config
        try:
            lease = self.leases.get(cfg.name)
            if lease.holder != self.identity:
                return
            now = micro_time(self.wallclock())
            self.leases.replace(replace(lease, holder="", duration=1, renewed=now))
            log.info("released lease %s/%s", cfg.namespace, cfg.name)
        except KubeError as exc:
            log.warning("could not release lease %s/%s: %s", cfg.namespace, cfg.name, exc)

    # ---------------------------------------------------------------- loop

    def run(self, stop: threading.Event) -> None:
        """Renew every retry_period until stop is set (runs in its own thread)."""
        while not stop.is_set():
            try:
                self.try_acquire_or_renew()
            except Exception as exc:  # a bug in one round must not end the renewals
                log.exception(
                    "lease %s/%s: renewal crashed", self.config.namespace, self.config.name
                )
                self.sighting.failed(exc)
            stop.wait(self.config.retry_period)
