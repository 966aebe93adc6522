"""The command line. `commands` holds the group and what every command uses
to serve its clusters, `options` the options they share; each command has
its module (`sync_command`, `plan_command`, `run_command`, `check`,
`restart`, `show_config`, `manifests`), registered here. Beside them: where settings come
from (`settings`, `clusters`), how a plan is shown (`render`), what a command
came to (`served`), how logs look (`logs`)."""

from reconciler.cli import (
    check,
    manifests,
    plan_command,
    restart,
    run_command,
    show_config,
    sync_command,
)
from reconciler.cli.commands import cli, main
from reconciler.cli.settings import ENV_PREFIX, KEYS

cli.add_command(restart.group)
cli.add_command(check.command)
cli.add_command(show_config.command)
cli.add_command(manifests.group)


def _unflagged() -> list[str]:
    """The keys no option sets: sync's --timeout is the wait's, not the key."""
    commands = (cli, plan_command.plan, run_command.run)
    names = {p.name for c in commands for p in c.params}
    names |= {p.name for p in sync_command.sync.params if p.name != "timeout"}
    names |= {"context"} if "contexts" in names else set()
    return sorted(k for k in KEYS if k not in names)


cli.epilog = (
    f"{cli.epilog}\n\nKeys with no option, set in the config file or as {ENV_PREFIX}<KEY>:"
    f" {', '.join(_unflagged())}."
)

__all__ = ["cli", "main"]
