"""Command line: `reconciler sync | plan | run`.

Exit codes are for cron and CronJob (`served.py` holds them; each command's
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
from typing import TYPE_CHECKING, Any, NoReturn

import click

from reconciler import __version__
from reconciler.cli import clusters, logs, served
from reconciler.cli.clusters import Cluster, Fleet
from reconciler.cli.served import (
    EXIT_CHANGES,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_TIMEOUT,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    Served,
)
from reconciler.cli.settings import CONFIG_FILE_ENV, ENV_PREFIX, FLAGS, KEYS, KIND_FIELDS, Layers
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
    _collect(ctx, **options)


def _flush(events: EventQueue) -> None:
    """Post what is queued, for a bounded time: an apiserver that stopped
    answering must not hold the exit, nor `sync --wait` past its timeout."""
    left = events.flush(timeout=FLUSH_SECONDS)
    if left:
        log.warning("stopping with %d events not posted after %gs", left, FLUSH_SECONDS)


DRY_RUN_HELP = keyed("Plan and log, write nothing.", "dry_run")
STATE_FILE_HELP = keyed(
    "Keep the pod report's previous view across runs in this file.", "state_file"
)


@cli.command(
    epilog=example(
        "reconciler sync -n cache -o json",
        "reconciler sync --wait --timeout 600   # in a pipeline, after kubectl apply",
    )
    + "\n\n"
    + exit_codes(
        (EXIT_OK, "no errors (with --wait: converged)"),
        (
            EXIT_FAILED,
            "some objects failed (with --wait: also objects that cannot become Ready"
            " without a person)",
        ),
        (EXIT_USAGE, "bad usage or config"),
        (EXIT_UNREACHABLE, "the cluster is unreachable or refuses the credentials"),
        (EXIT_TIMEOUT, "with --wait: the timeout passed with objects still pending"),
    )
)
@click.option("--dry-run", is_flag=True, default=None, help=DRY_RUN_HELP)
@click.option(
    "-o",
    "--output",
    type=click.Choice(["text", "json"]),
    default="text",
    help=unkeyed("Summary format on stdout.", "text"),
)
@click.option(
    "--state-file",
    type=click.Path(dir_okay=False),
    default=None,
    help=STATE_FILE_HELP,
)
@click.option(
    "--wait",
    "wait_",
    is_flag=True,
    help=unkeyed(
        "Run passes, at the daemon's pace, until every object is Ready and a pass plans nothing.",
        "off",
    ),
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help=unkeyed(
        f"With --wait: seconds to wait before exiting {EXIT_TIMEOUT}. Not the `timeout` key"
        f" (each request's, {ENV_PREFIX}TIMEOUT, which has no option).",
        f"{DEFAULT_WAIT_TIMEOUT:g}",
    ),
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


@cli.command(
    epilog=example("reconciler plan -n cache", "reconciler plan --detailed-exitcode -o json")
    + "\n\n"
    + exit_codes(
        (EXIT_OK, "no errors (with --detailed-exitcode: and no changes)"),
        (EXIT_FAILED, "some objects failed (with --detailed-exitcode: bad usage or config too)"),
        (EXIT_USAGE, "bad usage or config (with --detailed-exitcode: changes are pending)"),
        (EXIT_UNREACHABLE, "the cluster is unreachable or refuses the credentials"),
    )
)
@click.option(
    "-o",
    "--output",
    type=click.Choice(["text", "json"]),
    default="text",
    help=unkeyed("Plan format on stdout.", "text"),
)
@click.option(
    "--detailed-exitcode",
    is_flag=True,
    help=unkeyed(
        f"Exit {EXIT_OK} when there are no changes, {EXIT_CHANGES} when changes are pending,"
        f" {EXIT_FAILED} on errors (bad config too), {EXIT_UNREACHABLE} when the cluster is"
        " unreachable or refuses the credentials, as `terraform plan`.",
        "off",
    ),
)
@click.option("--state-file", type=click.Path(dir_okay=False), default=None, help=STATE_FILE_HELP)
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


@cli.command(
    epilog=example(
        "reconciler run --config /etc/reconciler/reconciler.yaml --metrics-address :8080",
        "reconciler run --leader-elect   # beside other replicas",
    )
    + "\n\n"
    + exit_codes(
        (EXIT_OK, "stopped by SIGTERM or SIGINT, after the running pass"),
        (EXIT_USAGE, "bad usage or config, or it cannot start (its Lease, its metrics address)"),
    )
)
@click.option(
    "--interval", type=float, default=None, help=keyed("Seconds between passes.", "interval")
)
@click.option(
    "--jitter",
    type=float,
    default=None,
    help=keyed("Random delay, up to this many seconds, added to each pass.", "jitter"),
)
@click.option(
    "--min-interval",
    type=float,
    default=None,
    help=keyed(
        "Seconds from the start of a pass that wrote or left objects progressing to"
        " the next, at the earliest.",
        "min_interval",
    ),
)
@click.option(
    "--pace-budget",
    type=float,
    default=None,
    help=keyed(
        "While objects move, the share of the time passes may spend looking (observe"
        " and plan, not the writes): a pass that looked for 1 s is followed 1/budget s"
        " after it started, if that is past --min-interval.",
        "pace_budget",
    ),
)
@click.option("--dry-run", is_flag=True, default=None, help=DRY_RUN_HELP)
@click.option("--state-file", type=click.Path(dir_okay=False), default=None, help=STATE_FILE_HELP)
@click.option(
    "--leader-elect/--no-leader-elect",
    default=None,
    help=keyed("Only the holder of a coordination.k8s.io Lease reconciles.", "leader_elect"),
)
@click.option(
    "--leader-election-namespace",
    default=None,
    help=keyed("Namespace of the Lease (and of --shard's).", "leader_election_namespace"),
)
@click.option(
    "--leader-election-id",
    default=None,
    help=keyed("Name of the Lease (and --shard's prefix).", "leader_election_id"),
)
@click.option(
    "--shard/--no-shard",
    default=None,
    help=keyed(
        "Every replica works: the objects are split into buckets, each held by one"
        " replica through a Lease (not with --leader-elect).",
        "shard",
    ),
)
@click.option(
    "--shard-buckets",
    type=int,
    default=None,
    help=keyed("Buckets to split the objects into.", "shard_buckets"),
)
@click.option(
    "--metrics-address",
    default=None,
    help=keyed(
        "Serve /metrics, /healthz and /readyz here, e.g. :8080 or 127.0.0.1:8080.",
        "metrics_address",
        "off",
    ),
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
    Example:
    bash:  eval "$(reconciler completion bash)"   (in ~/.bashrc)
    zsh:   eval "$(reconciler completion zsh)"    (in ~/.zshrc)
    fish:  reconciler completion fish > ~/.config/fish/completions/reconciler.fish
    """
    from click.shell_completion import get_completion_class

    script = get_completion_class(shell)
    assert script is not None  # every choice is one click ships
    click.echo(script(cli, {}, "reconciler", COMPLETE_VAR).source())


def _unflagged() -> list[str]:
    """The keys no option sets: sync's --timeout is the wait's, not the key."""
    names = {p.name for c in (cli, plan, run) for p in c.params}
    names |= {p.name for p in sync.params if p.name != "timeout"}
    names |= {"context"} if "contexts" in names else set()
    return sorted(k for k in KEYS if k not in names)


cli.epilog = (
    f"{cli.epilog}\n\nKeys with no option, set in the config file or as {ENV_PREFIX}<KEY>:"
    f" {', '.join(_unflagged())}."
)


def main() -> None:
    cli(prog_name="reconciler")
