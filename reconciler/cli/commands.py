"""Command line: `reconciler sync | plan | run`.

Exit codes are for cron and CronJob (`run/turn.py` holds them; each command's
help lists its own): no errors, some objects failed, bad usage or config,
the cluster unreachable; `sync --wait` adds the timeout. `plan
--detailed-exitcode` follows `terraform plan`: its changes-pending code is
the usage code, so a bad config exits as a failure there.

Each option's help says its default and, for an option that sets a key, the
RECONCILER_<KEY> variable; both are generated from the settings (`keyed`).
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any, NoReturn

import click

from reconciler import __version__
from reconciler.cli import clusters, logs, served
from reconciler.cli.clusters import Fleet
from reconciler.cli.options import collect, example, global_options
from reconciler.cli.served import Served
from reconciler.cli.settings import Layers
from reconciler.client.errors import ConfigMissing
from reconciler.client.kube import Kube
from reconciler.config import Config, ConfigError
from reconciler.engine.events import FLUSH_SECONDS, EventQueue
from reconciler.run.turn import EXIT_FAILED, EXIT_UNREACHABLE, EXIT_USAGE

log = logging.getLogger("reconciler")

DEFAULT_WAIT_TIMEOUT = 300.0  # seconds, as `helm --wait`
COMPLETE_VAR = "_RECONCILER_COMPLETE"  # click's variable for the program name "reconciler"


def fail(code: int, message: str) -> NoReturn:
    """One line on stderr; with ``-o json``, also a JSON object on stdout, so
    a pipeline that parses the output always gets JSON."""
    obj = click.get_current_context().find_root().obj or {}
    if code == EXIT_USAGE and obj.get("detailed_exitcode"):
        code = EXIT_FAILED
    click.echo(f"reconciler: error: {message}", err=True)
    if obj.get("output") == "json":
        result = "unreachable" if code == EXIT_UNREACHABLE else "error"
        click.echo(json.dumps({"result": result, "error": message, "exit_code": code}, indent=2))
    sys.exit(code)


def fleet_of(ctx: click.Context, **command_flags: Any) -> Fleet:
    """The clusters the command serves, each with its settings."""
    flags = dict(ctx.obj["flags"])
    flags.update({k: v for k, v in command_flags.items() if v is not None})
    try:
        layers = Layers.read(ctx.obj["config_file"])
        fleet = clusters.resolve(layers, flags, ctx.obj["contexts"], ctx.obj["all_contexts"])
    except (ConfigError, ConfigMissing) as exc:
        fail(EXIT_USAGE, str(exc))
    first = fleet.clusters[0].config
    logs.setup(first.log_level, first.log_format)
    return fleet


def kube_of(config: Config) -> Kube:
    return Kube(config)


def kubes_of(fleet: Fleet) -> list[Kube]:
    """A client per cluster, before any pass: a context the kubeconfig lacks
    is a usage error, as kubectl makes it."""
    kubes = []
    for c in fleet.clusters:
        try:
            kubes.append(kube_of(c.config))
        except ConfigMissing as exc:
            fail(EXIT_USAGE, f"[{c.name}] {exc}" if fleet.listed else str(exc))
    return kubes


def emit(fleet: Fleet, each: list[Served], output: str) -> NoReturn:
    json_out = output == "json"
    if fleet.listed:
        sys.exit(served.emit_fleet([c.name for c in fleet.clusters], each, json_out))
    sys.exit(served.emit(each[0], json_out))


@click.group(
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=example(
        "reconciler plan -n cache",
        "reconciler sync --config /etc/reconciler/reconciler.yaml",
        "reconciler config -n cache",
    ),
)
@click.version_option(__version__, prog_name="reconciler")
@global_options
@click.pass_context
def cli(ctx: click.Context, /, **options: Any) -> None:
    """A level-triggered polling reconciler for Redis and Xca objects.

    Each pass LISTs Redis objects, Xca objects and their pods, plans the
    changes, and applies them. Settings come from flags, then RECONCILER_*
    environment variables, then --config, then defaults.

    Every key of the config file is also a variable, RECONCILER_<KEY>
    (RECONCILER_QPS=20, RECONCILER_NAMESPACES=a,b); config/reconciler.yaml
    lists every key with its default and meaning, and `reconciler config`
    prints each in effect. Options name their key's variable; keys with no
    option are set in the file or the variable only (listed below).
    """
    collect(ctx, **options)


def flush(events: EventQueue | None) -> None:
    """Post what is queued, for a bounded time: an apiserver that stopped
    answering must not hold the exit, nor `sync --wait` past its timeout.
    None: the passes posted their own."""
    if events is None:
        return
    left = events.flush(timeout=FLUSH_SECONDS)
    if left:
        log.warning("stopping with %d events not posted after %gs", left, FLUSH_SECONDS)


@cli.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the shell completion script for SHELL.

    \b
    Example:
    bash:  eval "$(reconciler completion bash)"   (in ~/.bashrc)
    zsh:   eval "$(reconciler completion zsh)"    (in ~/.zshrc)
    fish:  reconciler completion fish > ~/.config/fish/completions/reconciler.fish
    """
    from click.shell_completion import get_completion_class

    script = get_completion_class(shell)
    assert script is not None  # every choice is one click ships
    click.echo(script(cli, {}, "reconciler", COMPLETE_VAR).source())


def main() -> None:
    cli(prog_name="reconciler")
