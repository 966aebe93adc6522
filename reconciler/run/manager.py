"""The daemon put together: what `reconciler run` starts beside its passes.

As controller-runtime's manager wires a controller's process, this wires
ours from the settings: the metrics and health server of the process, and
for each cluster the Lease check before anything starts, the leader elector
or the shard member (on a request budget of their own), and who may still
write. The pass itself is the
engine's, handed in by the CLI (`run/` does not import `engine/`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from reconciler.client.kube import Kube
from reconciler.config import Config
from reconciler.result import PassResult
from reconciler.run import lease_access
from reconciler.run.daemon import Daemon, Loop
from reconciler.run.leader import LEASE_BURST, LEASE_QPS, LEASE_RETRIES, LeaderElector, LeaseConfig
from reconciler.run.pacing import Schedule
from reconciler.run.shard import ShardConfig, ShardMember

if TYPE_CHECKING:
    from reconciler.run.metrics import ClusterMetrics, Metrics

log = logging.getLogger(__name__)


class CannotStart(Exception):
    """A setting the daemon cannot start with: the message names it."""


@dataclass(frozen=True)
class Parts:
    """What runs beside one cluster's passes; each None when the settings leave it out."""

    elector: LeaderElector | None
    member: ShardMember | None
    metrics: ClusterMetrics | None

    @property
    def keep_going(self) -> Callable[[], bool] | None:
        """Asked by a pass before each object's writes: only the leader writes."""
        elector = self.elector
        return (lambda: elector.is_leader) if elector is not None else None


def check_leases(kube: Kube, config: Config) -> None:
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


def assemble(kube: Kube, config: Config, metrics: Metrics | None, name: str = "") -> Parts:
    """One cluster's elector or shard member, and its metrics. Lease
    requests get a budget of their own: never behind a pass's writes."""
    leases = kube.with_budget(LEASE_QPS, LEASE_BURST, LEASE_RETRIES)
    elector = _elector(leases, config)
    member = None
    if config.shard:
        member = ShardMember(leases, ShardConfig.from_config(config))
        kube.user_agent = leases.user_agent = f"{kube.user_agent} ({member.base})"
        log.info(
            "sharded: %d buckets, leases in %s, as %s",
            config.shard_buckets,
            config.leader_election_namespace,
            member.base,
        )
    stale_after = config.interval * config.healthz_intervals + config.jitter
    own = metrics.cluster(name, config.interval, stale_after) if metrics is not None else None
    parts = Parts(elector, member, own)
    if parts.keep_going is not None:
        kube.still_writing = parts.keep_going
    elif member is not None:
        kube.still_writing = lambda: bool(member.held())
    return parts


def _elector(leases: Kube, config: Config) -> LeaderElector | None:
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


def loop(
    one_pass: Callable[[], PassResult], parts: Parts, kube: Kube, config: Config, name: str = ""
) -> Loop:
    """One cluster's passes, as the daemon schedules them."""
    return Loop(
        one_pass,
        schedule=Schedule.of(config),
        jitter=config.jitter,
        name=name,
        elector=parts.elector,
        shard=parts.member,
        metrics=parts.metrics,
        requests=lambda: dict(kube.stats.requests),
    )


def run(loops: list[Loop], parallel: int) -> int:
    """Every cluster's passes until SIGTERM; the exit code."""
    return Daemon(loops, parallel).run()
