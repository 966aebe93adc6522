"""`reconciler check`: the host's and each cluster's checks, as lines.

It takes `run`'s options (the same objects, so a unit's arguments check
that unit) and prints ✓ or ✗ per check, with a ``fix:`` line under each ✗.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import click

from reconciler.checks import Check, failed, passed, suite
from reconciler.cli import clusters, commands, logs, run_command
from reconciler.cli.clusters import Cluster, Fleet
from reconciler.cli.options import collect, example, exit_codes, global_options, unkeyed
from reconciler.cli.settings import CONFIG_FILE_ENV, Layers
from reconciler.client.errors import ConfigMissing
from reconciler.config import ConfigError
from reconciler.run.turn import EXIT_FAILED, EXIT_OK, EXIT_UNREACHABLE, EXIT_USAGE

CONFIG = "config"
KUBECONFIG = "kubeconfig"
OUTPUT = click.Option(
    ["-o", "--output"],
    type=click.Choice(["text", "json"]),
    default="text",
    help=unkeyed("A line per check, or one JSON document.", "text"),
)


def _options() -> list[click.Parameter]:
    """run's own options, then --output; the global ones come with @global_options."""
    globals_ = {p.name for p in commands.cli.params}
    own = [p for p in run_command.run.params if p.name not in globals_]
    return [*own, OUTPUT]


@click.command(
    "check",
    params=_options(),
    epilog=example(
        "reconciler check --config /etc/reconciler/reconciler.yaml -n cache",
        "reconciler check --context prod --context staging -o json",
    )
    + "\n\n"
    + exit_codes(
        (EXIT_OK, "every check passed"),
        (EXIT_FAILED, "some check failed (a bad config too): its fix: line says what to do"),
        (EXIT_USAGE, "bad usage: an unknown option, or a value not of its type"),
        (EXIT_UNREACHABLE, "a cluster cannot be reached, or refuses the credentials"),
    ),
)
@global_options
@click.pass_context
def command(ctx: click.Context, /, output: str, **options: Any) -> None:
    """Check this host and each cluster in scope before a first pass: the
    apiserver and its version, who it says we are, the credential, our CRDs,
    every request a pass makes in each namespace (and the Leases with
    --leader-elect or --shard), the state file and the metrics address.
    Takes run's options: `reconciler check` with a unit's arguments checks
    that unit.
    """
    run_flags = {k: v for k, v in options.items() if k in _run_keys()}
    collect(ctx, **{k: v for k, v in options.items() if k not in run_flags})
    host, fleet = _settings(ctx, run_flags)
    per_cluster = fleet.each(_check_cluster, [None] * len(fleet.clusters)) if fleet else []
    names = [c.name for c in fleet.clusters] if fleet and fleet.listed else []
    sys.exit(_emit(host, names, per_cluster, output))


def _run_keys() -> set[str]:
    globals_ = {p.name for p in commands.cli.params}
    return {str(p.name) for p in run_command.run.params if p.name not in globals_}


def _settings(ctx: click.Context, run_flags: dict[str, Any]) -> tuple[list[Check], Fleet | None]:
    """The config check and, when it passes, the fleet and the host's checks."""
    obj = ctx.obj
    flags = {**obj["flags"], **{k: v for k, v in run_flags.items() if v is not None}}
    source = obj["config_file"] or _env_config()
    try:
        layers = Layers.read(obj["config_file"])
        fleet = clusters.resolve(layers, flags, obj["contexts"], obj["all_contexts"])
    except (ConfigError, ConfigMissing) as exc:
        fix = "correct it; every key is listed in config/reconciler.yaml"
        return [failed(CONFIG, str(exc), fix)], None
    first = fleet.clusters[0].config
    logs.setup(first.log_level, first.log_format)
    said = f"{source}: every key known" if source else "no file: defaults, variables and flags"
    return [passed(CONFIG, said), *suite.of_host(first)], fleet


def _env_config() -> str | None:
    return os.environ.get(CONFIG_FILE_ENV)


def _check_cluster(cluster: Cluster, _: None) -> list[Check]:
    try:
        kube = commands.kube_of(cluster.config)
    except ConfigMissing as exc:
        return [failed(KUBECONFIG, str(exc), "see kubectl config get-contexts", fatal=True)]
    return suite.of_cluster(kube, cluster.config, time.time())


def exit_code(checks: Sequence[Check]) -> int:
    if any(c.fatal for c in checks):
        return EXIT_UNREACHABLE
    return EXIT_OK if all(c.ok for c in checks) else EXIT_FAILED


def _emit(host: list[Check], names: list[str], per_cluster: list[list[Check]], output: str) -> int:
    everything = [*host, *(c for checks in per_cluster for c in checks)]
    code = exit_code(everything)
    if output == "json":
        doc: dict[str, Any] = {"exit_code": code, "host": [_doc(c) for c in host]}
        if names:
            pairs = zip(names, per_cluster, strict=True)
            doc["clusters"] = {n: [_doc(c) for c in cs] for n, cs in pairs}
        else:
            doc["cluster"] = [_doc(c) for c in per_cluster[0]] if per_cluster else []
        click.echo(json.dumps(doc, indent=2))
        return code
    for check in host:
        _line(check, "")
    for name, checks in zip(names or [""] * len(per_cluster), per_cluster, strict=True):
        for check in checks:
            _line(check, f"[{name}] " if name else "")
    return code


def _doc(check: Check) -> dict[str, Any]:
    doc: dict[str, Any] = {"name": check.name, "ok": check.ok, "detail": check.detail}
    if check.warning:
        doc["warning"] = True
    return {**doc, "fix": check.fix} if check.fix else doc


def _line(check: Check, prefix: str) -> None:
    mark = "!" if check.warning else "✓" if check.ok else "✗"
    click.echo(f"{prefix}{mark} {check.name}: {check.detail}")
    if check.fix:
        click.echo(f"{prefix}    fix: {check.fix}")
