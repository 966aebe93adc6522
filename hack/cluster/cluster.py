#!/usr/bin/env python3
"""Run a real Kubernetes control plane on 127.0.0.1 for tests and local use.

etcd, kube-apiserver, kube-controller-manager (the controllers that need no
cloud and touch what we make: `KCM_CONTROLLERS`), kube-scheduler, kwok (which
plays the nodes) and provisioner.py (which plays the storage driver of the
default StorageClass) run as detached processes recorded in a state
directory, so `up` and `down` can be separate commands. Binaries come from
build.sh beside this file; their kubectl, of the same version, applies
<repo>/crds/.

CLI: python3 hack/cluster/cluster.py [--state-dir DIR] up [--real-node]|down|status|env|leftovers
API: up(state_dir) -> Cluster, down(state_dir), status(state_dir) -> Cluster | None

Standard library only (plus the openssl CLI), so it runs before any venv exists.
"""

import argparse
import base64
import contextlib
import dataclasses
import fcntl
import hashlib
import http.client
import json
import os
import random
import secrets
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

if __package__:
    from . import realnode
else:  # run as a script, or imported with hack/cluster on sys.path
    import realnode  # type: ignore[no-redef]

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
BUILD_SH = HERE / "build.sh"
CRDS_DIR = REPO / "crds"
DEFAULT_STATE_DIR = REPO / ".cluster"
# Two clusters side by side (`fleet-up`), by context name: the first is the
# default one; the second has its own state dir, ports and etcd.
FLEET = {"local": DEFAULT_STATE_DIR, "local-2": REPO / ".cluster-2"}
FLEET_KUBECONFIG = REPO / ".cluster-fleet" / "kubeconfig"

HOST = "127.0.0.1"
TIMEOUT = 60.0  # per component / readiness step
STOP_GRACE = 5.0  # SIGTERM -> SIGKILL
LOG_TAIL = 30
PORTS = ("etcd", "etcd-peer", "apiserver", "kcm", "scheduler", "kwok")
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
PROVISIONER = "provisioner"  # provisioner.py beside this file, run by this Python
PROVISIONER_SCRIPT = HERE / "provisioner.py"
COMPONENTS = (*BINARIES, PROVISIONER)
# What a real cluster runs that needs no cloud and touches what we make: the
# EndpointSlices of a Redis's Service, the disruption budgets' status, pods
# bound to nodes that are gone, nodes whose kubelet stops reporting, and the
# claims of a Redis's pods: binding them to volumes, asking an external
# resizer to grow them, and holding a claim or volume while it is in use;
# and the built-in edit, admin and view roles aggregating ours (config/redis-users).
KCM_CONTROLLERS = (
    "garbage-collector-controller,namespace-controller,resourcequota-controller,"
    "serviceaccount-controller,serviceaccount-token-controller,"
    "endpointslice-controller,disruption-controller,pod-garbage-collector-controller,"
    "node-lifecycle-controller,taint-eviction-controller,"
    "persistentvolume-binder-controller,persistentvolume-expander-controller,"
    "persistentvolumeclaim-protection-controller,persistentvolume-protection-controller,"
    "clusterrole-aggregation-controller"
)
# The default StorageClass, served by provisioner.py under this name (none of
# Kubernetes' own "kubernetes.io/" names: the binder leaves a class of any
# other name to an external provisioner, and its Released volumes to it too).
PROVISIONER_NAME = "hack.reconciler.local/hostpath"
STORAGE_CLASS = {
    "apiVersion": "storage.k8s.io/v1",
    "kind": "StorageClass",
    "metadata": {
        "name": "standard",
        # The DefaultStorageClass admission plugin (on by default) gives this
        # class to every claim that names none.
        "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
    },
    "provisioner": PROVISIONER_NAME,
    "reclaimPolicy": "Delete",
    "allowVolumeExpansion": True,
    # Immediate, not WaitForFirstConsumer: with the latter the binder hands a
    # claim to the provisioner only once the scheduler has put a pod that
    # uses it on a node, and the volume would be pinned to that node. kwok's
    # nodes have no disks to be near, and a claim no pod uses yet (a test's,
    # or one made ahead of its pod) should bind too: Immediate provisions as
    # soon as the claim exists.
    "volumeBindingMode": "Immediate",
}
PROVISIONER_INTERVAL = 0.5  # seconds between its looks at the claims and volumes
SERVICE_CIDR = "10.96.0.0/16"  # config only: nothing routes there
POD_CIDR = "10.244.0.1/16"  # kwok hands out fake pod IPs; its /24 default caps at 254 pods
SA_ISSUER = "https://kubernetes.default.svc"
NODES = ("kwok-node-0", "kwok-node-1")
KWOK_SELECTOR = ("kwok.x-k8s.io/node", "fake")
# Enough room that no test or benchmark run is ever limited by node capacity (a
# bench run creates ~22,000 pods); kwok keeps what the Node object says.
NODE_RESOURCES = {"cpu": "1000", "memory": "4Ti", "pods": "100000"}
# kube-scheduler's client defaults to 50 QPS, which alone takes a minute to bind
# 3,000 pods. A real cluster's scheduler is tuned for its size; so is this one.
SCHEDULER_QPS, SCHEDULER_BURST = 1000, 1000

OPENSSL_CNF = """\
[req]
distinguished_name = dn
prompt = no
[dn]
CN = reconciler-local
[ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign, digitalSignature
subjectKeyIdentifier = hash
[server]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid, issuer
subjectAltName = IP:127.0.0.1, DNS:localhost, DNS:kubernetes, DNS:kubernetes.default, \
DNS:kubernetes.default.svc, IP:10.96.0.1
"""

