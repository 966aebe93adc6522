"""`reconciler plan`: the next pass's actions, written nowhere."""

from __future__ import annotations

from typing import Any

import click

from reconciler.cli import served
from reconciler.cli.clusters import Cluster
from reconciler.cli.commands import cli, emit, fleet_of, kubes_of
from reconciler.cli.options import (
    STATE_FILE,
    collect,
    example,
    exit_codes,
    global_options,
    output_option,
    unkeyed,
)
from reconciler.cli.served import Served
from reconciler.client.kube import Kube
from reconciler.engine.runner import Passes
from reconciler.engine.sync import Mode, PassSetup
from reconciler.run.turn import (
    EXIT_CHANGES,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    Turns,
)


@cli.command(
    epilog=example("reconciler plan -n cache", "reconciler plan --detailed-exitcode -o json")
    + "\n\n"
    + exit_codes(
        (EXIT_OK, "no errors (with --detailed-exitcode: and no changes)"),
        (EXIT_FAILED, "some objects failed (with --detailed-exitcode: bad usage or config too)"),
        (EXIT_USAGE, "bad usage or config (with --detailed-exitcode: changes are pending)"),
        (EXIT_UNREACHABLE, "the cluster is unreachable or refuses the credentials"),
    )
)
@output_option("Plan format on stdout.")
@click.option(
    "--detailed-exitcode",
    is_flag=True,
    help=unkeyed(
        f"Exit {EXIT_OK} when there are no changes, {EXIT_CHANGES} when changes are pending,"
        f" {EXIT_FAILED} on errors (bad config too), {EXIT_UNREACHABLE} when the cluster is"
        " unreachable or refuses the credentials, as `terraform plan`.",
        "off",
    ),
)
@STATE_FILE
@global_options
@click.pass_context
def plan(
    ctx: click.Context,
    /,
    output: str,
    detailed_exitcode: bool,
    state_file: str | None,
    **options: Any,
) -> None:
    """Show the actions the next pass would take, without writing, and each
    object that would still not be Ready, with the reason."""
    collect(ctx, **options)
    ctx.find_root().obj.update(output=output, detailed_exitcode=detailed_exitcode)
    fleet = fleet_of(ctx, state_file=state_file)

    def serve(cluster: Cluster, kube: Kube) -> Served:
        passes = Passes(PassSetup(kube=kube, config=cluster.config, mode=Mode.PLAN))
        result = Turns.of(passes).passed()
        lagging = [] if result.unreachable else passes.lagging_crds()
        return served.of_plan(result, lagging, detailed_exitcode)

    emit(fleet, fleet.each(serve, kubes_of(fleet)), output)
