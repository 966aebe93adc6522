"""What `reconciler check` asks the apiserver, and the command it gives
for a refusal."""

from __future__ import annotations

import pytest

from reconciler.checks.access import NEEDS, READS, asks, grant
from reconciler.checks.cluster import Identity
from reconciler.config import Config


def test_every_verb_of_every_need_is_asked_where_the_pass_makes_it():
    asked = asks(Config(namespaces=("cache",)), "cache")
    for (group, resource), verbs in NEEDS.items():
        for verb in verbs:
            (one,) = [a for a in asked if (a.group, a.resource, a.verb) == (group, resource, verb)]
            scoped = resource not in ("namespaces", "storageclasses")
            assert one.namespace == ("cache" if scoped else ""), one
    named = [a for a in asked if a.name]
    assert {a.name for a in named} == {
        "redis.myapp.demo.kubebuilder.io",
        "xcas.apps.xca.k8s.kb.cx",
    }
    assert len(asked) == len(set(asked))


def test_all_namespaces_are_asked_as_the_empty_namespace():
    assert {a.namespace for a in asks(Config(), "")} == {""}


def test_a_dry_run_is_asked_only_what_it_reads():
    asked = asks(Config(dry_run=True), "")
    assert {a.verb for a in asked} == READS
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
    ("user", "fix"),
    [
        ("system:serviceaccount:reconciler-system:reconciler", "kubectl apply -k config/rbac"),
        (
            "system:serviceaccount:ops:bastion",
            "kubectl apply -k config/rbac && kubectl create clusterrolebinding"
            " reconciler-ops-bastion --clusterrole=reconciler --serviceaccount=ops:bastion",
        ),
        (
            "arn:aws:sts::111122223333:assumed-role/Bastion/i-0abc",
            "kubectl apply -k config/rbac && kubectl create clusterrolebinding"
            " reconciler-arn-aws-sts--111122223333-assumed-role-bastion-i-0abc"
            " --clusterrole=reconciler"
            " --user=arn:aws:sts::111122223333:assumed-role/Bastion/i-0abc",
        ),
    ],
)
def test_the_fix_binds_the_role_to_the_identity_the_cluster_saw(user: str, fix: str):
    assert grant(Identity(user, ())) == fix


def test_without_an_identity_the_fix_says_what_to_bind():
    assert "bind the ClusterRole reconciler" in grant(None)
    assert "bind the ClusterRole reconciler" in grant(Identity("", ()))


def test_the_shard_fix_grants_the_verbs_config_daemon_sharded_gives():
    """The fix line is a command a user can paste: the same verbs as the
    in-cluster overlay's Role, which are the ones the shard code uses."""
    import json
    import re
    from pathlib import Path

    import yaml

    from reconciler.run import lease_access

    root = Path(__file__).resolve().parents[3]
    overlay = yaml.safe_load(
        (root / "config" / "daemon-sharded" / "kustomization.yaml").read_text()
    )
    (patch,) = [p for p in overlay["patches"] if p["target"]["kind"] == "Role"]
    (op,) = yaml.safe_load(patch["patch"])
    found = re.search(r"-p '(\[.*\])'$", lease_access.SHARD_GRANT)
    assert found is not None and lease_access.SHARD_GRANT.startswith(lease_access.LEADER_GRANT)
    (granted,) = json.loads(found.group(1))
    assert granted["value"] == op["value"] == list(lease_access.SHARD_VERBS)
    assert granted["path"] == op["path"]
