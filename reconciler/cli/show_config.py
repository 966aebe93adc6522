"""`reconciler config`: the settings `sync` and `run` would use with the same
flags, each with where it came from, one block per cluster.

A user asks "which settings is it running with?" of a unit or a CronJob:
given that command line, this answers without a pass. It prints values and
paths only: the kubeconfig is not read, but for the context names of
``--all-contexts``, so no credential of its users can be printed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Mapping
from typing import Any

import click

from reconciler.cli import commands, run_command, sync_command
from reconciler.cli.clusters import Cluster, Fleet
from reconciler.cli.options import collect, example, exit_codes, global_options, unkeyed
from reconciler.cli.settings import CONFIG_FILE_ENV, DEFAULT, KEYS, KIND_DEFAULTS
from reconciler.config import FIELDS
from reconciler.kinds.base import settings_of
from reconciler.run.turn import EXIT_OK, EXIT_USAGE

# kubectl's default kubeconfig: what an unset `kubeconfig` key means.
KUBECONFIG_ENV = "KUBECONFIG"
OUTPUT = click.Option(
    ["-o", "--output"],
    type=click.Choice(["text", "json"]),
    default="text",
    help=unkeyed("Output format.", "text"),
)
EPILOG = (
    example("reconciler config --config /etc/reconciler/reconciler.yaml -o json")
    + "\n\n"
    + exit_codes(
        (EXIT_OK, "printed"),
        (
            EXIT_USAGE,
            "bad usage or config (the line names the file, variable or flag, and the key)",
        ),
    )
)


def _options() -> list[click.Parameter]:
    """run's and sync's own options (each once), then --output: a command
    line of either, pasted after `config`, is taken as it is."""
    globals_ = {p.name for p in commands.cli.params}
    own: dict[str | None, click.Parameter] = {}
    for command in (run_command.run, sync_command.sync):
        for p in command.params:
            if p.name not in globals_ and p.name != OUTPUT.name:
                own.setdefault(p.name, p)
    return [*own.values(), OUTPUT]


@click.command("config", params=_options(), epilog=EPILOG)
@global_options
@click.pass_context
def command(ctx: click.Context, /, output: str, **options: Any) -> None:
    """Print the settings `sync` and `run` would use with these flags: every
    key, its value and where it came from (default, the file and its path, a
    clusters entry, RECONCILER_<KEY>, a flag), one block per cluster. Takes
    sync's and run's options; their options that are not keys (--wait,
    --timeout) change nothing here. No credential is printed.
    """
    globals_ = {p.name for p in commands.cli.params}
    collect(ctx, **{k: v for k, v in options.items() if k in globals_})
    ctx.find_root().obj["output"] = output
    own = {k: v for k, v in options.items() if k not in globals_}
    keyed = {k: v for k, v in own.items() if k in KEYS and v is not None}
    fleet = commands.fleet_of(ctx, **keyed)
    doc = document(fleet, _config_file(ctx), os.environ)
    click.echo(json.dumps(doc, indent=2) if output == "json" else "\n".join(text(doc)))
    sys.exit(EXIT_OK)


def _config_file(ctx: click.Context) -> dict[str, str] | None:
    """The file read, and what named it."""
    given = ctx.find_root().obj["config_file"]
    if given:
        return {"path": given, "source": "flag --config"}
    from_env = os.environ.get(CONFIG_FILE_ENV)
    return {"path": from_env, "source": f"env {CONFIG_FILE_ENV}"} if from_env else None


def document(
    fleet: Fleet, config_file: dict[str, str] | None, environ: Mapping[str, str]
) -> dict[str, Any]:
    """The JSON of `-o json`: one cluster's settings, or each cluster's by name."""
    doc: dict[str, Any] = {"config_file": config_file}
    if not fleet.listed:
        return {**doc, "settings": settings(fleet.clusters[0], environ)}
    clusters = {c.name: {"settings": settings(c, environ)} for c in fleet.clusters}
    return {**doc, "clusters": clusters}


def settings(cluster: Cluster, environ: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """Every key: its value and its source."""
    out = {
        key: {"value": _value(cluster, key), "source": cluster.sources.get(key, DEFAULT)}
        for key in KEYS
    }
    unset = out["kubeconfig"]["value"] is None
    if unset and environ.get(KUBECONFIG_ENV):
        # As kubectl: with no kubeconfig given, $KUBECONFIG is the one read.
        out["kubeconfig"] = {"value": environ[KUBECONFIG_ENV], "source": f"env {KUBECONFIG_ENV}"}
    return out


def _value(cluster: Cluster, key: str) -> Any:
    if key in FIELDS:
        value = getattr(cluster.config, key)
    else:
        defaults = next(d for d in KIND_DEFAULTS if key in _field_names(d))
        value = getattr(settings_of(cluster.config, defaults), key)
    return list(value) if isinstance(value, tuple) else value


def _field_names(defaults: object) -> set[str]:
    return {f.name for f in dataclasses.fields(defaults)}  # type: ignore[arg-type]


def text(doc: Mapping[str, Any]) -> list[str]:
    """A line per key, in columns; each cluster's lines under its name."""
    named = doc["config_file"]
    lines = [f"config file: {named['path']} ({named['source']})" if named else "config file: none"]
    if "settings" in doc:
        return lines + _table(doc["settings"], "")
    for name, cluster in doc["clusters"].items():
        lines += _table(cluster["settings"], f"[{name}] ")
    return lines


def _table(settings: Mapping[str, Mapping[str, Any]], prefix: str) -> list[str]:
    rows = [(key, json.dumps(s["value"]), str(s["source"])) for key, s in settings.items()]
    rows.insert(0, ("KEY", "VALUE", "SOURCE"))
    key_w = max(len(r[0]) for r in rows)
    value_w = max(len(r[1]) for r in rows)
    return [f"{prefix}{k:<{key_w}}  {v:<{value_w}}  {s}".rstrip() for k, v, s in rows]