KWOK_CONFIG = """\
# Explicit config so a stray ~/.kwok/kwok.yaml cannot change behaviour; with
# no Stage objects kwok uses its built-in fast node and pod stages. Node
# leases renewed as a kubelet renews them: the node lifecycle controller
# takes a node whose lease lapses for NotReady (and taints it), and kwok's
# own status heartbeat comes too seldom for it.
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  nodeLeaseDurationSeconds: 40
"""


SCHEDULER_CONFIG = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: {kubeconfig}
  qps: {qps}
  burst: {burst}
leaderElection:
  leaderElect: false
"""


# The apiserver's own record of who wrote what, for the sharding e2e tests
# (tests/e2e/test_shard.py): every write to our kinds and to pods, and the
# Lease writes with their bodies (who took which bucket, when). Node leases
# (kwok renews one per node) and kwok's pod status updates are left out.
AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  namespaces: [kube-node-lease, kube-system]
- level: None
  resources: [{group: "", resources: [pods/status, nodes, nodes/status, events]}]
- level: Request
  verbs: [create, update, patch, delete]
  resources: [{group: coordination.k8s.io, resources: [leases]}]
- level: Metadata
  verbs: [create, update, patch, delete]
  resources:
  - {group: "", resources: [pods]}
  - {group: myapp.demo.kubebuilder.io, resources: [redis, redis/status]}
  - {group: apps.xca.k8s.kb.cx, resources: [xcas, xcas/status]}
- level: None
"""


# "1": the apiserver serves /debug/pprof. Read when a cluster starts, not by a
# running one. Not RECONCILER_*: the reconciler refuses variables of that
# prefix it does not know.
PROFILING_ENV = "BENCH_APISERVER_PROFILING"


class ClusterError(RuntimeError):
    """Start-up failed; the message ends with the failing component's log tail."""

    def __init__(self, message: str, log: Path | None = None) -> None:
        if log is not None:
            message += f"\n--- last {LOG_TAIL} lines of {log} ---\n{_tail(log)}"
        super().__init__(message)


@dataclass(frozen=True)
class Cluster:
    """Connection details of a running cluster (the admin identity)."""

    kubeconfig: Path
    server: str
    token: str
    ca_file: Path
    bin_dir: Path
    state_dir: Path
    nodes: tuple[str, ...] = NODES

    def env(self) -> dict[str, str]:
        """Environment for subprocesses (kubectl, the reconciler) to reach the cluster."""
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig)}


@dataclass(frozen=True)
class Layout:
    """Where everything for one state dir lives; etcd data goes to tmpfs if possible."""

    root: Path

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def pids(self) -> Path:
        return self.root / "pids"

    @property
    def kubeconfig(self) -> Path:
        return self.root / "kubeconfig"

    @property
    def audit_log(self) -> Path:
        return self.logs / "audit.log"

    @property
    def audit_policy(self) -> Path:
        return self.root / "audit-policy.yaml"

    @property
    def tokens(self) -> Path:
        return self.root / "tokens.csv"

    @property
    def state_file(self) -> Path:
        return self.root / "state.json"

    @property
    def scratch(self) -> Path:
        """Per-state-dir directory for etcd data: tmpfs is fast and leaves nothing on disk."""
        shm = Path("/dev/shm")
        if shm.is_dir() and os.access(shm, os.W_OK):
            digest = hashlib.sha256(str(self.root).encode()).hexdigest()[:12]
            return shm / f"reconciler-cluster-{digest}"
        return self.root / "scratch"

    @property
    def volumes(self) -> Path:
        """The provisioner's hostPath volumes: thrown away with etcd's data."""
        return self.scratch / "volumes"

    @property
    def provisioner_ready(self) -> Path:
        return self.root / "provisioner.ready"

    def log(self, component: str) -> Path:
        return self.logs / f"{component}.log"

    def pid_file(self, component: str) -> Path:
        return self.pids / f"{component}.pid"

    def markers(self) -> tuple[str, str]:
        """Strings found in the command line of every process we start (and no other)."""
        return f"{self.root}/", f"{self.scratch}/"


# ---------------------------------------------------------------- public API


def up(state_dir: Path | str | None = None, real_node: bool | None = None) -> Cluster:
    """Start the cluster, or return at once if the one recorded in state_dir is
    healthy. real_node (default: REAL_NODE=1 in the environment) adds the real
    node, where the machine can run it: a healthy cluster without it is
    started afresh with it. A healthy cluster keeps a node it runs."""
    lay = _layout(state_dir)
    bin_dir = _bin_dir()
    kubectl = str(bin_dir / "kubectl")  # built with the apiserver: no version skew
    if real_node is None:
        real_node = os.environ.get(realnode.ENV_VAR) == "1"
    node = realnode.Node.of(lay.root)
    with _locked(lay):
        cluster = _healthy(lay)
        if cluster is not None and real_node and not realnode.running(node):
            reason = realnode.blocked(node, bin_dir)
            if reason is None:
                _log("restarting with the real node")
                cluster = None
            else:
                realnode.record(node, reason)
                _log(f"no real node: {reason}")
        if cluster is not None:
            _log(f"already up at {cluster.server}")
            _sync_crds(cluster, lay, kubectl)
            _create_storage_class(cluster)
            return cluster
        _stop(lay)  # whatever is left of a previous run is stale
        realnode.request(node, real_node)
        try:
            return _start(lay, bin_dir, kubectl)
        except BaseException:
            _log("start-up failed; stopping what was started (logs kept)")
            _stop(lay)
            raise


def down(state_dir: Path | str | None = None) -> None:
    """Stop every process started for state_dir and drop its etcd data."""
    lay = _layout(state_dir)
    if not lay.root.exists():
        _stop(lay)
        return
    with _locked(lay):
        _stop(lay)


