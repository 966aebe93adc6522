"""May this identity make every request a pass makes, where it makes it?

`NEEDS` is the one table of what the code asks of the apiserver: the RBAC
manifests are tested against it (tests/unit/test_manifests.py), and
`reconciler check` asks a SelfSubjectAccessReview for each verb of it in
each namespace in scope, so a missing verb is a line before the first pass
rather than a 403 in the middle of one.
"""

from __future__ import annotations

from dataclasses import dataclass

from reconciler.checks import Check, failed, passed
from reconciler.checks.cluster import Identity
from reconciler.client.errors import KubeError, NotFound
from reconciler.client.kube import ACCESS_REVIEWS, LEASES, Kube
from reconciler.config import Config
from reconciler.kinds import xca
from reconciler.kinds.redis import identity as redis
from reconciler.run import lease_access

# (API group, resource) -> verbs. Each is a request the code makes: observe
# LISTs (and GETs namespaces in scope), apply patches (objects, their status,
# pod metadata), creates, deletes and GETs, events.py creates, GETs and
# patches. redis/finalizers is for blockOwnerDeletion.
NEEDS: dict[tuple[str, str], frozenset[str]] = {
    (redis.GROUP, redis.RESOURCE.plural): frozenset({"get", "list", "patch"}),
    (redis.GROUP, f"{redis.RESOURCE.plural}/status"): frozenset({"patch"}),
    (redis.GROUP, f"{redis.RESOURCE.plural}/finalizers"): frozenset({"update"}),
    (xca.GROUP, xca.RESOURCE.plural): frozenset({"get", "list", "patch"}),
    (xca.GROUP, f"{xca.RESOURCE.plural}/status"): frozenset({"patch"}),
    ("", "pods"): frozenset({"get", "list", "create", "delete", "patch"}),
    ("", "services"): frozenset({"get", "list", "create", "patch"}),
    ("", "pods/eviction"): frozenset({"create"}),
    ("policy", "poddisruptionbudgets"): frozenset({"get", "list", "create", "patch", "delete"}),
    ("", "persistentvolumeclaims"): frozenset({"get", "list", "create", "patch", "delete"}),
    ("storage.k8s.io", "storageclasses"): frozenset({"list"}),
    ("networking.k8s.io", "networkpolicies"): frozenset(
        {"get", "list", "create", "patch", "delete"}
    ),
    ("", "events"): frozenset({"create", "get", "patch"}),
    ("", "namespaces"): frozenset({"get", "list"}),
}
# Rules for some objects only: (group, resource) -> (verbs, names).
NAMED_NEEDS: dict[tuple[str, str], tuple[frozenset[str], frozenset[str]]] = {
    ("apiextensions.k8s.io", "customresourcedefinitions"): (
        frozenset({"get"}),
        frozenset({redis.RESOURCE.crd_name, xca.RESOURCE.crd_name}),
    ),
}
CLUSTER_SCOPED = frozenset({("storage.k8s.io", "storageclasses"), ("", "namespaces")})
# What a dry run does: it reads, and writes nothing, events neither.
READS = frozenset({"get", "list"})
ALL: frozenset[str] = frozenset().union(*NEEDS.values())
ROLE = "reconciler"  # the ClusterRole of config/rbac
ROLE_FIX = "kubectl apply -k config/rbac"
SERVICE_ACCOUNT = "system:serviceaccount:"


@dataclass(frozen=True)
class Ask:
    """One SelfSubjectAccessReview: may we ``verb`` this resource there?"""

    group: str
    resource: str
    verb: str
    namespace: str = ""
    name: str = ""

    @property
    def shown(self) -> str:
        group = f".{self.group}" if self.group else ""
        named = f" {self.name}" if self.name else ""
        return f"{self.verb} {self.resource}{group}{named}"


def asks(config: Config, namespace: str) -> list[Ask]:
    """Every request a pass makes in ``namespace`` ("": all of them), and the
    cluster-scoped ones when ``namespace`` is the first in scope."""
    wanted = READS if config.dry_run else ALL
    out: list[Ask] = []
    for (group, resource), verbs in NEEDS.items():
        where = "" if (group, resource) in CLUSTER_SCOPED else namespace
        out.extend(Ask(group, resource, v, where) for v in sorted(verbs & wanted))
    for (group, resource), (verbs, names) in NAMED_NEEDS.items():
        out.extend(Ask(group, resource, v, "", n) for v in sorted(verbs) for n in sorted(names))
    return out


