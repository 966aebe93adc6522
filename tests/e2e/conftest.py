"""Fixtures for the e2e suite: a real local control plane (hack/cluster), a fresh
namespace per test, and helpers that drive `reconciler sync` as users do.

Passes are synchronous, so tests call them directly; the only waits are for
other components (kwok making pods Ready, the garbage collector), and those
poll with a deadline.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from hack.cluster import cluster as launcher
from hack.e2e import TEST_NAMESPACE_PREFIX

ROOT = Path(__file__).resolve().parents[2]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "serial(why): takes the whole cluster; `make test` runs it alone, after the "
        "tests that run side by side (docs in CONTRIBUTING.md)",
    )


_started_here = False  # whether this process brought the cluster up, so takes it down


def _worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_sessionstart(session: pytest.Session) -> None:
    """The cluster is brought up once, before xdist's workers start, by the
    process that takes it down at the end: a worker that took it down when
    its own tests were done would pull it from under the others. The
    cluster-scoped objects many tests apply are made here too, once: two
    workers creating the same one at once, one would fail AlreadyExists."""
    if not _worker(session.config):
        _shared_objects(Kubectl(_ensure_cluster().kubeconfig))


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _started_here and not os.environ.get("KEEP_E2E_CLUSTER"):
        launcher.down()


def _ensure_cluster() -> Any:
    global _started_here
    if os.environ.get("PYTEST_XDIST_WORKER"):
        found = launcher.recorded()
        if found is None:
            raise AssertionError("no cluster recorded: the controller process starts it")
        return found
    if launcher.status() is None:
        _started_here = True
    return launcher.up()


def _shared_objects(kubectl: Kubectl) -> None:
    from .kubelet import hold_policy  # kubelet imports this module

    for shipped in ("rbac", "leader-election"):
        kubectl.run("apply", "-k", str(ROOT / "config" / shipped))
    kubectl.apply(yaml.safe_dump_all(hold_policy()))


@pytest.fixture(scope="session")
def cluster() -> Any:
    return _ensure_cluster()


@pytest.fixture(scope="session")
def real_node(cluster: Any) -> dict[str, str]:
    """The images on the real node real-0, by role (redis, exporter,
    reconciler, pause). Skipped, with the cluster's reason, where there is no
    node; a failure where the run needs every system tool (CI, `make test`)."""
    from hack.cluster import realnode

    node = realnode.Node.of(cluster.state_dir)
    found = realnode.state(node)
    if not (realnode.requested(node) and found.get("ready")):
        why = found.get("reason") or "not asked for (make cluster-up REAL_NODE=1)"
        if os.environ.get("REQUIRE_SYSTEM_TOOLS"):
            pytest.fail(f"no real node: {why}")
        pytest.skip(f"no real node: {why}")
    return realnode.images(node)


@dataclass
class Kubectl:
    kubeconfig: Path

    def run(
        self, *args: str, check: bool = True, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig)}
        proc = subprocess.run(
            ["kubectl", *args], input=stdin, capture_output=True, text=True, env=env, timeout=60
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {proc.stderr}")
        return proc

    def json(self, *args: str) -> dict[str, Any]:
        return json.loads(self.run(*args, "-o", "json").stdout)

    def apply(self, manifest: str, *, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.run("apply", "-f", "-", stdin=manifest, check=check)


@pytest.fixture(scope="session")
def kubectl(cluster: Any) -> Kubectl:
    return Kubectl(cluster.kubeconfig)


@pytest.fixture
def ns(kubectl: Kubectl, reconciler: Reconciler, request: pytest.FixtureRequest) -> Iterator[str]:
    name = f"{TEST_NAMESPACE_PREFIX}{uuid.uuid4().hex[:8]}"
    kubectl.run("create", "namespace", name)
    yield name
    # A serial test may pass over every namespace: the next must not find this one's pods.
    whole = request.node.get_closest_marker("serial") is not None
    delete_namespace(kubectl, reconciler, name, whole=whole)


# Our kinds, by resource and group: what holds our finalizer in a namespace.
OURS = "redis.myapp.demo.kubebuilder.io,xcas.apps.xca.k8s.kb.cx"


def delete_namespace(
    kubectl: Kubectl, reconciler: Reconciler, name: str, *, whole: bool = True
) -> None:
    """Delete a test namespace and run passes until it is gone: its Redis
    objects hold our finalizer, which only a pass releases once their pods
    are gone. With ``whole=False``, the test's Redis and Xca objects are let
    go of instead (their finalizers removed) and the namespace controller
    deletes the rest on its own, which takes it a pod's grace period or so;
    `hack.e2e` waits for that once, before the serial step. What a deletion
    does is the subject of tests of its own (test_redis). Nothing is left
    behind in a cluster the suite did not start."""
    kubectl.run("delete", "namespace", name, "--wait=false", check=False)
    if not whole:
        _let_go(kubectl, name)
        return

    def gone() -> bool:
        reconciler.sync(name, expect=None)
        return kubectl.run("get", "namespace", name, check=False).returncode != 0

    wait_for(gone, what=f"namespace {name} to be deleted", timeout=120, interval=0.5)


def _let_go(kubectl: Kubectl, name: str) -> None:
    found = kubectl.run("get", OURS, "-n", name, "-o", "name", check=False)
    unset = json.dumps({"metadata": {"finalizers": None}})
    for obj in found.stdout.split():
        kubectl.run("patch", obj, "-n", name, "--type=merge", "-p", unset, check=False)


_processes: list[subprocess.Popen[Any]] = []  # started by this test, killed after it


def owned(proc: subprocess.Popen[Any]) -> subprocess.Popen[Any]:
    """``proc``, to be killed when the test ends if it has not stopped."""
    _processes.append(proc)
    return proc


@pytest.fixture(autouse=True)
def _no_process_left() -> Iterator[None]:
    """Whatever a test did or failed to do, no daemon or server it started
    outlives it: a leftover would go on writing beside the next test on this
    worker."""
    yield
    while _processes:
        proc = _processes.pop()
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)  # a test may have left it stopped
            proc.kill()
        proc.wait(timeout=10)


@dataclass
class SyncResult:
    code: int
    summary: dict[str, Any]
    stderr: str

    @property
    def writes(self) -> int:
        return int(self.summary.get("api_writes", -1))


@dataclass
class Reconciler:
    kubeconfig: Path

    def daemon(
        self,
        ns: str,
        *extra: str,
        env: dict[str, str] | None = None,
        stdout: Any = subprocess.PIPE,
    ) -> subprocess.Popen[str]:
        """`reconciler run` in the background, a pass a second, output merged."""
        cmd = [
            sys.executable,
            "-m",
            "reconciler",
            "run",
            "-n",
            ns,
            "--kubeconfig",
            str(self.kubeconfig),
            "--interval",
            "1",
            "--jitter",
            "0",
            *extra,
        ]
        proc = subprocess.Popen(
            cmd,
            stdout=stdout,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, **(env or {})},
        )
        return owned(proc)

    def cli(self, *args: str, expect: int | None = 0) -> subprocess.CompletedProcess[str]:
        """Any reconciler command against the test cluster, as a user types it."""
        cmd = [sys.executable, "-m", "reconciler", *args, "--kubeconfig", str(self.kubeconfig)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if expect is not None and proc.returncode != expect:
            raise AssertionError(
                f"{args} exited {proc.returncode}, wanted {expect}:\n{proc.stdout}\n{proc.stderr}"
            )
        return proc

    def sync(
        self, ns: str | None, *extra: str, env: dict[str, str] | None = None, expect: int | None = 0
    ) -> SyncResult:
        scope = ["-n", ns] if ns else ["-A"]
        cmd = [
            sys.executable,
            "-m",
            "reconciler",
            "sync",
            *scope,
            "--kubeconfig",
            str(self.kubeconfig),
            "-o",
            "json",
            *extra,
        ]
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})}
        )
        summary = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
        result = SyncResult(proc.returncode, summary, proc.stderr)
        if expect is not None and proc.returncode != expect:
            raise AssertionError(
                f"sync exited {proc.returncode}, wanted {expect}:\n{proc.stdout}\n{proc.stderr}"
            )
        return result

    def converge(
        self, ns: str, *extra: str, settle: Callable[[], bool] | None = None, passes: int = 20
    ) -> list[SyncResult]:
        """Run passes until one makes no write (waiting for ``settle`` between)."""
        results = []
        for _ in range(passes):
            results.append(self.sync(ns, *extra))
            if results[-1].writes == 0 and results[-1].summary["planned"] == 0:
                return results
            if settle is not None:
                wait_for(settle, what="cluster to settle")
        raise AssertionError(
            f"no convergence in {passes} passes: {[r.summary['actions'] for r in results]}"
        )


def gated_pod(ns: str, labels: dict[str, str], **metadata: Any) -> str:
    """A pod no scheduler takes (a scheduling gate), so kwok never touches it:
    it stays Pending, and a finalizer holds it while it is deleted."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "gated", "namespace": ns, "labels": labels, **metadata},
        "spec": {
            "schedulingGates": [{"name": "e2e/hold"}],
            "containers": [{"name": "c", "image": "busybox", "ports": [{"containerPort": 80}]}],
        },
    }
    return yaml.safe_dump(pod)