def status(state_dir: Path | str | None = None) -> Cluster | None:
    """The running cluster if all its processes are alive and the apiserver is ready."""
    return _healthy(_layout(state_dir))


def recorded(state_dir: Path | str | None = None) -> Cluster | None:
    """The cluster recorded in state_dir, not asked whether it answers: what a
    pytest worker uses while the process that started the cluster owns it (a
    slow /readyz under load must not make a worker start it anew)."""
    return _recorded(_layout(state_dir))


def stop_component(component: str, state_dir: Path | str | None = None) -> None:
    """Kill one component (SIGKILL: a crash, not a shutdown), for fault-injection tests."""
    lay = _layout(state_dir)
    pid = _pid_of(lay, component)
    if pid is None:
        raise ClusterError(f"{component} is not running")
    _signal(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while realnode.host.alive(pid) and time.monotonic() < deadline:
        _reap(pid)
        time.sleep(0.02)
    _reap(pid)


def start_component(component: str, state_dir: Path | str | None = None) -> None:
    """Start one stopped component again on the ports recorded at `up`, and wait for it."""
    lay = _layout(state_dir)
    state = _load_state(lay)
    if state is None:
        raise ClusterError(f"no cluster recorded in {lay.root}")
    if _pid_of(lay, component) is not None:
        return
    bin_dir, ports = Path(state["bin_dir"]), state["ports"]
    args = {
        "etcd": _etcd_args,
        "kube-apiserver": _apiserver_args,
        "kube-controller-manager": _kcm_args,
        "kube-scheduler": _scheduler_args,
        "kwok": _kwok_args,
        PROVISIONER: _provisioner_args,
    }[component](lay, bin_dir, ports)
    _spawn(lay, component, args)
    if component == "kube-apiserver":
        cluster = _recorded(lay)
        assert cluster is not None
        _wait(lay, component, "apiserver /readyz", lambda: _apiserver_ready(cluster))


def extra_apiserver(
    name: str, flags: list[str], state_dir: Path | str | None = None
) -> tuple[Cluster, int]:
    """Start another kube-apiserver on the running cluster's etcd, on a port
    of its own and with ``flags`` added (e.g. tiny in-flight limits): the same
    cluster, served as a loaded one would be. Returns the cluster as seen
    through it (its own kubeconfig) and its pid; `stop_component(name)` or
    `down` stops it."""
    lay = _layout(state_dir)
    state, base = _load_state(lay), _recorded(lay)
    if state is None or base is None:
        raise ClusterError(f"no cluster recorded in {lay.root}")
    (port,) = _free_ports(1)
    args = _apiserver_args(lay, Path(state["bin_dir"]), {**state["ports"], "apiserver": port})
    args = [a for a in args if not a.startswith("--audit-")] + flags
    pid = _spawn(lay, name, args)
    cluster = dataclasses.replace(
        base, server=f"https://{HOST}:{port}", kubeconfig=lay.root / f"{name}.kubeconfig"
    )
    _write_kubeconfig(cluster)
    _wait(lay, name, "apiserver /readyz", lambda: _apiserver_ready(cluster))
    return cluster, pid


def fleet_kubeconfig(clusters: dict[str, Cluster], path: Path) -> Path:
    """One kubeconfig with a context per running cluster, named as given
    (its cluster and user take the same name): what a bastion's kubeconfig
    looks like. The first is the current context."""
    entries = {"clusters": [], "users": [], "contexts": []}
    for name, c in clusters.items():
        ca = base64.b64encode(c.ca_file.read_bytes()).decode()
        server = {"server": c.server, "certificate-authority-data": ca}
        entries["clusters"].append({"name": name, "cluster": server})
        entries["users"].append({"name": name, "user": {"token": c.token}})
        context = {"cluster": name, "user": name, "namespace": "default"}
        entries["contexts"].append({"name": name, "context": context})
    doc = {"apiVersion": "v1", "kind": "Config", **entries, "current-context": next(iter(clusters))}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=2))
    tmp.chmod(0o600)
    tmp.replace(path)
    return path


# ---------------------------------------------------------------- start-up


