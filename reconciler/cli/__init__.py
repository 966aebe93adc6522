"""The command line (`commands`) and what serves it alone: where settings
come from (`settings`), how a plan is shown (`render`), how logs look (`logs`),
and `restart`, `check` and `config`, registered here since they build on `commands`'
options."""

from reconciler.cli import check, restart, show_config
from reconciler.cli.commands import cli, main

cli.add_command(restart.group)
cli.add_command(check.command)
cli.add_command(show_config.command)

__all__ = ["cli", "main"]
