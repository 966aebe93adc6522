"""`reconciler restart redis NAME`: roll every pod of a Redis once, as
`kubectl rollout restart` does for a Deployment.

The command only asks: it merge-patches ``spec.restartedAt`` to the time
now, and the passes of the reconciler do the rest. The planner puts that
field into the pods' template hash, so a new value rolls every pod once
through the rolling update (one serving pod at a time, through the Eviction
API), and the same value again rolls nothing. The request stays in the
object, so a restart survives a crash of the reconciler half-way.

It names the cluster as `sync` and `plan` do (``--kubeconfig``,
``--context``, the config file's list of clusters) and the namespace as
kubectl does: ``-n``, else the context's namespace, else ``default``. The
config file's ``namespaces`` is the scope of passes, not where a name is
looked up, so it is not read here.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import click

from reconciler.cli import commands, served
from reconciler.cli.clusters import Cluster
from reconciler.cli.options import collect, example, exit_codes, global_options, keyed, unkeyed
from reconciler.cli.served import Served
from reconciler.client.errors import ApiError, Forbidden, NotFound, Unauthorized, Unreachable
from reconciler.client.interface import Client
from reconciler.client.kube import Kube
from reconciler.engine.crd_release import APPLY_CRDS
from reconciler.kinds.redis.identity import RESOURCE
from reconciler.kinds.redis.server import RESTARTED_FIELD
from reconciler.model import rfc3339
from reconciler.run.turn import EXIT_FAILED, EXIT_OK, EXIT_UNREACHABLE, EXIT_USAGE

# The Redis resource as kubectl names it in its output: redis.myapp.demo.kubebuilder.io.
SHOWN = f"{RESOURCE.plural}.{RESOURCE.group}"

# A Redis's name (a DNS subdomain) and a namespace's (a DNS label), as the
# apiserver checks them; anything else would also be a path of another URL.
_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def _now() -> datetime:
    """The clock, replaced by the unit tests."""
    return datetime.now(UTC)


def restart_redis(
    client: Client, namespace: str, name: str, at: datetime, dry_run: bool = False
) -> Served:
    """Merge-patch the Redis's ``spec.restartedAt`` to ``at`` (UTC, seconds);
    with ``dry_run``, GET it instead and write nothing.

    No resourceVersion is sent, and none is needed. The patch names one
    field and no other, so it cannot undo anyone's change to the rest of the
    object; and for that one field the last writer is meant to win: each
    restart is a person's wish that the pods roll once from now on, and two
    restarts asked together are one restart, as with `kubectl rollout
    restart` (which patches its annotation the same way). A compare-and-swap
    would only turn that into a conflict the user must retry. Two restarts
    within one second write the same value, and the second rolls nothing.
    """
    stamp = rfc3339(at)
    target = f"{SHOWN}/{name}"
    try:
        if dry_run:
            found = client.get(RESOURCE, namespace, name)
        else:
            patch = {"spec": {RESTARTED_FIELD: stamp}}
            found = client.merge_patch(RESOURCE, namespace, name, patch)
    except NotFound as exc:
        return _failed(_not_found(namespace, name, exc))
    except (Unauthorized, Forbidden) as exc:
        verb = "get" if dry_run else "patch"
        return served.unreachable(f"{target} in namespace {namespace!r}: may not {verb}: {exc}")
    except Unreachable as exc:  # NoCredentials too: nothing could be asked
        return served.unreachable(f"cannot reach the cluster: {exc}")
    except ApiError as exc:
        return _failed(f"{target} in namespace {namespace!r}: {exc}")
    spec = found.get("spec")
    spec = spec if isinstance(spec, dict) else {}
    if not dry_run and spec.get(RESTARTED_FIELD) is None:
        return _failed(
            f"{target}: the cluster's Redis CRD dropped spec.{RESTARTED_FIELD}: it is an older"
            f" release's; apply this release's CRDs ({APPLY_CRDS})"
        )
    warnings = []
    if spec.get("paused") is True:
        warnings.append(
            f"{target} is paused (spec.paused): its pods roll once spec.paused is false"
        )
    doc: dict[str, Any] = {
        "result": "dry-run" if dry_run else "restarted",
        "object": target,
        "namespace": namespace,
        "name": name,
        "restarted_at": stamp,
        "dry_run": dry_run,
        "warnings": warnings,
        "exit_code": EXIT_OK,
    }
    line = f"{target} restarted" + (" (dry run)" if dry_run else "")
    return Served(EXIT_OK, doc, (line,), tuple(f"warning: {w}" for w in warnings))


def _not_found(namespace: str, name: str, exc: NotFound) -> str:
    """The Redis is missing, or the whole resource is: a CRD not installed
    answers 404 too, without naming the object."""
    if f'"{name}"' in exc.message:
        return f'{SHOWN} "{name}" not found in namespace "{namespace}"'
    return (
        f"the {RESOURCE.kind} CRD is not installed ({exc.status}: {exc.message});"
        " apply crds/ (make install)"
    )


def _failed(message: str) -> Served:
    doc = {"result": "error", "error": message, "exit_code": EXIT_FAILED}
    return Served(EXIT_FAILED, doc, error=message)


def _namespace(ctx: click.Context) -> str | None:
    """The one namespace given with -n, or None for the context's own."""
    given = ctx.find_root().obj["flags"].get("namespaces")
    if given is None:
        return None
    if len(given) != 1:
        which = "-A/--all-namespaces" if not given else "more than one -n/--namespace"
        raise click.UsageError(f"restart takes one namespace, not {which}")
    (namespace,) = given
    if not _NAMESPACE.fullmatch(namespace):
        raise click.UsageError(f"-n/--namespace: {namespace!r} is not a namespace's name")
    return str(namespace)