def _start(lay: Layout, bin_dir: Path, kubectl: str) -> Cluster:
    started = time.monotonic()
    for d in (lay.logs, lay.pids, lay.scratch):
        d.mkdir(parents=True, exist_ok=True)
    token = _ensure_credentials(lay)
    node = realnode.Node.of(lay.root)
    if realnode.requested(node):
        realnode.prepare(node, lay.pki / "ca.crt", _openssl)
    ports = dict(zip(PORTS, _free_ports(len(PORTS)), strict=True))
    cluster = Cluster(
        kubeconfig=lay.kubeconfig,
        server=f"https://{HOST}:{ports['apiserver']}",
        token=token,
        ca_file=lay.pki / "ca.crt",
        bin_dir=bin_dir,
        state_dir=lay.root,
    )
    _write_kubeconfig(cluster)
    (lay.root / "kwok.yaml").write_text(KWOK_CONFIG)
    lay.audit_policy.write_text(AUDIT_POLICY)
    (lay.root / "scheduler.yaml").write_text(
        SCHEDULER_CONFIG.format(kubeconfig=lay.kubeconfig, qps=SCHEDULER_QPS, burst=SCHEDULER_BURST)
    )

    _log(f"starting etcd on {HOST}:{ports['etcd']} (data in {lay.scratch})")
    _spawn(lay, "etcd", _etcd_args(lay, bin_dir, ports))
    _wait(lay, "etcd", "etcd /health", lambda: _etcd_healthy(ports["etcd"]))

    _log(f"starting kube-apiserver on {cluster.server}")
    _spawn(lay, "kube-apiserver", _apiserver_args(lay, bin_dir, ports))
    _wait(lay, "kube-apiserver", "apiserver /readyz", lambda: _apiserver_ready(cluster))
    # Before the controller-manager starts: its first discovery must know our
    # kinds. A budget synced before it does fails ("no matches for kind
    # Redis"), and the disruption controller retries it with a backoff that
    # grows to many minutes: its pods' evictions are refused all that time.
    crds = _apply_crds(cluster, kubectl)
    # Before any claim can be made, so that admission gives it the class.
    _create_storage_class(cluster)

    _log(f"starting kube-controller-manager on {HOST}:{ports['kcm']} ({_kcm_controllers(lay)})")
    _spawn(lay, "kube-controller-manager", _kcm_args(lay, bin_dir, ports))
    _log(f"starting kube-scheduler on {HOST}:{ports['scheduler']}")
    _spawn(lay, "kube-scheduler", _scheduler_args(lay, bin_dir, ports))
    _log(f"starting kwok on {HOST}:{ports['kwok']}")
    _spawn(lay, "kwok", _kwok_args(lay, bin_dir, ports))
    _create_nodes(cluster)
    _log(f"starting the provisioner of {PROVISIONER_NAME} (volumes in {lay.volumes})")
    lay.provisioner_ready.unlink(missing_ok=True)
    _spawn(lay, PROVISIONER, _provisioner_args(lay, bin_dir, ports))

    _wait(
        lay,
        "kube-controller-manager",
        "controller-manager /healthz",
        lambda: _https_ok(ports["kcm"]),
    )
    _wait(lay, "kube-scheduler", "scheduler /healthz", lambda: _https_ok(ports["scheduler"]))
    _wait(lay, "kwok", "kwok /healthz", lambda: _http_ok(f"http://{HOST}:{ports['kwok']}/healthz"))
    _wait(lay, PROVISIONER, "the provisioner's first loop", lay.provisioner_ready.exists)
    _wait(
        lay,
        "kwok",
        f"nodes {', '.join(NODES)} Ready and untainted",
        lambda: all(_node_ready(cluster, n) for n in NODES),
    )
    _wait(
        lay,
        "kube-controller-manager",
        "ServiceAccount default/default",
        lambda: (
            _api(cluster, "GET", "/api/v1/namespaces/default/serviceaccounts/default")[0] == 200
        ),
    )

    _save_state(
        lay, {"server": cluster.server, "bin_dir": str(bin_dir), "ports": ports, "crds": crds}
    )
    if realnode.requested(node):
        _start_real_node(cluster, node, bin_dir)
    _log(f"up in {time.monotonic() - started:.1f}s; export KUBECONFIG={lay.kubeconfig}")
    return cluster


def _start_real_node(cluster: Cluster, node: realnode.Node, bin_dir: Path) -> None:
    """The real node, or one line saying why not: the cluster runs on without it."""
    reason = realnode.start(
        node,
        bin_dir=bin_dir,
        server=cluster.server,
        ca=cluster.ca_file,
        api=lambda *a: _api(cluster, *a),
        log=_log,
    )
    if reason is not None:
        _log(f"no real node: {reason}")


def _stop_real_node(lay: Layout) -> None:
    """Before the control plane stops: the kubelet deletes its pods through it."""
    node = realnode.Node.of(lay.root)
    if not (node.run.exists() or node.footprint().sysctls_saved.exists()):
        return
    cluster = _recorded(lay)
    api = None
    if cluster is not None and _apiserver_ready(cluster):
        api = lambda *a: _api(cluster, *a)  # noqa: E731
    realnode.stop(node, api=api, log=_log)


def _etcd_args(lay: Layout, bin_dir: Path, ports: dict[str, int]) -> list[str]:
    client, peer = f"http://{HOST}:{ports['etcd']}", f"http://{HOST}:{ports['etcd-peer']}"
    return [
        str(bin_dir / "etcd"),
        "--name=reconciler",
        f"--data-dir={lay.scratch / 'etcd'}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=reconciler={peer}",
        "--initial-cluster-state=new",
        "--unsafe-no-fsync",  # throwaway data; matters when tmpfs is unavailable
        "--log-level=warn",
    ]


def _apiserver_args(lay: Layout, bin_dir: Path, ports: dict[str, int]) -> list[str]:
    pki = lay.pki
    return [
        str(bin_dir / "kube-apiserver"),
        f"--etcd-servers=http://{HOST}:{ports['etcd']}",
        f"--bind-address={HOST}",
        f"--advertise-address={HOST}",
        f"--secure-port={ports['apiserver']}",
        # SO_REUSEPORT: an apiserver restarted after a kill (the fault tests)
        # binds its port again at once, past the old connections' TIME_WAIT.
        "--permit-port-sharing=true",
        f"--cert-dir={pki}",
        f"--tls-cert-file={pki / 'apiserver.crt'}",
        f"--tls-private-key-file={pki / 'apiserver.key'}",
        f"--client-ca-file={pki / 'ca.crt'}",
        f"--token-auth-file={lay.tokens}",
        "--authorization-mode=Node,RBAC",
        f"--service-account-key-file={pki / 'sa.pub'}",
        f"--service-account-signing-key-file={pki / 'sa.key'}",
        f"--service-account-issuer={SA_ISSUER}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        # A loopback address is not a valid Endpoints IP; nothing needs that Service anyway.
        "--endpoint-reconciler-type=none",
        f"--audit-policy-file={lay.audit_policy}",
        f"--audit-log-path={lay.audit_log}",
        "--audit-log-maxsize=500",
        "--audit-log-maxbackup=1",
        # /debug/pprof, for profiling the apiserver under a bench (docs/performance.md).
        f"--profiling={'true' if os.environ.get(PROFILING_ENV) == '1' else 'false'}",
        # Every 5 to 7.5 minutes the apiserver's own cache check lists each
        # cached resource from its cache and again from etcd, decoding every
        # object: 2 to 5.6 s of CPU at bench.shard's 50,000 objects, landing in
        # some measured windows and not in others. It is the cluster's own
        # periodic work, the same whoever runs against it; nothing here uses it.
        "--feature-gates=DetectCacheInconsistency=false",
        *realnode.apiserver_flags(realnode.Node.of(lay.root)),
    ]


