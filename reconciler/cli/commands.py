"""Command line: `reconciler sync | plan | run`.

Exit codes are for cron and CronJob: 0 no errors, 1 some objects failed,
2 bad usage or config, 3 the cluster is unreachable or refuses the
credentials. `sync --wait` adds 4: the timeout passed with objects still
pending. `plan --detailed-exitcode` follows `terraform plan`: 2 means
changes are pending, so a bad config exits 1 there.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import TYPE_CHECKING, Any, NoReturn

import click

from reconciler import __version__
from reconciler.cli import clusters, logs, served
from reconciler.cli.clusters import Cluster, Fleet
from reconciler.cli.served import EXIT_FAILED, EXIT_UNREACHABLE, EXIT_USAGE, Served
from reconciler.cli.settings import FLAGS, KIND_FIELDS, Layers
from reconciler.client.errors import ConfigMissing
from reconciler.client.kube import Kube
from reconciler.config import Config, ConfigError
from reconciler.engine.events import FLUSH_SECONDS, EventQueue
from reconciler.engine.runner import Passes, mode_of
from reconciler.engine.sync import Mode
from reconciler.result import PassResult
from reconciler.run.pacing import Schedule
from reconciler.run.wait import wait

if TYPE_CHECKING:  # the daemon's modules: `sync` from cron loads none of them
    from reconciler.run.daemon import Loop
    from reconciler.run.metrics import Metrics

log = logging.getLogger("reconciler")

DEFAULT_WAIT_TIMEOUT = 300.0  # seconds, as `helm --wait`
COMPLETE_VAR = "_RECONCILER_COMPLETE"  # click's variable for the program name "reconciler"


def _fail(code: int, message: str) -> NoReturn:
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


def _fleet(ctx: click.Context, **command_flags: Any) -> Fleet:
    """The clusters the command serves, each with its settings."""
    flags = dict(ctx.obj["flags"])
    flags.update({k: v for k, v in command_flags.items() if v is not None})
    try:
        layers = Layers.read(ctx.obj["config_file"])
        fleet = clusters.resolve(layers, flags, ctx.obj["contexts"], ctx.obj["all_contexts"])
    except (ConfigError, ConfigMissing) as exc:
        _fail(EXIT_USAGE, str(exc))
    first = fleet.clusters[0].config
    logs.setup(first.log_level, first.log_format)
    return fleet


def _kube(config: Config) -> Kube:
    return Kube(config)


def _kubes(fleet: Fleet) -> list[Kube]:
    """A client per cluster, before any pass: a context the kubeconfig lacks
    is a usage error, as kubectl makes it."""
    kubes = []
    for c in fleet.clusters:
        try:
            kubes.append(_kube(c.config))
        except ConfigMissing as exc:
            _fail(EXIT_USAGE, f"[{c.name}] {exc}" if fleet.listed else str(exc))
    return kubes


def _emit(fleet: Fleet, each: list[Served], output: str) -> NoReturn:
    json_out = output == "json"
    if fleet.listed:
        sys.exit(served.emit_fleet([c.name for c in fleet.clusters], each, json_out))
    sys.exit(served.emit(each[0], json_out))


def _kind_flag(key: str, help: str) -> Any:
    """A kind's setting as a global option (`Kind.settings`, "flag")."""
    kind = str(KIND_FIELDS[key].type)
    of_type = float if kind.startswith("float") else int if kind.startswith("int") else str
    return click.option(f"--{key.replace('_', '-')}", key, type=of_type, default=None, help=help)


