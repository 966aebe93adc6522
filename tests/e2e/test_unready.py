"""A daemon that cannot use its cluster says so to systemd and to /readyz:
after `unready_after` passes in a row refused (401, 403) or unreachable,
the STATUS= line it sends and /readyz name the error, while the watchdog is
still fed; a pass that reaches the cluster again clears both."""

from __future__ import annotations

import select
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import Identities, Kubectl, Reconciler, free_port, kubeconfig_for, wait_for
from .test_lease_access import readyz
from .test_ship import Notifications

AFTER = 3  # RECONCILER_UNREADY_AFTER in these tests
UNREACHED = "no pass has reached the cluster for "


@pytest.fixture
def notes() -> Iterator[Notifications]:
    n = Notifications()
    yield n
    n.close()


def heard(
    notes: Notifications, proc: subprocess.Popen[str], want: Callable[[str], bool], timeout: float
) -> str:
    """The first message from now on that ``want`` takes."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise AssertionError(f"daemon exited {proc.returncode}; got {notes.seen}")
        if time.monotonic() > deadline:
            raise AssertionError(f"nothing wanted in {timeout}s; got {notes.seen[-6:]}")
        notes.sock.settimeout(1.0)
        try:
            message = notes.sock.recv(4096).decode()
        except TimeoutError:
            continue
        notes.seen.append(message)
        if want(message):
            return message


def start(
    kubeconfig: Path, ns: str, notes: Notifications, port: int, log: Any
) -> subprocess.Popen[str]:
    env = {"NOTIFY_SOCKET": notes.path, "RECONCILER_UNREADY_AFTER": str(AFTER)}
    return Reconciler(kubeconfig).daemon(
        ns, "--metrics-address", f"127.0.0.1:{port}", env=env, stdout=log
    )


def stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0


def not_ready_said(
    notes: Notifications,
    proc: subprocess.Popen[str],
    port: int,
    error: str,
    head: str = UNREACHED,
) -> str:
    """The STATUS= line and /readyz both say ``head`` and name ``error``
    after AFTER passes (not before), and the watchdog is fed after it; the
    STATUS= line."""
    status = heard(notes, proc, lambda m: m.startswith(f"STATUS=not ready: {head}"), timeout=45)
    statuses = [m for m in notes.seen if m.startswith("STATUS=")]
    assert [m.startswith("STATUS=pass ") for m in statuses] == [True] * (AFTER - 1) + [False]
    assert f"({AFTER} passes in a row since " in status and error in status, status
    heard(notes, proc, lambda m: m == "WATCHDOG=1", timeout=5)  # fed: no restart mends it
    code, why = readyz(port)
    assert code == 503 and why.startswith(head), why
    assert error in why, why
    return status


def test_a_refused_token_is_said_until_the_daemon_runs_with_a_good_one(
    kubectl: Kubectl, ns: str, notes: Notifications, tmp_path: Path
) -> None:
    bad = kubeconfig_for(kubectl, tmp_path / "bad", {"token": "not-a-token"})
    port = free_port()
    log = (tmp_path / "daemon.log").open("w+")
    proc = start(bad, ns, notes, port, log)
    not_ready_said(notes, proc, port, "unauthorized: the cluster does not accept")
    assert "READY=1" in notes.seen  # started: systemctl start does not hang on it
    stop(proc)
    log.seek(0)
    assert "not ready: no pass has reached the cluster for" in log.read()

    notes.seen.clear()
    proc = start(kubectl.kubeconfig, ns, notes, port, log)
    heard(notes, proc, lambda m: m.startswith("STATUS=pass "), timeout=30)
    wait_for(lambda: readyz(port) == (200, "ok\n"), what="/readyz ok", timeout=10)
    stop(proc)
    assert not any(m.startswith("STATUS=not ready") for m in notes.seen), notes.seen


def test_lost_rbac_is_said_and_the_first_pass_allowed_again_clears_it(
    kubectl: Kubectl, ns: str, identities: Identities, notes: Notifications, tmp_path: Path
) -> None:
    kubectl.run("create", "serviceaccount", "unbound", "-n", ns)
    user = {"token": identities.token("unbound")}
    kubeconfig = kubeconfig_for(kubectl, tmp_path / "kubeconfig", user)
    port = free_port()
    log = (tmp_path / "daemon.log").open("w+")
    proc = start(kubeconfig, ns, notes, port, log)
    not_ready_said(notes, proc, port, "forbidden: these credentials may not list")

    identities.bind(f"--serviceaccount={ns}:unbound")
    heard(notes, proc, lambda m: m.startswith("STATUS=pass "), timeout=30)
    wait_for(lambda: readyz(port) == (200, "ok\n"), what="/readyz ok", timeout=10)
    stop(proc)
    log.seek(0)
    assert "ready again: a pass could use the cluster" in log.read()


# What a role that lists pods and none of the kinds grants.
PODS_ONLY = """
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: {name}}}
rules:
- {{apiGroups: [""], resources: [pods, namespaces], verbs: [get, list]}}
- {{apiGroups: [""], resources: [events], verbs: [create, get, patch]}}
"""


def test_a_daemon_that_can_list_none_of_its_kinds_is_not_ready_until_it_can(
    kubectl: Kubectl, ns: str, identities: Identities, notes: Notifications, tmp_path: Path
) -> None:
    """It reaches the cluster and lists the pods, but every kind's LIST is
    refused (as when their CRDs are not installed): its passes do nothing,
    and it says so as it says an unreachable cluster, each kind named."""
    role = f"{ns}-pods-only"
    kubectl.apply(PODS_ONLY.format(name=role))
    kubectl.run("create", "serviceaccount", "pods-only", "-n", ns)
    identities.bind(f"--serviceaccount={ns}:pods-only", role=role)
    user = {"token": identities.token("pods-only")}
    kubeconfig = kubeconfig_for(kubectl, tmp_path / "kubeconfig", user)
    port = free_port()
    log = (tmp_path / "daemon.log").open("w+")
    try:
        proc = start(kubeconfig, ns, notes, port, log)
        status = not_ready_said(
            notes, proc, port, "LIST Redis: ", head="no pass has listed a kind it reconciles for "
        )
        assert "LIST Xca: " in status and "LIST Pod" not in status, status
        identities.bind(f"--serviceaccount={ns}:pods-only")
        heard(notes, proc, lambda m: m.startswith("STATUS=pass "), timeout=30)
        wait_for(lambda: readyz(port) == (200, "ok\n"), what="/readyz ok", timeout=10)
        stop(proc)
    finally:
        kubectl.run("delete", "clusterrole", role, "--ignore-not-found")
    log.seek(0)
    assert "ready again: a pass could use the cluster" in log.read()


class Forwarder:
    """A TCP port that forwards to the apiserver once opened: until then,
    nobody listens there."""

    def __init__(self, port: int, target: tuple[str, int]) -> None:
        self.port, self.target = port, target
        self.stopping = threading.Event()
        self.server: socket.socket | None = None

    def open(self) -> None:
        self.server = socket.create_server(("127.0.0.1", self.port))
        self.server.settimeout(0.2)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        assert self.server is not None
        while not self.stopping.is_set():
            try:
                client, _ = self.server.accept()
            except TimeoutError:
                continue
            upstream = socket.create_connection(self.target)
            threading.Thread(target=self._pipe, args=(client, upstream), daemon=True).start()

    def _pipe(self, a: socket.socket, b: socket.socket) -> None:
        with a, b:
            while not self.stopping.is_set():
                ready, _, _ = select.select([a, b], [], [], 0.2)
                for side in ready:
                    data = side.recv(65536)
                    if not data:
                        return
                    (b if side is a else a).sendall(data)

    def close(self) -> None:
        self.stopping.set()
        if self.server is not None:
            self.server.close()


def test_an_unreachable_apiserver_is_said_and_the_first_pass_that_reaches_it_clears_it(
    kubectl: Kubectl, ns: str, notes: Notifications, tmp_path: Path
) -> None:
    admin = yaml.safe_load(kubectl.kubeconfig.read_text())
    host, _, apiserver_port = admin["clusters"][0]["cluster"]["server"].rpartition(":")
    assert host == "https://127.0.0.1", host  # the certificate names 127.0.0.1
    forwarder = Forwarder(free_port(), ("127.0.0.1", int(apiserver_port)))
    server = f"https://127.0.0.1:{forwarder.port}"
    user = admin["users"][0]["user"]
    kubeconfig = kubeconfig_for(kubectl, tmp_path / "kubeconfig", user, server=server)
    port = free_port()
    log = (tmp_path / "daemon.log").open("w+")
    try:
        proc = start(kubeconfig, ns, notes, port, log)
        not_ready_said(notes, proc, port, f"cannot reach the cluster: {server}")
        forwarder.open()
        heard(notes, proc, lambda m: m.startswith("STATUS=pass "), timeout=30)
        wait_for(lambda: readyz(port) == (200, "ok\n"), what="/readyz ok", timeout=10)
        stop(proc)
    finally:
        forwarder.close()
    log.seek(0)
    assert "ready again: a pass could use the cluster" in log.read()