def _kcm_args(lay: Layout, bin_dir: Path, ports: dict[str, int]) -> list[str]:
    """No delegated authn/authz kubeconfigs (here or for the scheduler): /healthz is
    always allowed, and delegation would want a requestheader CA we do not need."""
    return [
        str(bin_dir / "kube-controller-manager"),
        f"--kubeconfig={lay.kubeconfig}",
        f"--bind-address={HOST}",
        f"--secure-port={ports['kcm']}",
        f"--controllers={_kcm_controllers(lay)}",
        # The garbage collector's deletes are throttled at 20 QPS by default.
        "--kube-api-qps=200",
        "--kube-api-burst=400",
        f"--service-account-private-key-file={lay.pki / 'sa.key'}",
        f"--root-ca-file={lay.pki / 'ca.crt'}",
        "--leader-elect=false",
        "--profiling=false",
    ]


def _kcm_controllers(lay: Layout) -> str:
    if realnode.requested(realnode.Node.of(lay.root)):
        return f"{KCM_CONTROLLERS},{realnode.KCM_CONTROLLERS}"
    return KCM_CONTROLLERS


def _scheduler_args(lay: Layout, bin_dir: Path, ports: dict[str, int]) -> list[str]:
    return [
        str(bin_dir / "kube-scheduler"),
        f"--config={lay.root / 'scheduler.yaml'}",
        f"--bind-address={HOST}",
        f"--secure-port={ports['scheduler']}",
        "--profiling=false",
    ]


def _provisioner_args(lay: Layout, bin_dir: Path, ports: dict[str, int]) -> list[str]:
    """This Python, not a binary of bin_dir: it needs nothing but the standard library."""
    return [
        sys.executable,
        str(PROVISIONER_SCRIPT),
        f"--server=https://{HOST}:{ports['apiserver']}",
        f"--ca-file={lay.pki / 'ca.crt'}",
        f"--token-file={lay.tokens}",
        f"--name={PROVISIONER_NAME}",
        f"--volumes-dir={lay.volumes}",
        f"--interval={PROVISIONER_INTERVAL}",
        f"--ready-file={lay.provisioner_ready}",
    ]


def _kwok_args(lay: Layout, bin_dir: Path, ports: dict[str, int]) -> list[str]:
    key, value = KWOK_SELECTOR
    return [
        str(bin_dir / "kwok"),
        f"--kubeconfig={lay.kubeconfig}",
        f"--config={lay.root / 'kwok.yaml'}",
        "--manage-all-nodes=false",
        f"--manage-nodes-with-annotation-selector={key}={value}",
        f"--server-address={HOST}:{ports['kwok']}",
        f"--cidr={POD_CIDR}",
    ]


# ---------------------------------------------------------------- credentials


def _ensure_credentials(lay: Layout) -> str:
    """Create the CA, serving cert, SA key pair and admin token once; reuse them after."""
    pki = lay.pki
    wanted = [
        pki / n for n in ("ca.crt", "ca.key", "apiserver.crt", "apiserver.key", "sa.key", "sa.pub")
    ]
    if not (all(p.exists() for p in wanted) and lay.tokens.exists()):
        if shutil.which("openssl") is None:
            raise ClusterError("openssl not found on PATH (apt-get install openssl)")
        _log("generating CA, apiserver certificate, service-account keys and admin token")
        shutil.rmtree(pki, ignore_errors=True)
        pki.mkdir(parents=True, mode=0o700)
        _make_pki(pki)
        token = secrets.token_hex(32)
        lay.tokens.write_text(f'{token},admin,admin,"system:masters"\n')
        lay.tokens.chmod(0o600)
    return lay.tokens.read_text().split(",", 1)[0].strip()


def _make_pki(pki: Path) -> None:
    cnf = pki / "openssl.cnf"
    cnf.write_text(OPENSSL_CNF)
    rsa = ("-newkey", "rsa:2048", "-nodes")
    _openssl(
        "req",
        "-x509",
        "-config",
        cnf,
        "-extensions",
        "ca",
        *rsa,
        "-days",
        "3650",
        "-subj",
        "/CN=reconciler-local-ca",
        "-keyout",
        pki / "ca.key",
        "-out",
        pki / "ca.crt",
    )
    _openssl(
        "req",
        "-new",
        "-config",
        cnf,
        *rsa,
        "-subj",
        "/CN=kube-apiserver",
        "-keyout",
        pki / "apiserver.key",
        "-out",
        pki / "apiserver.csr",
    )
    _openssl(
        "x509",
        "-req",
        "-in",
        pki / "apiserver.csr",
        "-CA",
        pki / "ca.crt",
        "-CAkey",
        pki / "ca.key",
        "-set_serial",
        f"0x{secrets.token_hex(16)}",
        "-days",
        "3650",
        "-extfile",
        cnf,
        "-extensions",
        "server",
        "-out",
        pki / "apiserver.crt",
    )
    _openssl(
        "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", pki / "sa.key"
    )
    _openssl("pkey", "-in", pki / "sa.key", "-pubout", "-out", pki / "sa.pub")
    for key in pki.glob("*.key"):
        key.chmod(0o600)


def _openssl(*args: str | Path) -> None:
    res = subprocess.run(["openssl", *map(str, args)], capture_output=True, text=True)
    if res.returncode != 0:
        raise ClusterError(f"openssl {args[0]} failed:\n{res.stderr}")


