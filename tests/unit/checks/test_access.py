"""What `reconciler check` asks the apiserver, and the command it gives
for a refusal."""

from __future__ import annotations

from typing import Any, cast

import pytest

from reconciler.checks.access import asks, grant, leases, needed
from reconciler.checks.cluster import Identity
from reconciler.checks.grants import AS_ADMIN
from reconciler.checks.needs import READ
from reconciler.client.errors import ApiError
from reconciler.client.kube import Kube
from reconciler.config import Config


def test_every_verb_of_every_need_is_asked_where_the_pass_makes_it():
    asked, found = asks(Config(namespaces=("cache",)), "cache"), needed()
    for (group, resource), verbs in found.plain.items():
        scoped = (group, resource) not in found.cluster_scoped
        for verb in verbs if scoped else found.cluster_scoped[(group, resource)]:
            (one,) = [a for a in asked if (a.group, a.resource, a.verb) == (group, resource, verb)]
            assert one.namespace == ("cache" if scoped else ""), one
    named = [a for a in asked if a.name and a.resource != "namespaces"]
    assert {a.name for a in named} == {
        "redis.myapp.demo.kubebuilder.io",
        "xcas.apps.xca.k8s.kb.cx",
    }
    assert len(asked) == len(set(asked))


def test_all_namespaces_are_asked_as_the_empty_namespace():
    assert {a.namespace for a in asks(Config(), "")} == {""}


def test_a_dry_run_is_asked_only_what_it_reads():
    asked = asks(Config(dry_run=True), "")
    assert {a.verb for a in asked} == READ
    assert ("", "pods/eviction") not in {(a.group, a.resource) for a in asked}
    assert ("", "pods", "list") in {(a.group, a.resource, a.verb) for a in asked}


def test_an_ask_shows_its_verb_resource_group_and_name():
    (one,) = [
        a
        for a in asks(Config(), "")
        if a.resource == "customresourcedefinitions" and a.name.startswith("redis")
    ]
    assert one.shown == (
        "get customresourcedefinitions.apiextensions.k8s.io redis.myapp.demo.kubebuilder.io"
    )


@pytest.mark.parametrize(
    ("user", "namespaces", "fix"),
    [
        (
            "system:serviceaccount:reconciler-system:reconciler",
            (),
            "reconciler manifests rbac --serviceaccount reconciler-system:reconciler",
        ),
        (
            "system:serviceaccount:ops:bastion",
            ("cache",),
            "reconciler manifests rbac --serviceaccount ops:bastion --namespace cache",
        ),
        (
            "arn:aws:sts::111122223333:assumed-role/Bastion/i-0abc",
            (),
            "reconciler manifests rbac"
            " --user arn:aws:sts::111122223333:assumed-role/Bastion/i-0abc",
        ),
        ("O'Brien", (), "reconciler manifests rbac --user 'O'\"'\"'Brien'"),
    ],
)
def test_the_fix_binds_the_role_to_the_identity_the_cluster_saw(
    user: str, namespaces: tuple[str, ...], fix: str
):
    assert grant(Identity(user, ()), namespaces) == f"{fix} | kubectl apply -f -{AS_ADMIN}"


def test_without_an_identity_the_fix_says_what_to_name():
    for who in (None, Identity("", ())):
        assert "reconciler manifests rbac --user USER" in grant(who)


def test_with_namespaces_only_the_reads_a_scoped_pass_makes_are_asked_cluster_wide():
    asked = asks(Config(namespaces=("cache",)), "cache")
    cluster_wide = {(a.resource, a.verb, a.name) for a in asked if not a.namespace}
    assert cluster_wide == {
        ("storageclasses", "list", ""),
        ("namespaces", "get", "cache"),
        ("customresourcedefinitions", "get", "redis.myapp.demo.kubebuilder.io"),
        ("customresourcedefinitions", "get", "xcas.apps.xca.k8s.kb.cx"),
    }
    assert ("namespaces", "list") in {(a.resource, a.verb) for a in asks(Config(), "")}


class LeaseCluster:
    """Answers the lease check's questions: whether the namespace exists,
    and which Lease verbs (and namespace reads) the identity is allowed."""

    def __init__(self, exists: bool, allowed: set[str], reads_namespaces: bool = True) -> None:
        self.exists, self.allowed, self.reads_namespaces = exists, allowed, reads_namespaces

    def create(self, res: Any, namespace: str, body: Any, *, dry_run: bool = False) -> Any:
        if "create" not in self.allowed:
            raise ApiError(403, "Forbidden", "forbidden")
        if not self.exists:
            raise ApiError(404, "NotFound", "namespace not found")
        return body

    def get(self, res: Any, namespace: str, name: str) -> Any:
        if not self.reads_namespaces:
            raise ApiError(403, "Forbidden", "forbidden")
        if not self.exists:
            raise ApiError(404, "NotFound", "not found")
        return {}

    def review(self, res: Any, body: Any) -> Any:
        verb = body["spec"]["resourceAttributes"]["verb"]
        return {"status": {"allowed": verb in self.allowed}}


BASTION = Identity("system:serviceaccount:ops:bastion", ())
LEASE_FIX = (
    "reconciler manifests leases --namespace ops --serviceaccount ops:bastion"
    f" | kubectl apply -f -{AS_ADMIN}"
)
CREATE_THEN = "kubectl create namespace ops && "


@pytest.mark.parametrize(
    ("cluster", "fix"),
    [
        # Allowed to create: the dry run's 404 says the namespace is missing.
        (
            LeaseCluster(False, {"get", "create", "update"}),
            CREATE_THEN + LEASE_FIX,
        ),
        # Refused: the dry run's 403 says nothing; the namespace's GET does.
        (LeaseCluster(False, set()), CREATE_THEN + LEASE_FIX),
        (LeaseCluster(True, {"get"}), LEASE_FIX),
        # Cannot tell: bind, and the apply says so if the namespace is missing.
        (LeaseCluster(False, set(), reads_namespaces=False), LEASE_FIX),
    ],
)
def test_the_lease_fix_makes_a_missing_namespace_then_binds(cluster: LeaseCluster, fix: str):
    config = Config(leader_elect=True, leader_election_namespace="ops")
    check = leases(cast(Kube, cluster), config, BASTION)
    assert check is not None and not check.ok
    assert check.fix == fix


def test_leases_allowed_pass():
    config = Config(shard=True, leader_election_namespace="ops")
    allowed = {"get", "list", "create", "update", "delete"}
    check = leases(cast(Kube, LeaseCluster(True, allowed)), config, BASTION)
    assert check is not None and check.ok, check
