"""May this identity make every request a pass makes, where it makes it?

`needed()` is what the code asks of the apiserver, derived from the
registered kinds (checks/needs.py): `reconciler manifests` makes the
ClusterRole of it (checks/manifests.py, which the shipped config/rbac
equals), and `reconciler check` asks a SelfSubjectAccessReview for each verb
of it in each namespace in scope, so a missing verb is a line before the
first pass rather than a 403 in the middle of one. Each refusal's fix binds
the identity the cluster saw (grants.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from reconciler.checks import Check, failed, passed
from reconciler.checks.cluster import Identity
from reconciler.checks.grants import (
    APPLY,
    FLAGS,
    GROUP,
    PROGRAM,
    RBAC,
    SERVICE_ACCOUNT,
    USER,
    Subject,
    leases_fix,
    rbac_fix,
    subject_of,
)
from reconciler.checks.needs import READ, Needs, needs
from reconciler.client.errors import KubeError, NotFound
from reconciler.client.kube import ACCESS_REVIEWS, LEASES, Kube
from reconciler.config import Config
from reconciler.kinds import registry
from reconciler.model import NAMESPACES
from reconciler.run import lease_access

ROLE = "reconciler"  # the ClusterRole of config/rbac


def needed() -> Needs:
    """What a pass over the registered kinds asks of the apiserver."""
    return needs(registry.KINDS)


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
    cluster-scoped ones: with -n, only the reads such a pass makes (its own
    namespace's GET among them)."""
    found = needed()
    # A dry run reads, and writes nothing, events neither.
    wanted = READ if config.dry_run else found.every_verb
    out: list[Ask] = []
    for (group, resource), verbs in found.plain.items():
        if (group, resource) not in found.cluster_scoped:
            out.extend(Ask(group, resource, v, namespace) for v in sorted(verbs & wanted))
        elif not namespace:
            out.extend(Ask(group, resource, v) for v in sorted(verbs & wanted))
        else:
            scoped = found.cluster_scoped[(group, resource)] & wanted
            named = namespace if (group, resource) == (NAMESPACES.group, NAMESPACES.plural) else ""
            out.extend(Ask(group, resource, v, "", named) for v in sorted(scoped))
    for (group, resource), (verbs, names) in found.named.items():
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
            fix = grant(who, (namespace,) if namespace else ())
            checks.append(failed(name, f"may not {shown}", fix))
        else:
            checks.append(passed(name, f"may make each of the {len(todo)} requests of a pass"))
    return checks


def grant(who: Identity | None, namespaces: tuple[str, ...] = ()) -> str:
    """The command that grants the role to this identity: everywhere, or in
    ``namespaces`` only (with the cluster-scoped reads)."""
    subject = _subject(who)
    if subject is None:
        user, others = FLAGS[USER], (FLAGS[SERVICE_ACCOUNT], FLAGS[GROUP])
        return (
            "bind the identity of the kubeconfig (the cluster did not say it), as a cluster"
            f" admin: {PROGRAM} {RBAC} {user} USER (or {others[0]} NS:NAME, or {others[1]}"
            f" GROUP) | {APPLY}"
        )
    return rbac_fix(subject, namespaces)


def _subject(who: Identity | None) -> Subject | None:
    return subject_of(who.user) if who is not None and who.user else None


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


def leases(kube: Kube, config: Config, who: Identity | None = None) -> Check | None:
    """With --leader-elect or --shard: the Lease namespace exists and every
    verb the Lease code uses is allowed there; the fix makes the namespace
    if it is missing, and binds the Lease Role to ``who``."""
    verbs: tuple[str, ...]
    if config.leader_elect:
        mode, verbs = "--leader-elect", lease_access.LEADER_VERBS
    elif config.shard:
        mode, verbs = "--shard", lease_access.SHARD_VERBS
    else:
        return None
    namespace = config.leader_election_namespace
    name = f"leases ({mode})"
    missing = _lease_namespace_missing(kube, namespace)
    refused = [v for v in verbs if not _lease_allowed(kube, namespace, v)]
    subject = _subject(who)
    fix = leases_fix(subject, namespace, bool(config.shard), missing) if subject else grant(who)
    if missing:
        detail = f"the Lease namespace {namespace} does not exist"
        return failed(name, f"{detail} (or set {lease_access.NAMESPACE_KEY})", fix)
    if refused:
        shown = ", ".join(refused)
        return failed(name, f"may not {shown} leases in namespace {namespace}", fix)
    return passed(name, f"may {', '.join(verbs)} leases in namespace {namespace}")


def _lease_namespace_missing(kube: Kube, namespace: str) -> bool:
    """A dry-run create of a Lease says 404 for a missing namespace, but only
    to an identity allowed to create one (authorization comes first): to any
    other, a GET of the namespace says it, when the identity may read it."""
    try:
        lease_access.dry_run_create(kube, namespace)
        return False
    except NotFound:
        return True
    except KubeError:
        pass  # 409 (one exists), 403 and the rest
    try:
        kube.get(NAMESPACES, "", namespace)
    except NotFound:
        return True
    except KubeError:
        pass  # refused too: the fix binds, and a missing namespace then says so
    return False


def _lease_allowed(kube: Kube, namespace: str, verb: str) -> bool:
    attributes = {"group": LEASES.group, "resource": LEASES.plural, "verb": verb}
    return review(kube, {**attributes, "namespace": namespace})
