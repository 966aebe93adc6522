"""`reconciler run`: the daemon, a pass every --interval seconds per cluster."""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any

import click

from reconciler.cli.clusters import Cluster
from reconciler.client.kube import Kube
from reconciler.engine.events import EventQueue
from reconciler.run.turn import EXIT_OK, EXIT_USAGE

if TYPE_CHECKING:  # the daemon's modules: `sync` from cron loads none of them
    from reconciler.run.daemon import Loop
    from reconciler.run.metrics import Metrics

from reconciler.cli.commands import cli, fail, fleet_of, flush, kubes_of
from reconciler.cli.options import (
    DRY_RUN,
    STATE_FILE,
    collect,
    example,
    exit_codes,
    global_options,
    keyed,
)

log = logging.getLogger(__name__)


@cli.command(
    epilog=example(
        "reconciler run --config /etc/reconciler/reconciler.yaml --metrics-address :8080",
        "reconciler run --leader-elect   # beside other replicas",
    )
    + "\n\n"
    + exit_codes(
        (EXIT_OK, "stopped by SIGTERM or SIGINT, after the running pass"),
        (EXIT_USAGE, "bad usage or config, or it cannot start (its Lease, its metrics address)"),
    )
)
@click.option(
    "--interval", type=float, default=None, help=keyed("Seconds between passes.", "interval")
)
@click.option(
    "--jitter",
    type=float,
    default=None,
    help=keyed("Random delay, up to this many seconds, added to each pass.", "jitter"),
)
@click.option(
    "--min-interval",
    type=float,
    default=None,
    help=keyed(
        "Seconds from the start of a pass that wrote or left objects progressing to"
        " the next, at the earliest.",
        "min_interval",
    ),
)
@click.option(
    "--pace-budget",
    type=float,
    default=None,
    help=keyed(
        "While objects move, the share of the time passes may spend looking (observe"
        " and plan, not the writes): a pass that looked for 1 s is followed 1/budget s"
        " after it started, if that is past --min-interval.",
        "pace_budget",
    ),
)
@DRY_RUN
@STATE_FILE
@click.option(
    "--leader-elect/--no-leader-elect",
    default=None,
    help=keyed("Only the holder of a coordination.k8s.io Lease reconciles.", "leader_elect"),
)
@click.option(
    "--leader-election-namespace",
    default=None,
    help=keyed("Namespace of the Lease (and of --shard's).", "leader_election_namespace"),
)
@click.option(
    "--leader-election-id",
    default=None,
    help=keyed("Name of the Lease (and --shard's prefix).", "leader_election_id"),
)
@click.option(
    "--shard/--no-shard",
    default=None,
    help=keyed(
        "Every replica works: the objects are split into buckets, each held by one"
        " replica through a Lease (not with --leader-elect).",
        "shard",
    ),
)
@click.option(
    "--shard-buckets",
    type=int,
    default=None,
    help=keyed("Buckets to split the objects into.", "shard_buckets"),
)
@click.option(
    "--metrics-address",
    default=None,
    help=keyed(
        "Serve /metrics, /healthz and /readyz here, e.g. :8080 or 127.0.0.1:8080.",
        "metrics_address",
        "off",
    ),
)
@global_options
@click.pass_context
def run(
    ctx: click.Context,
    /,
    interval: float | None,
    jitter: float | None,
    min_interval: float | None,
    pace_budget: float | None,
    dry_run: bool | None,
    state_file: str | None,
    leader_elect: bool | None,
    leader_election_namespace: str | None,
    leader_election_id: str | None,
    shard: bool | None,
    shard_buckets: int | None,
    metrics_address: str | None,
    **options: Any,
) -> None:
    """Run a pass every --interval seconds until SIGTERM (the daemon)."""
    # Imported here: `sync` from cron pays for none of the daemon's modules.
    from reconciler.run import manager

    collect(ctx, **options)
    fleet = fleet_of(
        ctx,
        interval=interval,
        jitter=jitter,
        min_interval=min_interval,
        pace_budget=pace_budget,
        dry_run=dry_run,
        state_file=state_file,
        leader_elect=leader_elect,
        leader_election_namespace=leader_election_namespace,
        leader_election_id=leader_election_id,
        shard=shard,
        shard_buckets=shard_buckets,
        metrics_address=metrics_address,
    )
    kubes = kubes_of(fleet)
    top = fleet.clusters[0].config  # the process's own keys: the same in every cluster
    try:
        metrics = manager.serve_metrics(top, named=fleet.listed)
        started = fleet.each(lambda c, kube: _start(c, kube, metrics, fleet.listed), kubes)
    except manager.CannotStart as exc:
        fail(EXIT_USAGE, str(exc))
    code = manager.serve([loop for loop, _ in started], top.clusters_in_parallel)
    for _, events in started:
        flush(events)
    sys.exit(code)


def _start(
    cluster: Cluster, kube: Kube, metrics: Metrics | None, named: bool
) -> tuple[Loop, EventQueue | None]:
    """One cluster's loop, once its Lease can be held."""
    from reconciler.checks import local
    from reconciler.run import manager

    config = cluster.config
    where = f"[{cluster.name}] " if named else ""
    try:
        manager.check_leases(kube, config)
    except manager.CannotStart as exc:
        raise manager.CannotStart(f"{where}{exc}") from None
    images = local.redis_images(config)
    if images.warning:  # `check` says it too; a daemon started without it should
        log.warning("%s%s: %s: %s", where, images.name, images.detail, images.fix)
    parts = manager.assemble(kube, config, metrics, cluster.name)
    return manager.loop(parts, cluster.name), parts.setup.events
