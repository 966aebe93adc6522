"""Who a binding names, what the binding is called, and the command that
makes it: the one place `reconciler check`'s fix lines and `reconciler
manifests` agree on.

A fix line is a command a cluster admin pastes from any directory: it asks
the installed binary for the manifests (`reconciler manifests …`) rather
than a checkout for its files, and it binds the identity `check` found, not
the shipped ServiceAccount.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from dataclasses import dataclass

RBAC_GROUP = "rbac.authorization.k8s.io"
# How the apiserver names a ServiceAccount's user: system:serviceaccount:NS:NAME.
SERVICE_ACCOUNT_USER = "system:serviceaccount:"
SERVICE_ACCOUNT, USER, GROUP = "ServiceAccount", "User", "Group"
# The option of `reconciler manifests` that names each kind of subject.
FLAGS = {SERVICE_ACCOUNT: "--serviceaccount", USER: "--user", GROUP: "--group"}
_TAGS = {SERVICE_ACCOUNT: "sa", USER: "user", GROUP: "group"}

# The command and its parts, as `reconciler/cli/manifests.py` declares them.
PROGRAM = "reconciler manifests"
CRDS, RBAC, LEASES = "crds", "rbac", "leases"
NAMESPACE_FLAG = "--namespace"
SHARD_FLAG = "--shard"
APPLY = "kubectl apply -f -"
# Said after each fix that writes RBAC or CRDs. A shell comment, so the line
# still pastes as it is (bash and sh read it as one).
AS_ADMIN = "  # as a cluster admin"


@dataclass(frozen=True)
class Subject:
    """One subject of a binding: a ServiceAccount (with its namespace), a
    user or a group, as RBAC names it."""

    kind: str
    name: str
    namespace: str = ""

    def __post_init__(self) -> None:
        if self.kind not in FLAGS or not self.name:
            raise ValueError(f"not a subject: {self.kind} {self.name!r}")
        if (self.kind == SERVICE_ACCOUNT) != bool(self.namespace):
            raise ValueError("a ServiceAccount, and only one, has a namespace")

    @property
    def flag(self) -> str:
        """The option that names it, quoted for a shell."""
        value = f"{self.namespace}:{self.name}" if self.namespace else self.name
        return f"{FLAGS[self.kind]} {shlex.quote(value)}"

    def rbac(self) -> dict[str, str]:
        """As a binding's ``subjects`` entry."""
        if self.kind == SERVICE_ACCOUNT:
            return {"kind": self.kind, "name": self.name, "namespace": self.namespace}
        return {"kind": self.kind, "apiGroup": RBAC_GROUP, "name": self.name}


# The identity the shipped manifests (config/rbac) bind: its bindings keep
# the names they had, so the printed ones replace them rather than add to them.
SHIPPED = Subject(SERVICE_ACCOUNT, "reconciler", "reconciler-system")


def service_account(value: str) -> Subject:
    """NS:NAME, as kubectl's --serviceaccount takes it."""
    namespace, _, name = value.partition(":")
    if not namespace or not name:
        raise ValueError(f"a ServiceAccount is NAMESPACE:NAME, not {value!r}")
    return Subject(SERVICE_ACCOUNT, name, namespace)


def subject_of(user: str) -> Subject:
    """The subject a binding names for the user the cluster says we are."""
    if user.startswith(SERVICE_ACCOUNT_USER):
        return service_account(user.removeprefix(SERVICE_ACCOUNT_USER))
    return Subject(USER, user)


_UNSAFE = re.compile(r"[^a-z0-9.:-]+")
_LONGEST = 253  # as other objects' names: kubectl and the audit log show it whole


def binding_name(role: str, subject: Subject) -> str:
    """The name of the binding of ``role`` to ``subject``: the role, the kind
    and the subject, lower case in [a-z0-9.:-]. A name that had to be changed
    or cut to fit gets a hash of the exact subject, so two subjects never share one
    binding (one applied after the other would take it over)."""
    if subject == SHIPPED:
        return role
    who = f"{subject.namespace}:{subject.name}" if subject.namespace else subject.name
    wanted = f"{role}:{_TAGS[subject.kind]}:{who}"
    safe = _UNSAFE.sub("-", wanted.lower())
    if safe != wanted or len(safe) > _LONGEST:
        digest = hashlib.sha256(wanted.encode()).hexdigest()[:8]
        safe = f"{safe[:200]}-{digest}"
    return safe


def _applied(*words: str) -> str:
    return f"{' '.join((PROGRAM, *words))} | {APPLY}{AS_ADMIN}"


def crds_fix() -> str:
    return _applied(CRDS)


def rbac_fix(subject: Subject, namespaces: tuple[str, ...] = ()) -> str:
    """The ClusterRole bound to ``subject`` everywhere, or (``namespaces``)
    in those namespaces only, with the cluster-scoped reads."""
    scoped = [f"{NAMESPACE_FLAG} {shlex.quote(ns)}" for ns in namespaces]
    return _applied(RBAC, subject.flag, *scoped)


def leases_fix(subject: Subject, namespace: str, shard: bool, create: bool = False) -> str:
    """The Lease Role in ``namespace`` bound to ``subject``; ``create``:
    the namespace first."""
    words = [LEASES, f"{NAMESPACE_FLAG} {shlex.quote(namespace)}", subject.flag]
    command = _applied(*words, *([SHARD_FLAG] if shard else []))
    return f"kubectl create namespace {shlex.quote(namespace)} && {command}" if create else command
