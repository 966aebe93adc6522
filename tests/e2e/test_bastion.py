"""From a bastion to a managed cluster, played by the local one: kubeconfigs
whose credentials come from an exec plugin (printing real bound
ServiceAccount tokens, as `aws eks get-token` prints its own), credentials
renewed on disk under a running daemon, and an egress proxy on loopback that
alone resolves the apiserver's name."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from ..unit.connect_proxy import ConnectProxy
from .conftest import (
    Identities,
    Kubectl,
    Reconciler,
    free_port,
    kubeconfig_for,
    passes_done,
    probe,
    refused_requests,
    wait_for,
)
from .test_redis import pods, redis_yaml, settled

V1, V1BETA1 = "client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"


def exec_plugin(
    tmp_path: Path, kubectl: Kubectl, ns: str, account: str, version: str, lifetime: int
) -> tuple[Path, Path]:
    """A plugin printing a bound token of ``account`` that it says expires in
    ``lifetime`` seconds; each run is a line of its log."""
    log, script = tmp_path / "plugin-runs.log", tmp_path / "get-token"
    script.write_text(
        textwrap.dedent(f"""\
        #!/bin/sh
        echo "$KUBERNETES_EXEC_INFO" >> {log}
        token=$(KUBECONFIG={kubectl.kubeconfig} kubectl create token {account} -n {ns} \\
            --duration=10m) || exit 1
        expires=$(date -u -d "+{lifetime} seconds" +%Y-%m-%dT%H:%M:%SZ)
        printf '{{"apiVersion":"{version}","kind":"ExecCredential","status":'
        printf '{{"token":"%s","expirationTimestamp":"%s"}}}}' "$token" "$expires"
        """)
    )
    script.chmod(0o755)
    return script, log


def runs(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def exec_user(command: Path | str, version: str, **more: Any) -> dict[str, Any]:
    return {
        "exec": {"apiVersion": version, "command": str(command), "interactiveMode": "Never", **more}
    }


def refused_in(results: list[Any]) -> list[str]:
    codes = (r.summary.get("api_requests_by_code", {}) for r in results)
    return [k for c in codes for k, n in c.items() if k.endswith((" 401", " 403")) and n]


@pytest.mark.parametrize("version", [V1, V1BETA1])
def test_an_exec_plugin_runs_once_per_sync_however_many_requests(
    kubectl: Kubectl, ns: str, tmp_path: Path, identities: Identities, version: str
) -> None:
    account = identities.service_account("bastion")
    script, log = exec_plugin(tmp_path, kubectl, ns, account, version, lifetime=600)
    config = kubeconfig_for(kubectl, tmp_path / "kubeconfig", exec_user(script, version))
    kubectl.apply(redis_yaml(ns))
    results = Reconciler(config).converge(ns, settle=lambda: settled(kubectl, ns))
    requests = sum(r.summary["api_requests"] for r in results)
    assert runs(log) == len(results) < requests  # one run per process, not per request
    assert refused_in(results) == []
    info = json.loads(log.read_text().splitlines()[0])
    assert info == {"apiVersion": version, "kind": "ExecCredential", "spec": {"interactive": False}}
    assert len(pods(kubectl, ns)) == 3


def test_a_daemon_renews_an_expiring_exec_credential_and_keeps_converging(
    kubectl: Kubectl, ns: str, tmp_path: Path, identities: Identities
) -> None:
    account = identities.service_account("bastion")
    script, log = exec_plugin(tmp_path, kubectl, ns, account, V1, lifetime=4)
    config = kubeconfig_for(kubectl, tmp_path / "kubeconfig", exec_user(script, V1))
    port = free_port()
    proc = Reconciler(config).daemon(ns, "--metrics-address", f"127.0.0.1:{port}")
    try:
        wait_for(lambda: probe(port, "/readyz") == 200, what="the daemon ready", timeout=30)
        started = time.monotonic()
        wait_for(lambda: runs(log) >= 3, what="two renewals", timeout=30)
        kubectl.apply(redis_yaml(ns, num=2))  # after the first credentials expired
        wait_for(lambda: len(pods(kubectl, ns)) == 2 and settled(kubectl, ns), what="converged")
        assert refused_requests(port) == {}
        took, ran = time.monotonic() - started, runs(log)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out[-3000:]
    # Renewed 2 s before each 4 s credential expires (half its life): about
    # one run every 2 s, not one per request.
    assert ran <= took / 2 + 3, f"{ran} runs in {took:.1f}s"


def test_a_failing_plugin_exits_3_with_one_line_naming_it(
    kubectl: Kubectl, ns: str, tmp_path: Path
) -> None:
    script = tmp_path / "sso-token"
    script.write_text(
        "#!/bin/sh\necho 'refreshing the SSO token' >&2\n"
        "echo 'Error loading SSO Token: the SSO session has expired or is invalid' >&2\nexit 255\n"
    )
    script.chmod(0o755)
    failing = kubeconfig_for(kubectl, tmp_path / "failing", exec_user(script, V1))
    result = Reconciler(failing).sync(ns, expect=3)
    assert result.stderr.splitlines()[-1] == (
        "reconciler: error: unauthorized: no credentials: exec plugin sso-token exited 255: "
        "Error loading SSO Token: the SSO session has expired or is invalid"
    )
    hint = (
        "gke-gcloud-auth-plugin is not installed: gcloud components install gke-gcloud-auth-plugin"
    )
    missing_user = exec_user("gke-gcloud-auth-plugin-absent", V1BETA1, installHint=hint)
    missing = kubeconfig_for(kubectl, tmp_path / "missing", missing_user)
    result = Reconciler(missing).sync(ns, expect=3)
    assert result.stderr.splitlines()[-1] == (
        "reconciler: error: unauthorized: no credentials: exec plugin "
        f"gke-gcloud-auth-plugin-absent: not found; {hint}"
    )


def test_a_token_replaced_in_the_kubeconfig_under_a_running_daemon(
    kubectl: Kubectl, ns: str, tmp_path: Path, identities: Identities
) -> None:
    """The old token's ServiceAccount is deleted, so the cluster answers it
    401: the daemon reads the kubeconfig again and goes on with the new one."""
    old, new = identities.service_account("old"), identities.service_account("new")
    old_token = identities.token(old)
    config = kubeconfig_for(kubectl, tmp_path / "kubeconfig", {"token": old_token})
    port = free_port()
    proc = Reconciler(config).daemon(ns, "--metrics-address", f"127.0.0.1:{port}")
    try:
        kubectl.apply(redis_yaml(ns, name="before", num=1))
        wait_for(lambda: "before-0" in pods(kubectl, ns), what="a pod with the old token")
        kubeconfig_for(kubectl, config, {"token": identities.token(new)})
        kubectl.run("delete", "serviceaccount", old, "-n", ns)
        wait_for(lambda: not accepted(kubectl, old_token), what="the old token refused")
        kubectl.apply(redis_yaml(ns, name="after", num=1))
        wait_for(
            lambda: "after-0" in pods(kubectl, ns), what="a pod with the new token", timeout=30
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out[-3000:]
    assert "the kubeconfig's credentials changed" in out


def accepted(kubectl: Kubectl, token: str) -> bool:
    return kubectl.run("auth", "whoami", f"--token={token}", check=False).returncode == 0


def client_certificate(pki: Path, out: Path, user: str) -> tuple[Path, Path]:
    """A client certificate for ``user`` signed by the cluster's CA, as a
    cluster's signer would renew it."""
    out.mkdir(parents=True, exist_ok=True)
    key, csr, crt = out / f"{user}.key", out / f"{user}.csr", out / f"{user}.crt"
    subprocess.run(
        [
            "openssl",
            "req",
            "-new",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            f"/CN={user}",
            "-keyout",
            str(key),
            "-out",
            str(csr),
        ],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [
            "openssl",
            "x509",
            "-req",
            "-in",
            str(csr),
            "-CA",
            str(pki / "ca.crt"),
            "-CAkey",
            str(pki / "ca.key"),
            "-set_serial",  # not -CAcreateserial: a serial file beside the CA is shared
            str(random.getrandbits(62)),
            "-days",
            "1",
            "-out",
            str(crt),
        ],
        check=True,
        capture_output=True,
    )
    return crt, key