_PORTS_PER_WORKER = 900  # 10,000 + 900 per worker: below hack/cluster's 20,000-32,767
_next_port = 0


def free_port() -> int:
    """A loopback port free now and handed out by no other xdist worker: each
    worker draws from its own block below the kernel's ephemeral range and
    the launcher's ports, where neither another worker's daemon nor an
    outgoing connection can take it between this check and the daemon's bind."""
    global _next_port
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw-1")  # gw0, gw1, ...
    base = 10_000 + (int(worker.removeprefix("gw")) + 1) * _PORTS_PER_WORKER
    for _ in range(_PORTS_PER_WORKER):
        port, _next_port = base + _next_port, (_next_port + 1) % _PORTS_PER_WORKER
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError(f"no free port in {base}..{base + _PORTS_PER_WORKER}")


_REQUESTS = re.compile(r"^reconciler_api_requests_total\{([^}]*)\} (\S+)$")


def _metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        return str(resp.read().decode())


def passes_done(port: int) -> float:
    """How many passes a daemon has finished, by its /metrics."""
    found = re.findall(r"^reconciler_passes_total\{[^}]*\} (\S+)$", _metrics(port), re.M)
    return sum(float(n) for n in found)


def refused_requests(port: int) -> dict[str, float]:
    """A daemon's requests the cluster refused (401, 403) by "VERB code",
    from its /metrics: what no shipped identity may ever be answered. Two
    passes are let finish first: a pass's requests are counted at its end."""
    done = passes_done(port)
    wait_for(lambda: passes_done(port) >= done + 2, what="two more passes", timeout=60)
    text = _metrics(port)
    counted = {}
    for line in text.splitlines():
        if m := _REQUESTS.match(line):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m[1]))
            counted[f"{labels['verb']} {labels['code']}"] = float(m[2])
    assert counted, "no reconciler_api_requests_total in /metrics: has its format changed?"
    return {k: n for k, n in counted.items() if k.endswith((" 401", " 403")) and n}


