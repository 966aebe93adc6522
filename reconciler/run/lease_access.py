"""Before the daemon starts: may it hold Leases where it is told to?

Leader election and sharding keep every pass behind a Lease. Without the
Lease namespace, or without the verbs on Leases there, no pass ever runs:
a daemon that starts anyway looks healthy to systemd and to its probes while
it does nothing. So `reconciler run --leader-elect` and `--shard` ask first
and refuse to start, as controller-runtime refuses to start outside a
cluster without a leader-election namespace.

Two questions, both without side effects: a server-side dry-run create of
a Lease (refused with 404 when the namespace does not exist), and a
SelfSubjectAccessReview for each verb the Lease code uses.
"""

from __future__ import annotations

from collections.abc import Iterable

from reconciler.client.errors import ApiError, Forbidden, KubeError, NotFound
from reconciler.client.interface import Client
from reconciler.client.kube import ACCESS_REVIEWS, LEASES
from reconciler.run.lease import Lease

# What each mode does with Leases (reconciler/run/leader.py, shard.py), and
# where to find the command that grants it: `check` knows the identity the
# cluster sees and binds it (`reconciler manifests leases`).
LEADER_VERBS = ("get", "create", "update")
LEADER_GRANT = "reconciler check --leader-elect prints the command, for this identity"
SHARD_VERBS = ("get", "list", "create", "update", "delete")
SHARD_GRANT = "reconciler check --shard prints the command, for this identity"
NAMESPACE_KEY = "--leader-election-namespace (config key leader_election_namespace)"
PROBE_NAME = "reconciler-lease-access-check"


class LeaseAccessError(Exception):
    """This process cannot hold Leases where its settings say; one line."""


def check(kube: Client, namespace: str, verbs: Iterable[str], mode: str, grant: str) -> None:
    """Raise LeaseAccessError naming the namespace and the setting, or the
    verbs refused; return when the Leases can be held. An unreachable
    apiserver is not this check's business: the daemon reports it per pass."""
    try:
        dry_run_create(kube, namespace)
    except ApiError as exc:
        if isinstance(exc, NotFound):
            raise LeaseAccessError(
                f"{mode}: the Lease namespace {namespace} does not exist: create it "
                f"(kubectl create namespace {namespace}) or set {NAMESPACE_KEY}"
            ) from None
        if not isinstance(exc, Forbidden):
            return  # 409 (it exists) and the rest: the create itself was allowed
    except KubeError:
        return
    refused = [verb for verb in verbs if not _allowed(kube, namespace, verb)]
    if refused:
        raise LeaseAccessError(
            f"{mode}: may not {', '.join(refused)} leases.coordination.k8s.io in namespace "
            f"{namespace}: grant them ({grant}) or set {NAMESPACE_KEY}"
        )


def dry_run_create(kube: Client, namespace: str) -> None:
    kube.create(LEASES, namespace, Lease(name=PROBE_NAME).encode(namespace), dry_run=True)


def _allowed(kube: Client, namespace: str, verb: str) -> bool:
    """A SelfSubjectAccessReview; a review we may not send counts as allowed
    (the Lease requests themselves will say what is refused)."""
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {
            "resourceAttributes": {
                "group": LEASES.group,
                "resource": LEASES.plural,
                "verb": verb,
                "namespace": namespace,
            }
        },
    }
    try:
        answer = kube.review(ACCESS_REVIEWS, review)
    except KubeError:
        return True
    return bool((answer.get("status") or {}).get("allowed", True))