@click.group(
    "restart",
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=example("reconciler restart redis redis-sample -n shop"),
)
@global_options
@click.pass_context
def group(ctx: click.Context, /, **options: Any) -> None:
    """Roll every pod of an object once (`restart redis NAME`)."""
    collect(ctx, **options)


@group.command(
    "redis",
    epilog=exit_codes(
        (EXIT_OK, "restarted (or, with --dry-run, would be)"),
        (EXIT_FAILED, "no such Redis, or the apiserver refused the patch"),
        (EXIT_USAGE, "bad usage or config"),
        (EXIT_UNREACHABLE, "the cluster is unreachable or refuses the credentials"),
    ),
)
@click.argument("name")
@click.option(
    "--dry-run",
    is_flag=True,
    default=None,
    help=keyed(
        "Check that the Redis is there (a GET) and say what would be done; write nothing.",
        "dry_run",
    ),
)
@click.option(
    "-o",
    "--output",
    type=click.Choice(["text", "json"]),
    default="text",
    help=unkeyed("Output format.", "text"),
)
@global_options
@click.pass_context
def redis(
    ctx: click.Context, /, name: str, dry_run: bool | None, output: str, **options: Any
) -> None:
    """Roll every pod of the Redis NAME once, one at a time, as `kubectl rollout
    restart` does for a Deployment: after a password rotation, or to pick up a
    changed ConfigMap of your own.

    It sets the Redis's spec.restartedAt to the time now (UTC, seconds) with a
    merge patch and writes nothing else; the reconciler's next passes roll the
    pods. The same as:

    \b
      kubectl patch redis NAME --type=merge \\
        -p '{"spec":{"restartedAt":"2026-11-28T21:40:00Z"}}'

    The namespace is -n, else the kubeconfig context's (as kubectl). A paused
    Redis keeps the request: its pods roll once spec.paused is false.

    \b
    Example:
      reconciler restart redis redis-sample -n shop
      redis.myapp.demo.kubebuilder.io/redis-sample restarted
    """
    collect(ctx, **options)
    ctx.find_root().obj["output"] = output
    if not _NAME.fullmatch(name):
        raise click.UsageError(f"{name!r} is not a Redis's name (lower case, digits, - and .)")
    namespace = _namespace(ctx)
    fleet = commands.fleet_of(ctx, dry_run=dry_run)
    kubes = commands.kubes_of(fleet)
    at = _now()

    def serve(cluster: Cluster, kube: Kube) -> Served:
        where = namespace or kube.default_namespace
        return restart_redis(kube, where, name, at, cluster.config.dry_run)

    commands.emit(fleet, fleet.each(serve, kubes), output)


def _one_namespace(command: click.Command) -> None:
    """The global options say what -n means to a pass; here it names where the Redis is."""
    for param in command.params:
        if param.name == "namespaces":
            assert isinstance(param, click.Option)
            param.help = unkeyed(
                "Namespace of the Redis.", "the kubeconfig context's, else default"
            )
        elif param.name == "all_namespaces":
            assert isinstance(param, click.Option)
            param.hidden = True  # accepted, as everywhere, and refused: one Redis is named


_one_namespace(group)
_one_namespace(redis)