def probe(port: int, path: str) -> int:
    """The HTTP status of a loopback endpoint; 0 while nothing listens."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


@pytest.fixture(scope="session")
def reconciler(cluster: Any) -> Reconciler:
    return Reconciler(cluster.kubeconfig)


class NotYet:
    """A check's answer that is false and says why, so that a wait which
    times out says what it last saw, not only what it waited for."""

    def __init__(self, why: str) -> None:
        self.why = why

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return self.why


def wait_for(
    check: Callable[[], Any], *, timeout: float = 60, interval: float = 0.2, what: str = "condition"
) -> Any:
    """Poll ``check`` until it answers truly; past ``timeout``, fail with what
    it answered last."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout}s waiting for {what}; last saw: {value!r:.500}"
            )
        time.sleep(interval)


ROLE = "reconciler"  # the shipped ClusterRole (config/rbac)


def kubeconfig_for(kubectl: Kubectl, path: Path, user: dict[str, Any], **cluster: Any) -> Path:
    """The admin's cluster entry (with ``cluster`` fields over it), as ``user``."""
    admin = yaml.safe_load(kubectl.kubeconfig.read_text())
    entry = dict(admin["clusters"][0]["cluster"]) | cluster
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "managed", "cluster": entry}],
        "users": [{"name": "bastion", "user": user}],
        "contexts": [{"name": "managed", "context": {"cluster": "managed", "user": "bastion"}}],
        "current-context": "managed",
    }
    path.write_text(yaml.safe_dump(doc))
    return path


class Identities:
    """ServiceAccounts and users bound to the shipped ClusterRole, unbound
    again when the test ends."""

    def __init__(self, kubectl: Kubectl, ns: str) -> None:
        self.kubectl, self.ns = kubectl, ns
        self.bindings: list[str] = []
        kubectl.run("apply", "-k", str(Path(__file__).parents[2] / "config" / "rbac"))

    def bind(self, subject: str, role: str = ROLE) -> None:
        name = f"{TEST_NAMESPACE_PREFIX}{uuid.uuid4().hex[:8]}"
        self.kubectl.run("create", "clusterrolebinding", name, f"--clusterrole={role}", subject)
        self.bindings.append(name)

    def service_account(self, name: str) -> str:
        self.kubectl.run("create", "serviceaccount", name, "-n", self.ns)
        self.bind(f"--serviceaccount={self.ns}:{name}")
        return name

    def token(self, account: str) -> str:
        return self.kubectl.run(
            "create", "token", account, "-n", self.ns, "--duration=10m"
        ).stdout.strip()

    def close(self) -> None:
        for name in self.bindings:
            self.kubectl.run("delete", "clusterrolebinding", name, check=False)


@pytest.fixture
def identities(kubectl: Kubectl, ns: str) -> Iterator[Identities]:
    ids = Identities(kubectl, ns)
    yield ids
    ids.close()