def _write_kubeconfig(cluster: Cluster) -> None:
    """Admin kubeconfig with the CA embedded, so it can be copied anywhere on this host."""
    ca = base64.b64encode(cluster.ca_file.read_bytes()).decode()
    text = f"""\
apiVersion: v1
kind: Config
clusters:
- name: reconciler-local
  cluster:
    server: {cluster.server}
    certificate-authority-data: {ca}
users:
- name: admin
  user:
    token: {cluster.token}
contexts:
- name: reconciler-local
  context:
    cluster: reconciler-local
    user: admin
    namespace: default
current-context: reconciler-local
"""
    tmp = cluster.kubeconfig.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.chmod(0o600)
    tmp.replace(cluster.kubeconfig)


# ---------------------------------------------------------------- nodes and CRDs


def _node_manifest(name: str) -> dict[str, object]:
    key, value = KWOK_SELECTOR
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {key: value, "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "type": "kwok",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
            },
        },
        "spec": {},
        "status": {"allocatable": NODE_RESOURCES, "capacity": NODE_RESOURCES},
    }


def _create_nodes(cluster: Cluster) -> None:
    """Register the fake nodes kwok manages and strip the admission-added not-ready taint.

    TaintNodesByCondition admission taints every new Node; normally the node
    lifecycle controller lifts it, but we do not run that controller.
    """
    for name in NODES:
        code, body = _api(cluster, "POST", "/api/v1/nodes", _node_manifest(name))
        if code not in (201, 409):
            raise ClusterError(f"creating node {name} failed: HTTP {code} {body}")
        code, body = _api(cluster, "PATCH", f"/api/v1/nodes/{name}", {"spec": {"taints": None}})
        if code != 200:
            raise ClusterError(f"removing taints from node {name} failed: HTTP {code} {body}")
    _log(f"registered fake nodes {', '.join(NODES)}")


def _create_storage_class(cluster: Cluster) -> None:
    """The default StorageClass; one that exists already is left as it is."""
    path = "/apis/storage.k8s.io/v1/storageclasses"
    code, body = _api(cluster, "POST", path, STORAGE_CLASS)
    if code not in (201, 409):
        raise ClusterError(
            f"creating StorageClass {STORAGE_CLASS['metadata']['name']} failed: HTTP {code} {body}"
        )


def _node_ready(cluster: Cluster, name: str) -> bool:
    code, node = _api(cluster, "GET", f"/api/v1/nodes/{name}")
    if code != 200 or node.get("spec", {}).get("taints"):
        return False
    conditions = node.get("status", {}).get("conditions", [])
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _crd_files() -> list[Path]:
    if not CRDS_DIR.is_dir():
        return []
    return sorted(
        p for p in CRDS_DIR.rglob("*") if p.is_file() and p.suffix in (".yaml", ".yml", ".json")
    )


def _crds_digest(files: list[Path]) -> str:
    digest = hashlib.sha256()
    for f in files:
        digest.update(str(f.relative_to(CRDS_DIR)).encode() + b"\0" + f.read_bytes() + b"\0")
    return digest.hexdigest()


def _apply_crds(cluster: Cluster, kubectl: str) -> str:
    """Apply everything under crds/ and wait until its CRDs are Established; return a digest."""
    files = _crd_files()
    if not files:
        return ""
    _log(f"applying {len(files)} file(s) from {CRDS_DIR}")
    out = _kubectl(
        cluster,
        kubectl,
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=reconciler-cluster",
        "-o",
        "name",
        *(f"--filename={f}" for f in files),
    )
    names = [n for n in out.split() if n.startswith("customresourcedefinition")]
    if names:
        _kubectl(
            cluster,
            kubectl,
            "wait",
            "--for=condition=Established",
            f"--timeout={TIMEOUT:.0f}s",
            *names,
        )
        _log(f"{len(names)} CRD(s) established")
    return _crds_digest(files)


def _sync_crds(cluster: Cluster, lay: Layout, kubectl: str) -> None:
    """Re-apply crds/ on a reused cluster only when the files changed since last apply."""
    state = _load_state(lay) or {}
    if _crds_digest(_crd_files()) != state.get("crds", ""):
        state["crds"] = _apply_crds(cluster, kubectl)
        _save_state(lay, state)


def _kubectl(cluster: Cluster, kubectl: str, *args: str) -> str:
    cmd = [kubectl, f"--kubeconfig={cluster.kubeconfig}", *args]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT + 30)
    if res.returncode != 0:
        raise ClusterError(f"{shlex.join(cmd)} failed:\n{res.stdout}{res.stderr}")
    return res.stdout


# ---------------------------------------------------------------- HTTP probes


def _open(req: urllib.request.Request, context: ssl.SSLContext | None) -> tuple[int, bytes]:
    """Fetch ignoring *_PROXY variables: every endpoint is on loopback."""
    handlers: list[urllib.request.BaseHandler] = [urllib.request.ProxyHandler({})]
    if context is not None:
        handlers.append(urllib.request.HTTPSHandler(context=context))
    try:
        with urllib.request.build_opener(*handlers).open(req, timeout=5) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def _http_ok(url: str, context: ssl.SSLContext | None = None, expect: bytes = b"ok") -> bool:
    try:
        code, body = _open(urllib.request.Request(url), context)
    except (OSError, http.client.HTTPException):
        return False
    return code == 200 and expect in body