def test_a_client_certificate_renewed_on_disk_under_a_running_daemon(
    kubectl: Kubectl, cluster: Any, ns: str, tmp_path: Path, identities: Identities
) -> None:
    pki = Path(cluster.state_dir) / "pki"
    first, second = f"bastion-{ns}-1", f"bastion-{ns}-2"
    for user in (first, second):
        identities.bind(f"--user={user}")
    crt, key = client_certificate(pki, tmp_path / "now", first)
    user = {"client-certificate": str(crt), "client-key": str(key)}
    config = kubeconfig_for(kubectl, tmp_path / "kubeconfig", user)
    port = free_port()
    proc = Reconciler(config).daemon(ns, "--metrics-address", f"127.0.0.1:{port}")
    try:
        kubectl.apply(redis_yaml(ns, name="before", num=1))
        wait_for(lambda: "before-0" in pods(kubectl, ns), what="a pod with the first certificate")
        renewed_crt, renewed_key = client_certificate(pki, tmp_path / "renewed", second)
        for src, dst in ((renewed_key, key), (renewed_crt, crt)):
            tmp = dst.with_suffix(".new")
            tmp.write_bytes(src.read_bytes())
            os.replace(tmp, dst)  # as a renewer swaps them
        # The files are looked at once a second, and passes are a second
        # apart: the second pass to end after the swap began after a look.
        done = passes_done(port)
        wait_for(lambda: passes_done(port) >= done + 2, what="two passes after the swap")
        kubectl.apply(redis_yaml(ns, name="after", num=1))
        wait_for(lambda: "after-0" in pods(kubectl, ns), what="a pod with the renewed certificate")
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out[-3000:]
    log = Path(cluster.state_dir) / "logs" / "audit.log"
    creators = {}
    for line in log.read_text().splitlines():
        ev = json.loads(line)
        ref = ev.get("objectRef") or {}
        if ref.get("namespace") == ns and ref.get("resource") == "pods" and ev["verb"] == "create":
            creators[ref.get("name")] = ev["user"]["username"]
    assert creators == {"before-0": first, "after-0": second}


