"""The daemon put together: what `reconciler run` starts beside its passes.

As controller-runtime's manager wires a controller's process, this wires
ours from the settings: the metrics and health server of the process, and
for each cluster the Lease check before anything starts, the leader elector
or the shard member (on a request budget of their own), and the write fence
(`client.interface.WriteFence`) that the cluster's client and its passes ask
before each write; and, once, the cluster's `PassSetup`: its fenced client,
its fence or shard member, its event queue and its mode, which every pass of
the cluster is run with.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from reconciler.client.interface import UNFENCED, Client, WriteFence
from reconciler.config import Config
from reconciler.engine.events import EventQueue
from reconciler.engine.runner import Passes, mode_of
from reconciler.engine.sync import PassSetup
from reconciler.kinds import registry
from reconciler.run import lease_access
from reconciler.run.daemon import Daemon, Loop
from reconciler.run.leader import (
    LEASE_BURST,
    LEASE_QPS,
    LEASE_RETRIES,
    LeaderElector,
    LeaseConfig,
    default_identity,
)
from reconciler.run.pacing import Schedule
from reconciler.run.shard import ShardConfig, ShardMember

if TYPE_CHECKING:
    from reconciler.run.metrics import ClusterMetrics, Metrics

log = logging.getLogger(__name__)


class CannotStart(Exception):
    """A setting the daemon cannot start with: the message names it."""


@dataclass(frozen=True)
class LeaderFence:
    """Only the leader writes, whatever the object."""

    elector: LeaderElector

    def may_write(self, owner_uid: str | None = None) -> bool:
        return self.elector.is_leader


@dataclass(frozen=True)
class Parts:
    """What runs beside one cluster's passes; each None when the settings
    leave it out. ``setup``: what its passes are run with, the cluster's
    client among it (its retries behind the same fence as the passes)."""

    setup: PassSetup
    elector: LeaderElector | None
    member: ShardMember | None
    metrics: ClusterMetrics | None

    @property
    def kube(self) -> Client:
        return self.setup.kube

    @property
    def fence(self) -> WriteFence:
        return self.setup.fenced_by


def check_leases(kube: Client, config: Config) -> None:
    """Refuse to start a daemon that could never hold its Lease."""
    verbs: tuple[str, ...]
    if config.leader_elect:
        verbs, mode, grant = lease_access.LEADER_VERBS, "--leader-elect", lease_access.LEADER_GRANT
    elif config.shard:
        verbs, mode, grant = lease_access.SHARD_VERBS, "--shard", lease_access.SHARD_GRANT
    else:
        return
    try:
        lease_access.check(kube, config.leader_election_namespace, verbs, mode, grant)
    except lease_access.LeaseAccessError as exc:
        raise CannotStart(str(exc)) from None


def serve_metrics(config: Config, named: bool) -> Metrics | None:
    """The metrics and health server of the process (started here), shared
    by its clusters; ``named``: their series carry a ``cluster`` label."""
    if not config.metrics_address:
        return None
    from reconciler.run.metrics import Metrics, serve  # about 2 MB: only when served

    metrics = Metrics(named=named)
    try:
        serve(config.metrics_address, metrics)
    except (OSError, ValueError) as exc:
        raise CannotStart(f"--metrics-address {config.metrics_address}: {exc}") from None
    return metrics


def assemble(kube: Client, config: Config, metrics: Metrics | None, name: str = "") -> Parts:
    """One cluster's elector or shard member, its write fence, its metrics,
    and what its passes are run with. Lease requests get a budget of their
    own: never behind a pass's writes. Every write of the passes, their
    events too, asks the fence."""
    stale_after = config.interval * config.healthz_intervals + config.jitter
    own = metrics.cluster(name, config.interval, stale_after) if metrics is not None else None
    leases = kube.with_budget(LEASE_QPS, LEASE_BURST, LEASE_RETRIES)
    mode = mode_of(config)
    if config.shard:
        shard = ShardConfig.from_config(config)
        base = shard.identity or default_identity()  # chosen once: the requests name it
        member = ShardMember(leases.fenced(UNFENCED, base), replace(shard, identity=base))
        log.info(
            "sharded: %d buckets, leases in %s, as %s",
            config.shard_buckets,
            config.leader_election_namespace,
            member.base,
        )
        fenced = kube.fenced(member, base)
        setup = PassSetup(
            kube=fenced, config=config, mode=mode, holder=member, events=EventQueue(fenced)
        )
        return Parts(setup, None, member, own)
    elector = _elector(leases, config)
    fence: WriteFence = UNFENCED if elector is None else LeaderFence(elector)
    fenced = kube if elector is None else kube.fenced(fence)
    setup = PassSetup(kube=fenced, config=config, mode=mode, fence=fence, events=EventQueue(fenced))
    return Parts(setup, elector, None, own)


def _elector(leases: Client, config: Config) -> LeaderElector | None:
    if not config.leader_elect:
        return None
    elector = LeaderElector(leases, LeaseConfig.from_config(config))
    log.info(
        "leader election on lease %s/%s as %s",
        config.leader_election_namespace,
        config.leader_election_id,
        elector.identity,
    )
    return elector


def loop(parts: Parts, name: str = "") -> Loop:
    """One cluster's passes, as the daemon schedules them."""
    config = parts.setup.config
    passes = Passes(parts.setup, daemon=True)
    return Loop(
        passes,
        standby=passes.standby,
        schedule=Schedule.of(config),
        jitter=config.jitter,
        name=name,
        elector=parts.elector,
        shard=parts.member,
        metrics=parts.metrics,
        requests=lambda: dict(parts.kube.stats.requests),
        unready_after=config.unready_after,
        kinds=tuple(kind.name for kind in registry.KINDS),
    )


def serve(loops: list[Loop], parallel: int) -> int:
    """Every cluster's passes until SIGTERM; the exit code."""
    return Daemon(loops, parallel).run()
