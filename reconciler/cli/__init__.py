"""The command line (`commands`) and what serves it alone: where settings
come from (`settings`), how a plan is shown (`render`), how logs look (`logs`)."""

from reconciler.cli.commands import cli, main

__all__ = ["cli", "main"]
