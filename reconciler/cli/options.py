"""The options every command shares, and how an option's help is written:
its default and, for an option that sets a key, its RECONCILER_<KEY>
variable, both generated from the settings (`keyed`), so no help restates
a number the code holds."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click
from click.decorators import FC

from reconciler.cli.settings import CONFIG_FILE_ENV, ENV_PREFIX, FLAGS, KEYS, KIND_FIELDS


def _shown(value: Any) -> str:
    """A default as a user would write it."""
    if value is None or value == "":
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def keyed(text: str, key: str, default: str | None = None) -> str:
    """The help of an option that sets ``key``: its variable, and its default
    (the code's, unless ``default`` says what none means)."""
    shown = _shown(KEYS[key].default) if default is None else default
    return f"{text} [env var: {ENV_PREFIX}{key.upper()}; default: {shown}]"


def unkeyed(text: str, default: str) -> str:
    """The help of an option that sets no key."""
    return f"{text} [default: {default}]"


def exit_codes(*meanings: tuple[int, str]) -> str:
    """A command's exit codes, a line each, for its help's epilog."""
    return "\b\nExit codes:\n" + "\n".join(f"  {code}  {what}" for code, what in meanings)


def example(*lines: str) -> str:
    return "\b\nExample:\n" + "\n".join(f"  {line}" for line in lines)


def _kind_flag(key: str, help: str) -> Any:
    """A kind's setting as a global option (`Kind.settings`, "flag")."""
    kind = str(KIND_FIELDS[key].type)
    of_type = float if kind.startswith("float") else int if kind.startswith("int") else str
    return click.option(
        f"--{key.replace('_', '-')}", key, type=of_type, default=None, help=keyed(help, key)
    )


def global_options(f: Any) -> Any:
    """Connection, scope and logging options, accepted before or after the
    subcommand (``reconciler -n x sync`` and ``reconciler sync -n x``)."""
    options = [
        click.option(
            "--kubeconfig",
            type=click.Path(dir_okay=False),
            default=None,
            help=keyed(
                "Path to a kubeconfig (a clusters entry's own kubeconfig loses to it).",
                "kubeconfig",
                "$KUBECONFIG, else ~/.kube/config, else in-cluster",
            ),
        ),
        click.option(
            "--context",
            "contexts",
            multiple=True,
            help=keyed(
                "kubeconfig context to use; repeat it to serve several clusters.",
                "context",
                "the kubeconfig's current context, or the config file's clusters",
            ),
        ),
        click.option(
            "--all-contexts",
            is_flag=True,
            default=False,
            help=unkeyed("Serve every context of the kubeconfig, each cluster on its own.", "off"),
        ),
        click.option(
            "-n",
            "--namespace",
            "namespaces",
            multiple=True,
            help=keyed(
                "Namespace to reconcile (repeatable; the variable takes a,b).",
                "namespaces",
                "all namespaces",
            ),
        ),
        click.option(
            "-A",
            "--all-namespaces",
            is_flag=True,
            default=False,
            help=keyed(
                "Reconcile every namespace, overriding the file and the variable.",
                "namespaces",
                "off",
            ),
        ),
        click.option(
            "--config",
            "config_file",
            type=click.Path(dir_okay=False),
            default=None,
            help=f"YAML config file: every key, with its default, is in config/reconciler.yaml;"
            " `reconciler config` prints each key in effect and where it came from."
            f" [env var: {CONFIG_FILE_ENV}; default: none]",
        ),
        click.option(
            "--log-level",
            default=None,
            type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
            help=keyed("Log level.", "log_level"),
        ),
        click.option(
            "--log-format",
            type=click.Choice(["text", "json"]),
            default=None,
            help=keyed("Log lines as text, or as one JSON object each.", "log_format"),
        ),
        *(_kind_flag(key, help) for key, help in FLAGS.items()),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def collect(
    ctx: click.Context,
    kubeconfig: str | None,
    contexts: tuple[str, ...],
    all_contexts: bool,
    namespaces: tuple[str, ...],
    all_namespaces: bool,
    config_file: str | None,
    log_level: str | None,
    log_format: str | None,
    **kind_flags: Any,
) -> None:
    """Merge one level's global options into ctx.obj; later levels win."""
    if namespaces and all_namespaces:
        raise click.UsageError("-n/--namespace and -A/--all-namespaces are exclusive")
    obj = ctx.ensure_object(dict)
    flags = obj.setdefault("flags", {})
    given = {
        "kubeconfig": kubeconfig,
        "log_level": log_level,
        "log_format": log_format,
        **kind_flags,
    }
    flags.update({k: v for k, v in given.items() if v is not None})
    if namespaces:
        flags["namespaces"] = namespaces
    if all_namespaces:
        flags["namespaces"] = ()
    if contexts:
        obj["contexts"] = contexts
    obj.setdefault("contexts", ())
    obj["all_contexts"] = obj.get("all_contexts", False) or all_contexts
    if config_file:
        obj["config_file"] = config_file
    obj.setdefault("config_file", None)


DRY_RUN_HELP = keyed("Plan and log, write nothing.", "dry_run")
STATE_FILE_HELP = keyed(
    "Keep the pod report's previous view across runs in this file.", "state_file"
)
# The options several commands take alike.
DRY_RUN = click.option("--dry-run", is_flag=True, default=None, help=DRY_RUN_HELP)
STATE_FILE = click.option(
    "--state-file", type=click.Path(dir_okay=False), default=None, help=STATE_FILE_HELP
)


def output_option(help: str) -> Callable[[FC], FC]:
    """``-o text|json``; ``help`` says what the text form is."""
    choice = click.Choice(["text", "json"])
    return click.option("-o", "--output", type=choice, default="text", help=unkeyed(help, "text"))
