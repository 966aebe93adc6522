"""`reconciler check` against the local apiserver, as a user on a bastion
runs it before the first pass: with the admin's credentials, with a
ServiceAccount whose role lacks one verb, with the Lease namespace missing,
against a port nothing listens on, and over two contexts, one of them down."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.checks.cluster import RENEW

from .conftest import Identities, Kubectl, Reconciler, free_port, kubeconfig_for
from .test_bastion import exec_plugin, exec_user

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def checks(proc: Any) -> list[dict[str, Any]]:
    doc = json.loads(proc.stdout)
    return [*doc["host"], *doc.get("cluster", [])]


def failing(proc: Any) -> list[str]:
    return [f"{c['name']}: {c['detail']} | {c['fix']}" for c in checks(proc) if not c["ok"]]


def test_the_admin_passes_every_check(reconciler: Reconciler, ns: str):
    proc = reconciler.cli("check", "-n", ns)
    # Without allowed_images a Redis may run any image: said, and no failure.
    warned = "! Redis images: allowed_images is empty: whoever may create a Redis"
    lines = proc.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("! "))
    assert lines[at].startswith(warned), proc.stdout
    assert lines[at + 1].startswith("    fix: set allowed_images"), proc.stdout
    lines = lines[:at] + lines[at + 2 :]
    assert lines and all(line.startswith("✓ ") for line in lines), proc.stdout
    names = [line.split(":")[0] for line in lines]
    for name in ("✓ config", "✓ apiserver", "✓ credentials", "✓ identity", "✓ CRDs"):
        assert name in names, proc.stdout
    assert f"✓ permissions in namespace {ns}: may make each of the" in proc.stdout
    assert "groups system:masters" in proc.stdout


def role_without(verb: str, resource: str, name: str) -> dict[str, Any]:
    """The shipped ClusterRole under another name, less one verb on one resource."""
    docs = yaml.safe_load_all((ROOT / "config" / "rbac" / "rbac.yaml").read_text())
    role = next(d for d in docs if d and d["kind"] == "ClusterRole")
    role["metadata"] = {"name": name}
    for rule in role["rules"]:
        if rule["apiGroups"] == [""] and resource in rule["resources"]:
            assert rule["resources"] == [resource], "the test edits one resource's rule"
            rule["verbs"] = [v for v in rule["verbs"] if v != verb]
    return role


def test_a_role_missing_one_verb_fails_naming_it_and_the_binding_that_fixes_it(
    kubectl: Kubectl, reconciler: Reconciler, ns: str, tmp_path: Path
):
    name = f"e2e-check-{uuid.uuid4().hex[:8]}"
    kubectl.apply(yaml.safe_dump(role_without("patch", "pods", name)))
    try:
        kubectl.run("create", "serviceaccount", "bot", "-n", ns)
        kubectl.run(
            "create", "clusterrolebinding", name, f"--clusterrole={name}",
            f"--serviceaccount={ns}:bot",
        )  # fmt: skip
        token = kubectl.run("create", "token", "bot", "-n", ns, "--duration=10m").stdout.strip()
        config = kubeconfig_for(kubectl, tmp_path / "kubeconfig", {"token": token})
        proc = Reconciler(config).cli("check", "-n", ns, "-o", "json", expect=1)
        assert failing(proc) == [
            f"permissions in namespace {ns}: may not patch pods | reconciler manifests rbac"
            f" --serviceaccount {ns}:bot --namespace {ns} | kubectl apply -f -"
            "  # as a cluster admin"
        ]
        identity = next(c for c in checks(proc) if c["name"] == "identity")
        assert identity["detail"].startswith(f"user system:serviceaccount:{ns}:bot, groups ")
        credential = next(c for c in checks(proc) if c["name"] == "credentials")
        # A token in the kubeconfig that nothing renews, with less than a week left.
        assert credential["detail"] in (
            "bearer token, expires in 9m, and nothing renews it",
            "bearer token, expires in 10m, and nothing renews it",
        )
        assert credential["warning"] is True and credential["fix"] == RENEW
    finally:
        kubectl.run("delete", "clusterrolebinding", name, check=False)
        kubectl.run("delete", "clusterrole", name, check=False)


def test_leader_election_without_its_namespace_says_how_to_make_it(reconciler: Reconciler, ns: str):
    absent = f"absent-{uuid.uuid4().hex[:6]}"
    proc = reconciler.cli(
        "check", "-n", ns, "--leader-elect", "--leader-election-namespace", absent,
        "-o", "json", expect=1,
    )  # fmt: skip
    (line,) = failing(proc)
    assert line.startswith(f"leases (--leader-elect): the Lease namespace {absent} does not exist")
    assert f"kubectl create namespace {absent}" in line


def test_a_closed_port_exits_3_and_asks_nothing_more(tmp_path: Path, kubectl: Kubectl):
    config = kubeconfig_for(
        kubectl,
        tmp_path / "kubeconfig",
        {"token": "e2e-secret-value"},
        server=f"https://127.0.0.1:{free_port()}",
    )
    proc = Reconciler(config).cli("check", expect=3)
    lines = proc.stdout.splitlines()
    assert lines[-2].startswith("✗ apiserver: https://127.0.0.1:"), proc.stdout
    assert "cannot be reached" in lines[-2]
    assert lines[-1].startswith("    fix: ")
    assert "e2e-secret-value" not in proc.stdout + proc.stderr


def test_two_contexts_one_down_checks_each_and_exits_3(
    tmp_path: Path, kubectl: Kubectl, reconciler: Reconciler, ns: str
):
    admin = yaml.safe_load(kubectl.kubeconfig.read_text())
    up = admin["contexts"][0]["name"]
    down = {"name": "down", "cluster": {"server": f"https://127.0.0.1:{free_port()}"}}
    admin["clusters"].append(down)
    admin["contexts"].append(
        {"name": "down", "context": {"cluster": "down", "user": admin["users"][0]["name"]}}
    )
    config = tmp_path / "kubeconfig"
    config.write_text(yaml.safe_dump(admin))
    proc = Reconciler(config).cli("check", "--context", up, "--context", "down", "-n", ns, expect=3)
    up_lines = [line for line in proc.stdout.splitlines() if line.startswith(f"[{up}] ")]
    down_lines = [line for line in proc.stdout.splitlines() if line.startswith("[down] ")]
    assert up_lines and all(line.startswith(f"[{up}] ✓ ") for line in up_lines), proc.stdout
    assert down_lines[0].startswith("[down] ✓ credentials: "), proc.stdout
    assert down_lines[1].startswith("[down] ✗ apiserver: "), proc.stdout
    assert len(down_lines) == 3  # the failure and its fix: nothing more is asked


def test_an_exec_plugin_is_run_and_its_expiry_shown(
    tmp_path: Path, kubectl: Kubectl, ns: str, identities: Identities
):
    account = identities.service_account("bastion")
    script, log = exec_plugin(
        tmp_path, kubectl, ns, account, "client.authentication.k8s.io/v1", 900
    )
    config = kubeconfig_for(
        kubectl, tmp_path / "kubeconfig", exec_user(script, "client.authentication.k8s.io/v1")
    )
    proc = Reconciler(config).cli("check", "-n", ns, "-o", "json")
    credential = next(c for c in checks(proc) if c["name"] == "credentials")
    assert credential["detail"].startswith("exec plugin get-token (token), expires in 1")
    assert log.read_text().count("ExecCredential") == 1
    assert failing(proc) == []


def test_refused_credentials_exit_3_naming_the_fix(tmp_path: Path, kubectl: Kubectl):
    config = kubeconfig_for(kubectl, tmp_path / "kubeconfig", {"token": "not-a-token-we-know"})
    proc = Reconciler(config).cli("check", expect=3)
    lines = proc.stdout.splitlines()
    assert lines[-2].startswith("✗ identity: the cluster refuses the credentials"), proc.stdout
    assert (
        lines[-1]
        == "    fix: renew the credential in the kubeconfig (kubectl auth whoami asks the same)"
    )
    assert "not-a-token-we-know" not in proc.stdout + proc.stderr