def _https_ok(port: int) -> bool:
    """kcm/scheduler serve /healthz with a throwaway self-signed cert: skip verification."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return _http_ok(f"https://{HOST}:{port}/healthz", context)


def _etcd_healthy(port: int) -> bool:
    return _http_ok(f"http://{HOST}:{port}/health", expect=b'"health":"true"')


def _apiserver_ready(cluster: Cluster) -> bool:
    context = ssl.create_default_context(cafile=str(cluster.ca_file))
    return _http_ok(f"{cluster.server}/readyz", context)


def _api(cluster: Cluster, method: str, path: str, body: object = None) -> tuple[int, dict]:
    """Minimal JSON client for the few calls start-up makes (no kubectl round-trips)."""
    headers = {"Authorization": f"Bearer {cluster.token}", "Accept": "application/json"}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = (
            "application/merge-patch+json" if method == "PATCH" else "application/json"
        )
    req = urllib.request.Request(cluster.server + path, data=data, headers=headers, method=method)
    context = ssl.create_default_context(cafile=str(cluster.ca_file))
    try:
        code, raw = _open(req, context)
    except (OSError, http.client.HTTPException) as err:
        return 0, {"error": str(err)}
    try:
        return code, json.loads(raw or b"{}")
    except ValueError:
        return code, {"raw": raw.decode(errors="replace")}


# ---------------------------------------------------------------- processes


# The components this launcher process started, while it waits for them: a
# child's own exit status is the one sure sign that it died (a look at /proc
# through the pid file once took a live etcd for a dead one during start-up).
_CHILDREN: dict[str, subprocess.Popen[bytes]] = {}


def _spawn(lay: Layout, component: str, args: list[str]) -> int:
    """Start a component in its own session so it outlives us and dies as a group."""
    with open(lay.log(component), "wb") as log:
        proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=lay.root,
            start_new_session=True,
        )
    lay.pid_file(component).write_text(f"{proc.pid}\n")
    _CHILDREN[f"{lay.root}/{component}"] = proc
    return proc.pid


def _exited(lay: Layout, component: str) -> int | None:
    """The exit code of a component that died, or None while it runs."""
    proc = _CHILDREN.get(f"{lay.root}/{component}")
    if proc is not None:
        return proc.poll()
    return None if _pid_of(lay, component) is not None else -1


def _wait(lay: Layout, component: str, what: str, check: Callable[[], bool]) -> None:
    """Poll check until true; fail fast if the component died, else after TIMEOUT."""
    deadline = time.monotonic() + TIMEOUT
    while not check():
        code = _exited(lay, component)
        if code is not None:
            raise ClusterError(
                f"{component} exited (code {code}) while waiting for {what}", lay.log(component)
            )
        if time.monotonic() > deadline:
            raise ClusterError(
                f"timed out after {TIMEOUT:.0f}s waiting for {what}", lay.log(component)
            )
        time.sleep(0.1)


def _is_ours(pid: int, lay: Layout) -> bool:
    """A live component process started for this state dir (guards against pid reuse)."""
    try:
        exe = os.path.basename(os.readlink(f"/proc/{pid}/exe")).removesuffix(" (deleted)")
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False
    return (
        _is_component(exe, cmdline.split("\0"))
        and any(m in cmdline for m in lay.markers())
        and realnode.host.alive(pid)
    )


def _is_component(exe: str, argv: list[str]) -> bool:
    """One of our binaries, or a Python running provisioner.py (of this checkout)."""
    if exe in BINARIES:
        return True
    return exe.startswith("python") and argv[1:2] == [str(PROVISIONER_SCRIPT)]


def _pid_of(lay: Layout, component: str) -> int | None:
    try:
        pid = int(lay.pid_file(component).read_text())
    except (OSError, ValueError):
        return None
    return pid if _is_ours(pid, lay) else None


def _strays(lay: Layout) -> set[int]:
    """Our processes whose pid files were lost (e.g. a crashed launcher)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and _is_ours(int(entry.name), lay):
            found.add(int(entry.name))
    return found


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.getpgid(pid) == pid:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)


def _reap(pid: int) -> None:
    """Collect zombies when we are the parent (a long-lived pytest process)."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def _terminate(pids: set[int]) -> None:
    """SIGTERM each process group, SIGKILL what is left after STOP_GRACE."""
    everything = set(pids)
    for sig, grace in ((signal.SIGTERM, STOP_GRACE), (signal.SIGKILL, 2.0)):
        for pid in pids:
            _signal(pid, sig)
        deadline = time.monotonic() + grace
        while True:
            for pid in pids:
                _reap(pid)
            pids = {p for p in pids if realnode.host.alive(p)}
            if not pids or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        if not pids:
            break
    if pids:
        raise ClusterError(f"processes {sorted(pids)} survived SIGKILL")
    _await_reaped(everything)


def _await_reaped(pids: set[int], timeout: float = 3.0) -> None:
    """Give init a moment to reap the zombies, so `down; pgrep` shows nothing."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for pid in pids:
            _reap(pid)
        if not any(Path(f"/proc/{p}").exists() for p in pids):
            return
        time.sleep(0.05)


def _stop(lay: Layout) -> None:
    """Kill everything started for lay and remove runtime state (logs and PKI are kept)."""
    _stop_real_node(lay)
    pids = {p for c in COMPONENTS if (p := _pid_of(lay, c)) is not None} | _strays(lay)
    if pids:
        _log(f"stopping {len(pids)} process(es): {' '.join(map(str, sorted(pids)))}")
        _terminate(pids)
    runtime = (lay.state_file, lay.kubeconfig, lay.provisioner_ready)
    for path in (*runtime, *(lay.pid_file(c) for c in COMPONENTS)):
        path.unlink(missing_ok=True)
    shutil.rmtree(lay.scratch, ignore_errors=True)


# ---------------------------------------------------------------- state and helpers


def _recorded(lay: Layout) -> Cluster | None:
    """The cluster described by the state file, whether or not it is running."""
    state = _load_state(lay)
    if state is None or not lay.tokens.exists():
        return None
    return Cluster(
        kubeconfig=lay.kubeconfig,
        server=state["server"],
        token=lay.tokens.read_text().split(",", 1)[0].strip(),
        ca_file=lay.pki / "ca.crt",
        bin_dir=Path(state["bin_dir"]),
        state_dir=lay.root,
    )


