"""`reconciler sync`: one pass, or passes until the scope converges (`--wait`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import click

from reconciler.cli import served
from reconciler.cli.clusters import Cluster
from reconciler.cli.commands import DEFAULT_WAIT_TIMEOUT, cli, emit, fleet_of, flush, kubes_of
from reconciler.cli.options import (
    DRY_RUN,
    STATE_FILE,
    collect,
    example,
    exit_codes,
    global_options,
    output_option,
    unkeyed,
)
from reconciler.cli.served import Served
from reconciler.cli.settings import ENV_PREFIX
from reconciler.client.kube import Kube
from reconciler.engine.events import EventQueue
from reconciler.engine.runner import Passes, mode_of
from reconciler.engine.sync import PassSetup
from reconciler.run.pacing import Schedule
from reconciler.run.turn import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_TIMEOUT,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    Turn,
    Turns,
)
from reconciler.run.wait import wait


@cli.command(
    epilog=example(
        "reconciler sync -n cache -o json",
        "reconciler sync --wait --timeout 600   # in a pipeline, after kubectl apply",
    )
    + "\n\n"
    + exit_codes(
        (EXIT_OK, "no errors (with --wait: converged)"),
        (
            EXIT_FAILED,
            "some objects failed (with --wait: also objects that cannot become Ready"
            " without a person)",
        ),
        (EXIT_USAGE, "bad usage or config"),
        (EXIT_UNREACHABLE, "the cluster is unreachable or refuses the credentials"),
        (EXIT_TIMEOUT, "with --wait: the timeout passed with objects still pending"),
    )
)
@DRY_RUN
@output_option("Summary format on stdout.")
@STATE_FILE
@click.option(
    "--wait",
    "wait_",
    is_flag=True,
    help=unkeyed(
        "Run passes, at the daemon's pace, until every object is Ready and a pass plans nothing.",
        "off",
    ),
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help=unkeyed(
        f"With --wait: seconds to wait before exiting {EXIT_TIMEOUT}. Not the `timeout` key"
        f" (each request's, {ENV_PREFIX}TIMEOUT, which has no option).",
        f"{DEFAULT_WAIT_TIMEOUT:g}",
    ),
)
@global_options
@click.pass_context
def sync(
    ctx: click.Context,
    /,
    dry_run: bool | None,
    output: str,
    state_file: str | None,
    wait_: bool,
    timeout: float | None,
    **options: Any,
) -> None:
    """Run one pass and exit (for cron, systemd timers and CronJobs); with
    --wait, run passes until the scope converges (for CI/CD pipelines).
    """
    collect(ctx, **options)
    ctx.find_root().obj["output"] = output
    if timeout is not None and not wait_:
        raise click.UsageError("--timeout needs --wait")
    fleet = fleet_of(ctx, dry_run=dry_run, state_file=state_file)
    if wait_ and any(c.config.dry_run for c in fleet.clusters):
        raise click.UsageError("--wait cannot be used with --dry-run: nothing would change")
    kubes = kubes_of(fleet)
    limit = DEFAULT_WAIT_TIMEOUT if timeout is None else timeout

    def serve(cluster: Cluster, kube: Kube) -> Served:
        return _sync(cluster, kube, wait_, limit, output, fleet.listed)

    emit(fleet, fleet.each(serve, kubes), output)


def _sync(
    cluster: Cluster, kube: Kube, wait_: bool, limit: float, output: str, named: bool
) -> Served:
    """One cluster's `sync`: a pass, or passes until it converges."""
    config = cluster.config
    # Waiting: events go from a queue, so they do not hold up the next pass.
    events = EventQueue(kube) if wait_ else None
    passes = Passes(PassSetup(kube=kube, config=config, mode=mode_of(config), events=events))
    if not wait_:
        return served.of_pass(Turns.of(passes).passed())
    echo = [Echo(f"[{cluster.name}] " if named else "")] if output == "text" else []
    turns = Turns.of(passes, *echo)
    waited = wait(turns.passed, timeout=limit, schedule=Schedule.of(config))
    flush(events)
    return served.of_wait(waited, limit)


@dataclass(frozen=True)
class Echo:
    """`sync --wait`'s line for each pass that reached the cluster, on
    stdout as it ends: a pipeline's log shows the wait moving."""

    prefix: str  # the cluster's name, when the command serves several

    def saw(self, turn: Turn) -> None:
        if turn.result is not None and not turn.result.unreachable:
            click.echo(self.prefix + turn.result.one_line())