def permissions(kube: Kube, config: Config, who: Identity | None) -> list[Check]:
    """A line for each namespace in scope: every request allowed, or the ones
    refused, with the binding that grants them."""
    checks = []
    asked: set[Ask] = set()
    for namespace in config.namespaces or ("",):
        todo = [a for a in asks(config, namespace) if a not in asked]
        asked.update(todo)
        refused = [a for a in todo if not _allowed(kube, a)]
        where = f"namespace {namespace}" if namespace else "all namespaces"
        name = f"permissions in {where}"
        if refused:
            shown = ", ".join(a.shown for a in refused)
            checks.append(failed(name, f"may not {shown}", grant(who)))
        else:
            checks.append(passed(name, f"may make each of the {len(todo)} requests of a pass"))
    return checks


def grant(who: Identity | None) -> str:
    """The command that grants the role to this identity."""
    if who is None or not who.user:
        return f"{ROLE_FIX}, then bind the ClusterRole {ROLE} to the identity the cluster sees"
    if who.user.startswith(SERVICE_ACCOUNT):
        namespace, _, name = who.user.removeprefix(SERVICE_ACCOUNT).partition(":")
        if (namespace, name) == ("reconciler-system", ROLE):
            return ROLE_FIX
        binding, subject = f"{namespace}-{name}", f"--serviceaccount={namespace}:{name}"
    else:
        binding, subject = who.user, f"--user={who.user}"
    return (
        f"{ROLE_FIX} && kubectl create clusterrolebinding {ROLE}-{_safe(binding)}"
        f" --clusterrole={ROLE} {subject}"
    )


def _safe(user: str) -> str:
    """A user name as a binding's name: lower case, [a-z0-9.-]."""
    out = "".join(c if c.isalnum() or c in ".-" else "-" for c in user.lower())
    return out.strip("-.")[:200] or "user"


def _allowed(kube: Kube, ask: Ask) -> bool:
    resource, _, sub = ask.resource.partition("/")
    attributes = {"group": ask.group, "resource": resource, "verb": ask.verb}
    optional = {"subresource": sub, "namespace": ask.namespace, "name": ask.name}
    return review(kube, {**attributes, **{k: v for k, v in optional.items() if v}})


def review(kube: Kube, attributes: dict[str, str]) -> bool:
    """A SelfSubjectAccessReview. One that cannot be sent answers no: a
    check that cannot ask must not pass (every authenticated user may ask,
    through system:basic-user)."""
    body = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attributes},
    }
    try:
        answer = kube.review(ACCESS_REVIEWS, body)
    except KubeError:
        return False
    return (answer.get("status") or {}).get("allowed") is True


def leases(kube: Kube, config: Config) -> Check | None:
    """With --leader-elect or --shard: the Lease namespace exists and every
    verb the Lease code uses is allowed there."""
    verbs: tuple[str, ...]
    if config.leader_elect:
        mode, verbs, fix = "--leader-elect", lease_access.LEADER_VERBS, lease_access.LEADER_GRANT
    elif config.shard:
        mode, verbs, fix = "--shard", lease_access.SHARD_VERBS, lease_access.SHARD_GRANT
    else:
        return None
    namespace = config.leader_election_namespace
    name = f"leases ({mode})"
    try:
        lease_access.dry_run_create(kube, namespace)
    except NotFound:
        return failed(
            name,
            f"the Lease namespace {namespace} does not exist",
            f"kubectl create namespace {namespace}, or set {lease_access.NAMESPACE_KEY}",
        )
    except KubeError:
        pass  # 409 (one exists), 403 and the rest: the reviews below say what is refused
    refused = [v for v in verbs if not _lease_allowed(kube, namespace, v)]
    if refused:
        shown = ", ".join(refused)
        return failed(name, f"may not {shown} leases in namespace {namespace}", fix)
    return passed(name, f"may {', '.join(verbs)} leases in namespace {namespace}")


def _lease_allowed(kube: Kube, namespace: str, verb: str) -> bool:
    attributes = {"group": LEASES.group, "resource": LEASES.plural, "verb": verb}
    return review(kube, {**attributes, "namespace": namespace})
