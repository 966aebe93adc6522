"""`reconciler manifests crds | rbac | leases`: what a cluster admin applies,
printed by the installed binary for `kubectl apply -f -`, from any directory.

`reconciler check` prints these commands, for the identity it found, as
the fix of each refusal; checks/manifests.py makes the objects.
"""

from __future__ import annotations

from typing import Any

import click

from reconciler.checks import grants
from reconciler.checks import manifests as made
from reconciler.checks.access import ROLE
from reconciler.checks.grants import Subject
from reconciler.cli.options import example


def _subject_options(f: Any) -> Any:
    """--serviceaccount NS:NAME, --user U or --group G: exactly one."""
    helps = {
        grants.SERVICE_ACCOUNT: ("NS:NAME", "Bind this ServiceAccount."),
        grants.USER: ("USER", "Bind this user, as the cluster names it (kubectl auth whoami)."),
        grants.GROUP: ("GROUP", "Bind this group."),
    }
    for kind, (metavar, text) in reversed(helps.items()):
        name = grants.FLAGS[kind]
        f = click.option(name, name.lstrip("-"), metavar=metavar, help=text)(f)
    return f


def _subject(serviceaccount: str | None, user: str | None, group: str | None) -> Subject:
    given = [v for v in (serviceaccount, user, group) if v]
    if len(given) != 1:
        flags = ", ".join(grants.FLAGS.values())
        raise click.UsageError(f"name one identity to bind: one of {flags}")
    try:
        if serviceaccount:
            return grants.service_account(serviceaccount)
        return Subject(grants.USER, user) if user else Subject(grants.GROUP, str(group))
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None


@click.group(
    "manifests",
    epilog=example(
        "reconciler manifests crds | kubectl apply -f -",
        "reconciler manifests rbac --serviceaccount ops:bastion | kubectl apply -f -",
        "reconciler manifests rbac --user alice -n cache -n queue | kubectl apply -f -",
        "reconciler manifests leases -n ops --serviceaccount ops:bastion | kubectl apply -f -",
    ),
)
def group() -> None:
    """Print the manifests a cluster admin applies for reconciler: the CRDs,
    the ClusterRole and its binding to an identity, and the Lease Role.

    YAML on stdout, for `kubectl apply -f -`, from the installed package:
    no checkout needed. `reconciler check` prints these commands, for the
    identity it found, where a permission is missing.
    """


@group.command(
    grants.CRDS,
    epilog=example("reconciler manifests crds | kubectl apply -f -"),
)
def crds() -> None:
    """Print the Redis and Xca CustomResourceDefinitions of this release."""
    click.echo(made.crds(), nl=False)


@group.command(
    grants.RBAC,
    epilog=example(
        "reconciler manifests rbac --serviceaccount ops:bastion | kubectl apply -f -",
        "reconciler manifests rbac --group platform -n cache -n queue | kubectl apply -f -",
    ),
)
@_subject_options
@click.option(
    "-n",
    grants.NAMESPACE_FLAG,
    "namespaces",
    multiple=True,
    metavar="NS",
    help="Bind in this namespace only (repeatable): a RoleBinding to the ClusterRole"
    f" {ROLE} here, and the ClusterRole {made.CLUSTER_READS} (the cluster-scoped"
    " reads) bound cluster-wide. [default: every namespace, one ClusterRoleBinding]",
)
def rbac(namespaces: tuple[str, ...], **identity: str | None) -> None:
    """Print the ClusterRole a pass needs, and its binding to one identity."""
    click.echo(made.dump(made.rbac(_subject(**identity), namespaces)), nl=False)


@group.command(
    grants.LEASES,
    epilog=example(
        "reconciler manifests leases -n ops --serviceaccount ops:bastion | kubectl apply -f -",
        "reconciler manifests leases -n ops --user alice --shard | kubectl apply -f -",
    ),
)
@_subject_options
@click.option(
    "-n",
    grants.NAMESPACE_FLAG,
    "namespace",
    required=True,
    metavar="NS",
    help="The Lease namespace (the leader_election_namespace key).",
)
@click.option(
    grants.SHARD_FLAG,
    is_flag=True,
    default=False,
    help="The verbs of `run --shard`, not only those of `run --leader-elect`. [default: off]",
)
def leases(namespace: str, shard: bool, **identity: str | None) -> None:
    """Print the Role of the Leases that `run --leader-elect` or `--shard`
    holds in a namespace, and its binding to one identity."""
    click.echo(made.dump(made.leases(_subject(**identity), namespace, shard)), nl=False)
