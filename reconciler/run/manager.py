"""The daemon put together: what `reconciler run` starts beside its passes.

As controller-runtime's manager wires a controller's process, this wires
ours from the settings: the metrics and health server of the process, and
for each cluster the Lease check before anything starts, the leader elector
or the shard member (on a request budget of their own), and the write fence
(`client.interface.WriteFence`) that the cluster's client and its passes ask
before each write. The pass itself is the
engine's, handed in by the CLI (`run/` does not import `engine/`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from reconciler.client.interface import UNFENCED, Client, WriteFence
from reconciler.config import Config
from reconciler.result import PassResult
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
class ShardFence:
    """A replica writes for the objects of the buckets it holds; a retry,
    which knows no object, while it holds any."""

    member: ShardMember

    def may_write(self, owner_uid: str | None = None) -> bool:
        if owner_uid is None:
            return bool(self.member.held())
        return self.member.holds(owner_uid)


@dataclass(frozen=True)
class Parts:
    """What runs beside one cluster's passes; each None when the settings
    leave it out. ``kube``: the cluster's client, its retries behind ``fence``."""

    kube: Client
    fence: WriteFence
    elector: LeaderElector | None
    member: ShardMember | None
    metrics: ClusterMetrics | None


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
    """One cluster's elector or shard member, its write fence, and its
    metrics. Lease requests get a budget of their own: never behind a
    pass's writes."""
    stale_after = config.interval * config.healthz_intervals + config.jitter
    own = metrics.cluster(name, config.interval, stale_after) if metrics is not None else None
    leases = kube.with_budget(LEASE_QPS, LEASE_BURST, LEASE_RETRIES)
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
        fence = ShardFence(member)
        return Parts(kube.fenced(fence, base), fence, None, member, own)
    elector = _elector(leases, config)
    if elector is not None:
        lead = LeaderFence(elector)
        return Parts(kube.fenced(lead), lead, elector, None, own)
    return Parts(kube, UNFENCED, None, None, own)


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


def loop(one_pass: Callable[[], PassResult], parts: Parts, config: Config, name: str = "") -> Loop:
    """One cluster's passes, as the daemon schedules them."""
    return Loop(
        one_pass,
        schedule=Schedule.of(config),
        jitter=config.jitter,
        name=name,
        elector=parts.elector,
        shard=parts.member,
        metrics=parts.metrics,
        requests=lambda: dict(parts.kube.stats.requests),
        unready_after=config.unready_after,
    )


def serve(loops: list[Loop], parallel: int) -> int:
    """Every cluster's passes until SIGTERM; the exit code."""
    return Daemon(loops, parallel).run()