def global_options(f: Any) -> Any:
    """Connection, scope and logging options, accepted before or after the
    subcommand (``reconciler -n x sync`` and ``reconciler sync -n x``)."""
    options = [
        click.option(
            "--kubeconfig",
            type=click.Path(dir_okay=False),
            default=None,
            help="Path to a kubeconfig. Default: $KUBECONFIG, ~/.kube/config, in-cluster.",
        ),
        click.option(
            "--context",
            "contexts",
            multiple=True,
            help="kubeconfig context to use; repeat it to serve several clusters.",
        ),
        click.option(
            "--all-contexts",
            is_flag=True,
            default=False,
            help="Serve every context of the kubeconfig, each cluster on its own.",
        ),
        click.option(
            "-n",
            "--namespace",
            "namespaces",
            multiple=True,
            help="Namespace to reconcile (repeatable). Default: all namespaces.",
        ),
        click.option(
            "-A",
            "--all-namespaces",
            is_flag=True,
            default=False,
            help="Reconcile every namespace, overriding the config file.",
        ),
        click.option(
            "--config",
            "config_file",
            type=click.Path(dir_okay=False),
            default=None,
            help="YAML config file (keys as in config/reconciler.yaml).",
        ),
        click.option(
            "--log-level",
            default=None,
            type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
        ),
        click.option("--log-format", type=click.Choice(["text", "json"]), default=None),
        *(_kind_flag(key, help) for key, help in FLAGS.items()),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def _collect(
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


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="reconciler")
@global_options
@click.pass_context
def cli(ctx: click.Context, /, **options: Any) -> None:
    """A level-triggered polling reconciler for Redis and Xca objects.

    Each pass LISTs Redis objects, Xca objects and their pods, plans the
    changes, and applies them. Settings come from flags, then RECONCILER_*
    environment variables, then --config, then defaults.
    """
    _collect(ctx, **options)


def _flush(events: EventQueue) -> None:
    """Post what is queued, for a bounded time: an apiserver that stopped
    answering must not hold the exit, nor `sync --wait` past its timeout."""
    left = events.flush(timeout=FLUSH_SECONDS)
    if left:
        log.warning("stopping with %d events not posted after %gs", left, FLUSH_SECONDS)


@cli.command()
@click.option("--dry-run", is_flag=True, default=None, help="Plan and log, write nothing.")
@click.option(
    "-o",
    "--output",
    type=click.Choice(["text", "json"]),
    default="text",
    help="Summary format on stdout.",
)
@click.option(
    "--state-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Keep the pod report's previous view across runs in this file.",
)
@click.option(
    "--wait",
    "wait_",
    is_flag=True,
    help="Run passes, at the daemon's pace, until every object is Ready and a pass plans nothing.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help=f"With --wait: seconds to wait before exiting 4 ({DEFAULT_WAIT_TIMEOUT:g}).",
)
@global_options
@click.pass_context
def sync(
    ctx: click.Context,
    /,
    dry_run: bool | None,
    output: str,
    state_file: str | None,
    wait_: bool,
    timeout: float | None,
    **options: Any,
) -> None:
    """Run one pass and exit (for cron, systemd timers and CronJobs); with
    --wait, run passes until the scope converges (for CI/CD pipelines).

    Exit codes: 0 no errors (with --wait: converged), 1 some objects failed
    (with --wait: also objects that cannot become Ready without a person),
    2 bad usage or config, 3 the cluster is unreachable or refuses the
    credentials, 4 with --wait: the timeout passed with objects still pending.
    """
    _collect(ctx, **options)
    ctx.find_root().obj["output"] = output
    if timeout is not None and not wait_:
        raise click.UsageError("--timeout needs --wait")
    fleet = _fleet(ctx, dry_run=dry_run, state_file=state_file)
    if wait_ and any(c.config.dry_run for c in fleet.clusters):
        raise click.UsageError("--wait cannot be used with --dry-run: nothing would change")
    kubes = _kubes(fleet)
    limit = DEFAULT_WAIT_TIMEOUT if timeout is None else timeout

    def serve(cluster: Cluster, kube: Kube) -> Served:
        return _sync(cluster, kube, wait_, limit, output, fleet.listed)

    _emit(fleet, fleet.each(serve, kubes), output)


def _sync(
    cluster: Cluster, kube: Kube, wait_: bool, limit: float, output: str, named: bool
) -> Served:
    """One cluster's `sync`: a pass, or passes until it converges."""
    config = cluster.config
    # Waiting: events go from a queue, so they do not hold up the next pass.
    events = EventQueue(kube) if wait_ else None
    passes = Passes(kube, config, mode_of(config), events=events)
    prefix = f"[{cluster.name}] " if named else ""

    def one_pass() -> PassResult:
        result = passes()
        if wait_ and output == "text" and not result.unreachable:
            click.echo(prefix + result.one_line())
        return result

    if not wait_:
        return served.of_pass(one_pass())
    waited = wait(one_pass, timeout=limit, schedule=Schedule.of(config))
    if events is not None:
        _flush(events)
    return served.of_wait(waited, limit)


@cli.command()
@click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text")
@click.option(
    "--detailed-exitcode",
    is_flag=True,
    help="Exit 0 when there are no changes, 2 when changes are pending, 1 on errors "
    "(bad config too), 3 when the cluster is unreachable or refuses the credentials.",
)
@click.option("--state-file", type=click.Path(dir_okay=False), default=None)
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
    _collect(ctx, **options)
    ctx.find_root().obj.update(output=output, detailed_exitcode=detailed_exitcode)
    fleet = _fleet(ctx, state_file=state_file)

    def serve(cluster: Cluster, kube: Kube) -> Served:
        passes = Passes(kube, cluster.config, Mode.PLAN)
        result = passes()
        lagging = [] if result.unreachable else passes.lagging_crds()
        return served.of_plan(result, lagging, detailed_exitcode)

    _emit(fleet, fleet.each(serve, _kubes(fleet)), output)


@cli.command()
@click.option("--interval", type=float, default=None, help="Seconds between passes (30).")
@click.option("--jitter", type=float, default=None, help="Random delay added to each pass (3).")
@click.option(
    "--min-interval",
    type=float,
    default=None,
    help="Seconds from the start of a pass that wrote or left objects progressing to"
    f" the next, at the earliest ({Config.min_interval:g}).",
)
@click.option(
    "--pace-budget",
    type=float,
    default=None,
    help="While objects move, the share of the time passes may spend looking (observe"
    " and plan, not the writes): a pass that looked for 1 s is followed 1/budget s"
    f" after it started, if that is past --min-interval ({Config.pace_budget:g}).",
)
@click.option("--dry-run", is_flag=True, default=None, help="Plan and log, write nothing.")
@click.option("--state-file", type=click.Path(dir_okay=False), default=None)
@click.option(
    "--leader-elect/--no-leader-elect",
    default=None,
    help="Only the holder of a coordination.k8s.io Lease reconciles.",
)
@click.option("--leader-election-namespace", default=None, help="Namespace of the Lease.")
@click.option("--leader-election-id", default=None, help="Name of the Lease (reconciler).")
@click.option(
    "--shard/--no-shard",
    default=None,
    help="Every replica works: the objects are split into buckets, each held by one"
    " replica through a Lease (not with --leader-elect).",
)
@click.option(
    "--shard-buckets", type=int, default=None, help="Buckets to split the objects into (32)."
)
@click.option(
    "--metrics-address",
    default=None,
    help="Serve /metrics, /healthz and /readyz here, e.g. :8080 or 127.0.0.1:8080.",
)
@global_options
@click.pass_context
def run(
    ctx: click.Context,
    /,
    interval: float | None,
    jitter: float | None,
    min_interval: float | None,
    pace_budget: float | None,
    dry_run: bool | None,
    state_file: str | None,
    leader_elect: bool | None,
    leader_election_namespace: str | None,
    leader_election_id: str | None,
    shard: bool | None,
    shard_buckets: int | None,
    metrics_address: str | None,
    **options: Any,
) -> None:
    """Run a pass every --interval seconds until SIGTERM (the daemon)."""
    # Imported here: `sync` from cron pays for none of the daemon's modules.
    from reconciler.run import manager

    _collect(ctx, **options)
    fleet = _fleet(
        ctx,
        interval=interval,
        jitter=jitter,
        min_interval=min_interval,
        pace_budget=pace_budget,
        dry_run=dry_run,
        state_file=state_file,
        leader_elect=leader_elect,
        leader_election_namespace=leader_election_namespace,
        leader_election_id=leader_election_id,
        shard=shard,
        shard_buckets=shard_buckets,
        metrics_address=metrics_address,
    )
    kubes = _kubes(fleet)
    top = fleet.clusters[0].config  # the process's own keys: the same in every cluster
    try:
        metrics = manager.serve_metrics(top, named=fleet.listed)
        started = fleet.each(lambda c, kube: _start(c, kube, metrics, fleet.listed), kubes)
    except manager.CannotStart as exc:
        _fail(EXIT_USAGE, str(exc))
    code = manager.run([loop for loop, _ in started], top.clusters_in_parallel)
    for _, events in started:
        _flush(events)
    sys.exit(code)


def _start(
    cluster: Cluster, kube: Kube, metrics: Metrics | None, named: bool
) -> tuple[Loop, EventQueue]:
    """One cluster's loop, once its Lease can be held."""
    from reconciler.run import manager

    config = cluster.config
    where = f"[{cluster.name}] " if named else ""
    try:
        manager.check_leases(kube, config)
    except manager.CannotStart as exc:
        raise manager.CannotStart(f"{where}{exc}") from None
    parts = manager.assemble(kube, config, metrics, cluster.name)
    # Every write of this cluster's passes, its events too, asks the fence.
    events = EventQueue(parts.kube)
    passes = Passes(
        parts.kube,
        config,
        mode_of(config),
        fence=parts.fence,
        shard=parts.member,
        events=events,
        daemon=True,
    )
    return manager.loop(passes, parts, config, cluster.name), events


@cli.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the shell completion script for SHELL.

    \b
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