def _healthy(lay: Layout) -> Cluster | None:
    cluster = _recorded(lay)
    if cluster is None or any(_pid_of(lay, c) is None for c in COMPONENTS):
        return None
    return cluster if lay.kubeconfig.exists() and _apiserver_ready(cluster) else None


def _load_state(lay: Layout) -> dict | None:
    try:
        return json.loads(lay.state_file.read_text())
    except (OSError, ValueError):
        return None


def _save_state(lay: Layout, state: dict) -> None:
    tmp = lay.state_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    tmp.replace(lay.state_file)


@contextlib.contextmanager
def _locked(lay: Layout) -> Iterator[None]:
    """Serialise up/down on one state dir (e.g. several pytest-xdist workers)."""
    lay.root.mkdir(parents=True, exist_ok=True)
    with open(lay.root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _layout(state_dir: Path | str | None) -> Layout:
    return Layout(Path(state_dir or DEFAULT_STATE_DIR).resolve())


def _bin_dir() -> Path:
    """Ask build.sh for the binaries; it prints the cached bin dir at once when built."""
    res = subprocess.run(["bash", str(BUILD_SH)], stdout=subprocess.PIPE, text=True)
    lines = res.stdout.strip().splitlines()
    if res.returncode != 0 or not lines:
        raise ClusterError(f"{BUILD_SH} failed (exit {res.returncode})")
    return Path(lines[-1])


def _ephemeral_floor() -> int:
    """The lowest port the kernel hands out as a client's source port."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _free_ports(n: int) -> list[int]:
    """Distinct free loopback ports below the ephemeral range (all held open
    together so none repeats).

    A port the kernel picks for us (bind to 0) is an ephemeral one, which any
    client may also get as its source port: a component restarted on it then
    found it taken ("address already in use"), and a client retrying a dead
    apiserver can even connect to itself on it. Below the range, only a
    listener can hold a port, and the bind below sees that.
    """
    low, high = 20000, min(_ephemeral_floor(), 32768)
    rng = random.Random()
    with contextlib.ExitStack() as stack:
        ports: list[int] = []
        while len(ports) < n:
            port = rng.randrange(low, high)
            if port in ports:
                continue
            sock = stack.enter_context(socket.socket())
            try:
                sock.bind((HOST, port))
            except OSError:
                continue
            ports.append(port)
        return ports


def _tail(path: Path, n: int = LOG_TAIL) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError as err:
        return f"(no log: {err})"


def _log(message: str) -> None:
    print(f"[cluster] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- CLI


def _print_status(lay: Layout) -> int:
    cluster = _healthy(lay)
    print(f"up {cluster.server} (KUBECONFIG={cluster.kubeconfig})" if cluster else "down")
    for c in COMPONENTS:
        pid = _pid_of(lay, c)
        if pid is not None or lay.pid_file(c).exists():
            print(f"  {c:<24} {f'pid {pid}' if pid else 'not running'}")
    node = realnode.Node.of(lay.root)
    if realnode.requested(node):
        found = realnode.state(node)
        why = "" if found.get("ready") else f" ({found.get('reason') or 'not started'})"
        print(
            f"  {'real node ' + realnode.NAME:<24} {'ready' if found.get('ready') else 'none'}{why}"
        )
        for role, image in realnode.images(node).items():
            print(f"    {role + ' image':<22} {image}")
    return 0 if cluster else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=DEFAULT_STATE_DIR,
        help="state directory (default: %(default)s)",
    )
    parser.add_argument(
        "command",
        choices=("up", "down", "status", "env", "fleet-up", "fleet-down", "leftovers"),
        help="leftovers: what the real node left on the host (exit 1 if anything)",
    )
    parser.add_argument(
        "--real-node",
        action="store_true",
        default=None,
        help=f"up: add the real node {realnode.NAME} (also {realnode.ENV_VAR}=1)",
    )
    args = parser.parse_args(argv)
    lay = _layout(args.state_dir)
    try:
        if args.command == "fleet-up":
            path = fleet_kubeconfig(
                # The real node, if asked for, joins the first only: one per host.
                {
                    name: up(state_dir, real_node=None if state_dir == DEFAULT_STATE_DIR else False)
                    for name, state_dir in FLEET.items()
                },
                FLEET_KUBECONFIG,
            )
            print(f"export KUBECONFIG={shlex.quote(str(path))}")
        elif args.command == "fleet-down":
            for state_dir in FLEET.values():
                down(state_dir)
        elif args.command == "up":
            cluster = up(lay.root, real_node=args.real_node)
            print(f"export KUBECONFIG={shlex.quote(str(cluster.kubeconfig))}")
        elif args.command == "down":
            down(lay.root)
        elif args.command == "status":
            return _print_status(lay)
        elif args.command == "leftovers":
            left = realnode.Node.of(lay.root).leftovers()
            print("\n".join(left) or "nothing left by the real node")
            return 1 if left else 0
        else:
            print(env_lines(lay))
    except ClusterError as err:
        _log(f"error: {err}")
        return 1
    return 0


def env_lines(lay: Layout) -> str:
    """What `eval "$(cluster.py env)"` runs: the cluster's kubeconfig, and the
    repository's virtualenv first on PATH, where `make deps` puts `reconciler`
    and `kubectl` (a fresh machine has neither elsewhere)."""
    venv_bin = Path(__file__).resolve().parents[2] / ".venv" / "bin"
    lines = [f"export KUBECONFIG={shlex.quote(str(lay.kubeconfig))}"]
    if venv_bin.is_dir():
        lines.append(f'export PATH={shlex.quote(str(venv_bin))}:"$PATH"')
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
