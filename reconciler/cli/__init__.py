"""The command line (`commands`) and what serves it alone: where settings
come from (`settings`), how a plan is shown (`render`), how logs look (`logs`),
and `restart`, registered here since it builds on `commands`' options."""

from reconciler.cli import restart
from reconciler.cli.commands import cli, main

cli.add_command(restart.group)

__all__ = ["cli", "main"]
