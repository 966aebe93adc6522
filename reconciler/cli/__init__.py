"""The command line (`commands`) and what serves it alone: where settings
come from (`settings`), how a plan is shown (`render`), how logs look (`logs`),
and `restart` and `check`, registered here since they build on `commands`'
options."""

from reconciler.cli import check, restart
from reconciler.cli.commands import cli, main

cli.add_command(restart.group)
cli.add_command(check.command)

__all__ = ["cli", "main"]
