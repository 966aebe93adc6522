"""`reconciler manifests`: each fix line `check` prints is a command this
CLI takes, and what it prints binds the identity the fix names."""

from __future__ import annotations

import shlex
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from reconciler.checks.access import grant
from reconciler.checks.cluster import Identity
from reconciler.checks.grants import APPLY, AS_ADMIN, PROGRAM, leases_fix, subject_of
from reconciler.cli import cli


def run(line: str) -> list[dict[str, Any]]:
    """The `reconciler manifests …` of a fix line, run; its objects."""
    assert line.endswith(f" | {APPLY}{AS_ADMIN}"), line
    command = line.split(" && ")[-1].removesuffix(f" | {APPLY}{AS_ADMIN}")
    assert command.startswith(f"{PROGRAM} "), line
    result = CliRunner().invoke(cli, shlex.split(command)[1:])
    assert result.exit_code == 0, result.output
    return [d for d in yaml.safe_load_all(result.output) if d]


USERS = ["system:serviceaccount:ops:bastion", "alice", "arn:aws:sts::1:assumed-role/B/i-0 x"]


@pytest.mark.parametrize("user", USERS)
@pytest.mark.parametrize("namespaces", [(), ("cache",)])
def test_a_permissions_fix_binds_the_identity_check_saw(user: str, namespaces: tuple[str, ...]):
    objects = run(grant(Identity(user, ()), namespaces))
    subject = subject_of(user).rbac()
    bindings = [o for o in objects if o["kind"].endswith("Binding")]
    assert bindings and all(b["subjects"] == [subject] for b in bindings)
    scoped = {b["metadata"]["namespace"] for b in bindings if b["kind"] == "RoleBinding"}
    assert scoped == set(namespaces)


@pytest.mark.parametrize("user", USERS)
@pytest.mark.parametrize("shard", [False, True])
def test_a_lease_fix_binds_the_identity_in_the_lease_namespace(user: str, shard: bool):
    line = leases_fix(subject_of(user), "ops", shard, create=True)
    assert line.startswith("kubectl create namespace ops && ")
    role, binding = run(line)
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "ops"
    assert ("delete" in role["rules"][0]["verbs"]) == shard
    assert binding["subjects"] == [subject_of(user).rbac()]


@pytest.mark.parametrize(
    "args",
    [
        ["rbac"],
        ["rbac", "--user", "a", "--group", "b"],
        ["rbac", "--serviceaccount", "nocolon"],
        ["leases", "--user", "a"],
    ],
)
def test_one_identity_must_be_named(args: list[str]):
    result = CliRunner().invoke(cli, ["manifests", *args])
    assert result.exit_code == 2, result.output


def test_crds_print_both_kinds():
    result = CliRunner().invoke(cli, ["manifests", "crds"])
    kinds = {d["spec"]["names"]["kind"] for d in yaml.safe_load_all(result.output) if d}
    assert kinds == {"Redis", "Xca"}
