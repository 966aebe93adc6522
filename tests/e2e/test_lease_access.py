"""A daemon that cannot hold its Lease says so: at start with exit 2 and one
line, later with a failing /readyz and the reason."""

from __future__ import annotations

import signal
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from .conftest import Identities, Kubectl, Reconciler, free_port, kubeconfig_for, probe, wait_for
from .test_leader import LEASE


def readyz(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as resp:
            return int(resp.status), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


@pytest.mark.parametrize("mode", ["--leader-elect", "--shard"])
def test_a_lease_namespace_that_does_not_exist_refuses_to_start(
    reconciler: Reconciler, ns: str, mode: str
):
    missing = f"missing-{uuid.uuid4().hex[:6]}"
    proc = reconciler.cli("run", "-n", ns, mode, "--leader-election-namespace", missing, expect=2)
    lines = proc.stderr.strip().splitlines()
    assert lines == [
        f"reconciler: error: {mode}: the Lease namespace {missing} does not exist: create it "
        f"(kubectl create namespace {missing}) or set --leader-election-namespace "
        "(config key leader_election_namespace)"
    ]


@pytest.mark.parametrize(
    ("mode", "verbs", "grant"),
    [
        (
            "--leader-elect",
            "get, create, update",
            "reconciler check --leader-elect prints the command, for this identity",
        ),
        (
            "--shard",
            "get, list, create, update, delete",
            "reconciler check --shard prints the command, for this identity",
        ),
    ],
)
def test_leases_the_identity_may_not_write_refuse_to_start(
    reconciler: Reconciler,
    kubectl: Kubectl,
    ns: str,
    identities: Identities,
    tmp_path: Path,
    mode: str,
    verbs: str,
    grant: str,
):
    """The shipped ClusterRole alone (config/rbac, without config/leader-election)."""
    account = identities.service_account("bastion")
    config = kubeconfig_for(kubectl, tmp_path / "kubeconfig", {"token": identities.token(account)})
    cmd = [sys.executable, "-m", "reconciler", "run", "-n", ns, mode]
    cmd += ["--leader-election-namespace", ns, "--kubeconfig", str(config)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"reconciler: error: {mode}: may not {verbs} leases.coordination.k8s.io in namespace "
        f"{ns}: grant them ({grant}) or set "
        "--leader-election-namespace (config key leader_election_namespace)"
    ]


@pytest.mark.parametrize("mode", ["--leader-elect", "--shard"])
def test_readyz_fails_with_the_reason_once_the_lease_cannot_be_seen(
    reconciler: Reconciler, kubectl: Kubectl, ns: str, mode: str, tmp_path: Path
):
    leases = f"leases-{uuid.uuid4().hex[:6]}"
    kubectl.run("create", "namespace", leases)
    port = free_port()
    log = tmp_path / "daemon.log"
    with log.open("w") as out:
        proc = reconciler.daemon(
            ns,
            mode,
            "--leader-election-namespace",
            leases,
            "--metrics-address",
            f"127.0.0.1:{port}",
            env=LEASE,
            stdout=out,
        )
    lost = f"not ready: lease {leases}/reconciler neither held nor seen"
    try:
        wait_for(lambda: probe(port, "/readyz") == 200, what="ready", timeout=30)
        kubectl.run("delete", "namespace", leases, "--wait=true", "--timeout=60s")
        _code, body = wait_for(
            lambda: (r := readyz(port))[0] == 503 and r, what="/readyz to fail", timeout=30
        )
        assert body.startswith(f"lease {leases}/reconciler neither held nor seen for "), body
        assert "not found" in body, body
        assert probe(port, "/healthz") == 200  # alive: a restart would not help
        wait_for(lambda: lost in log.read_text(), what="the log to say it", timeout=30)
        kubectl.run("create", "namespace", leases)
        wait_for(lambda: probe(port, "/readyz") == 200, what="ready again", timeout=30)
        wait_for(
            lambda: "ready again: the Lease is held or seen" in log.read_text(),
            what="the log to say it is ready again",
            timeout=30,
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        kubectl.run("delete", "namespace", leases, "--wait=false", check=False)
    assert proc.returncode == 0, log.read_text()[-3000:]
