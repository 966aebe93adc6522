"""Every fix `reconciler check` prints works when pasted: a ServiceAccount
missing one permission at a time runs `check`, a cluster admin runs each
fix line as it is, in a shell, from a directory that is not the checkout,
and the same `check` then passes. And a namespace-scoped install: an
identity bound by `reconciler manifests rbac … -n a` passes `check -n a`,
converges a Redis in `a`, and is refused in `b`, where `check` says so.

One ServiceAccount for the module; each case unbinds it and binds what the
case starts from."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.checks import manifests
from reconciler.checks.grants import service_account

from .conftest import Kubectl, Reconciler, kubeconfig_for, wait_for
from .test_redis import redis_yaml

pytestmark = pytest.mark.e2e

ACCOUNT = "bastion"
# RBAC is read from the apiserver's informers: a new or deleted binding takes
# effect a moment after the write returns.
SETTLE = 15.0


class Bastion:
    """The ServiceAccount, its kubeconfig, and what was bound to it."""

    def __init__(self, kubectl: Kubectl, reconciler: Reconciler, home: Path) -> None:
        self.kubectl, self.admin = kubectl, reconciler
        self.ns = f"e2e-fixes-{uuid.uuid4().hex[:6]}"
        self.home = home
        self.roles: list[str] = []
        self.namespaces: list[str] = []
        kubectl.run("create", "namespace", self.ns)
        kubectl.run("create", "serviceaccount", ACCOUNT, "-n", self.ns)
        token = kubectl.run(
            "create", "token", ACCOUNT, "-n", self.ns, "--duration=30m"
        ).stdout.strip()
        self.config = kubeconfig_for(kubectl, home / "kubeconfig", {"token": token})
        self.reconciler = Reconciler(self.config)

    @property
    def user(self) -> str:
        return f"system:serviceaccount:{self.ns}:{ACCOUNT}"

    def unbind(self) -> None:
        """Delete every binding naming the ServiceAccount, wherever it is."""
        subject = {"kind": "ServiceAccount", "name": ACCOUNT, "namespace": self.ns}
        for kind, scope in (("clusterrolebindings", ()), ("rolebindings", ("-A",))):
            for b in self.kubectl.json("get", kind, *scope)["items"]:
                if subject in (b.get("subjects") or []):
                    where = b["metadata"].get("namespace")
                    self.kubectl.run(
                        "delete", kind, b["metadata"]["name"], *(["-n", where] if where else [])
                    )

    def bind_without(self, resource: str) -> None:
        """The ClusterRole `manifests` prints less one resource's rule, bound."""
        role = manifests.rbac(service_account(f"{self.ns}:{ACCOUNT}"))[0]
        name = f"e2e-fixes-{uuid.uuid4().hex[:6]}"
        role["metadata"] = {"name": name}
        kept = [r for r in role["rules"] if resource not in r["resources"]]
        assert len(kept) == len(role["rules"]) - 1, resource
        role["rules"] = kept
        self.kubectl.apply(yaml.safe_dump(role))
        self.roles.append(name)
        self.kubectl.run(
            "create", "clusterrolebinding", name, f"--clusterrole={name}",
            f"--serviceaccount={self.ns}:{ACCOUNT}",
        )  # fmt: skip

    def check(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.reconciler.cli("check", *args, expect=None)

    def paste(self, line: str, where: Path) -> None:
        paste(self.kubectl, line, where)

    def close(self) -> None:
        self.unbind()
        for name in self.roles:
            self.kubectl.run("delete", "clusterrole", name, check=False)
        # No Redis lives in these (the one case that makes one uses `ns`):
        # nothing of ours holds them, the namespace controller empties them.
        for name in [*self.namespaces, self.ns]:
            self.kubectl.run("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture(scope="module")
def bastion(
    kubectl: Kubectl, reconciler: Reconciler, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Bastion]:
    account = Bastion(kubectl, reconciler, tmp_path_factory.mktemp("bastion"))
    yield account
    account.close()


def paste(admin: Kubectl, line: str, where: Path) -> None:
    """A fix line, as a cluster admin pastes it into a shell in ``where``
    (not a checkout), with `reconciler` and `kubectl` on PATH."""
    bin_dir = str(Path(sys.executable).parent)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "KUBECONFIG": str(admin.kubeconfig),
    }
    proc = subprocess.run(
        ["bash", "-c", line], cwd=where, env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, f"{line}\n{proc.stdout}\n{proc.stderr}"


def fixes(output: str) -> list[str]:
    """The fix line of each failed check, as printed."""
    lines = output.splitlines()
    return [
        after.removeprefix("    fix: ")
        for line, after in itertools.pairwise(lines)
        if line.startswith("✗ ") and after.startswith("    fix: ")
    ]


def fails(bastion: Bastion, *args: str) -> subprocess.CompletedProcess[str]:
    """`check` once the bindings of the case have taken effect: exit 1."""
    return wait_for(
        lambda: (proc := bastion.check(*args)).returncode == 1 and proc,
        what=f"check {' '.join(args)} to fail",
        timeout=SETTLE,
    )


def paste_fixes_and_pass(bastion: Bastion, tmp_path: Path, *args: str) -> list[str]:
    """Run every fix line of a failing `check` as it is, then the same
    `check` passes; the lines, for the case to look at."""
    before = fails(bastion, *args)
    printed = fixes(before.stdout)
    refused = [line for line in before.stdout.splitlines() if line.startswith("✗ ")]
    assert printed and len(printed) == len(refused), before.stdout  # a fix under each ✗
    lines = list(dict.fromkeys(printed))  # a line printed twice is pasted once
    for line in lines:
        assert line.endswith("  # as a cluster admin"), line
        bastion.paste(line, tmp_path)

    def passes() -> Any:
        proc = bastion.check(*args)
        return proc.returncode == 0 or proc.stdout

    wait_for(passes, what=f"check {' '.join(args)} to pass", timeout=SETTLE)
    return lines


@pytest.mark.parametrize("scope", ["all", "namespace"])
def test_with_no_binding_at_all_the_fix_binds_what_check_found(
    bastion: Bastion, tmp_path: Path, scope: str
):
    bastion.unbind()
    args = ("-A",) if scope == "all" else ("-n", bastion.ns)
    before = fails(bastion, *args)
    assert f"✓ identity: user {bastion.user}," in before.stdout
    (line,) = paste_fixes_and_pass(bastion, tmp_path, *args)
    assert f"--serviceaccount {bastion.ns}:{ACCOUNT}" in line
    assert (f"--namespace {bastion.ns}" in line) == (scope == "namespace")


@pytest.mark.parametrize(
    "resource",
    [
        "pods",
        "services",
        "poddisruptionbudgets",
        "persistentvolumeclaims",
        "networkpolicies",
        "storageclasses",
    ],
)
def test_a_role_missing_one_kind_is_fixed_by_the_line_check_prints(
    bastion: Bastion, tmp_path: Path, resource: str
):
    bastion.unbind()
    bastion.bind_without(resource)
    before = fails(bastion, "-A")
    (refused,) = [line for line in before.stdout.splitlines() if line.startswith("✗ ")]
    assert refused.startswith("✗ permissions in all namespaces: may not ")
    assert f" {resource}" in refused
    paste_fixes_and_pass(bastion, tmp_path, "-A")


def test_leases_for_the_leader_then_for_shards(bastion: Bastion, tmp_path: Path):
    bastion.unbind()
    bastion.paste(
        f"reconciler manifests rbac --serviceaccount {bastion.ns}:{ACCOUNT} | kubectl apply -f -",
        tmp_path,
    )
    leases = ("--leader-election-namespace", bastion.ns)
    (leader,) = paste_fixes_and_pass(bastion, tmp_path, "-A", "--leader-elect", *leases)
    assert leader.startswith(f"reconciler manifests leases --namespace {bastion.ns} ")
    (shard,) = paste_fixes_and_pass(bastion, tmp_path, "-A", "--shard", *leases)
    assert " --shard |" in shard


def test_a_lease_namespace_that_does_not_exist_is_made_then_bound(bastion: Bastion, tmp_path: Path):
    bastion.unbind()
    bastion.paste(
        f"reconciler manifests rbac --serviceaccount {bastion.ns}:{ACCOUNT} | kubectl apply -f -",
        tmp_path,
    )
    absent = f"e2e-leases-{uuid.uuid4().hex[:6]}"
    bastion.namespaces.append(absent)
    args = ("-A", "--leader-elect", "--leader-election-namespace", absent)
    before = fails(bastion, *args)
    assert f"✗ leases (--leader-elect): the Lease namespace {absent} does not exist" in (
        before.stdout
    )
    (line,) = paste_fixes_and_pass(bastion, tmp_path, *args)
    assert line.startswith(f"kubectl create namespace {absent} && reconciler manifests leases")


def test_a_namespace_scoped_install_serves_its_namespace_and_is_refused_in_another(
    bastion: Bastion, kubectl: Kubectl, tmp_path: Path, ns: str
):
    bastion.unbind()
    other = f"e2e-other-{uuid.uuid4().hex[:6]}"
    kubectl.run("create", "namespace", other)
    bastion.namespaces.append(other)
    bastion.paste(
        f"reconciler manifests rbac --serviceaccount {bastion.ns}:{ACCOUNT} --namespace {ns}"
        " | kubectl apply -f -",
        tmp_path,
    )
    wait_for(lambda: bastion.check("-n", ns).returncode == 0, what="check -n a", timeout=SETTLE)
    kubectl.apply(redis_yaml(ns, num=2))
    converged = bastion.reconciler.converge(ns)
    assert converged[0].summary["actions"]["Pod/create/ok"] == 2
    pods = kubectl.json("get", "pods", "-n", ns)["items"]
    assert sorted(p["metadata"]["name"] for p in pods) == ["redis-sample-0", "redis-sample-1"]

    refused = bastion.check("-n", other)
    assert refused.returncode == 1, refused.stdout
    (line,) = [line for line in refused.stdout.splitlines() if line.startswith("✗ ")]
    assert line.startswith(f"✗ permissions in namespace {other}: may not get redis.")
    (fix,) = fixes(refused.stdout)
    assert f"--namespace {other} |" in fix
    assert bastion.reconciler.sync(other, expect=None).code != 0