@pytest.mark.parametrize("how", ["proxy-url", "HTTPS_PROXY"])
def test_through_an_egress_proxy_with_tls_server_name(
    kubectl: Kubectl, ns: str, tmp_path: Path, how: str
) -> None:
    """The apiserver's name resolves only at the proxy; its certificate names
    `kubernetes`, which tls-server-name says to expect."""
    admin = yaml.safe_load(kubectl.kubeconfig.read_text())
    port = admin["clusters"][0]["cluster"]["server"].rsplit(":", 1)[1]
    with ConnectProxy({"apiserver.bastion.test": "127.0.0.1"}) as proxy:
        cluster: dict[str, Any] = {
            "server": f"https://apiserver.bastion.test:{port}",
            "tls-server-name": "kubernetes",
        }
        env = {}
        if how == "proxy-url":
            cluster["proxy-url"] = proxy.url
        else:
            env = {"HTTPS_PROXY": proxy.url, "NO_PROXY": ""}
        config = kubeconfig_for(
            kubectl, tmp_path / "kubeconfig", admin["users"][0]["user"], **cluster
        )
        kubectl.apply(redis_yaml(ns, num=1))
        result = Reconciler(config).sync(ns, env=env)  # exits 0
        assert result.summary["actions"]["Pod/create/ok"] == 1
        assert proxy.tunnels and set(proxy.tunnels) == {f"apiserver.bastion.test:{port}"}
    assert list(pods(kubectl, ns)) == ["redis-sample-0"]
