"""The kustomize overlays of config/ on the local control plane, as
`kubectl apply -k` and `make deploy` use them: they build, pass a server-side
dry-run, meet the restricted Pod Security Standard, and the daemon overlay's
pod spec reconciles for real. There is no image registry here, so the
Deployment's command runs on the host with the overlay's ServiceAccount token,
its arguments and environment taken from the rendered manifest."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler import __version__

from .conftest import ROOT, Kubectl, free_port, owned, probe, refused_requests, wait_for
from .test_redis import pods

DEPLOY = ROOT / "hack" / "deploy.sh"
SYSTEM_NS = "reconciler-system"
OVERLAYS = {
    "config/cronjob": {
        "Namespace",
        "CustomResourceDefinition",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "CronJob",
    },
    "config/daemon": {
        "Namespace",
        "CustomResourceDefinition",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Deployment",
        "Service",
    },
    "config/daemon-sharded": {
        "Namespace",
        "CustomResourceDefinition",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Deployment",
        "Service",
        "PodDisruptionBudget",
    },
}


def deploy(kubectl: Kubectl, verb: str, overlay: str, img: str = "", *args: str) -> str:
    """hack/deploy.sh, as `make deploy OVERLAY=... IMG=...` runs it."""
    env = {**os.environ, "OVERLAY": overlay, "IMG": img, "KUBECONFIG": str(kubectl.kubeconfig)}
    out = subprocess.run(
        ["bash", str(DEPLOY), verb, *args], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert not warnings(out.stderr), out.stderr  # e.g. a pod that is not "restricted"
    return out.stdout


def warnings(stderr: str) -> list[str]:
    """kubectl's warnings, but the one about the CRDs: the test cluster creates
    them with a server-side apply, which a client-side apply then notes once."""
    return [
        line
        for line in stderr.splitlines()
        if line.startswith("Warning") and "last-applied-configuration annotation" not in line
    ]


def rendered(kubectl: Kubectl, overlay: str, img: str = "") -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(deploy(kubectl, "render", overlay, img)) if d]


def workload(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (found,) = [d for d in docs if d["kind"] in ("CronJob", "Deployment")]
    return found


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    if obj["kind"] == "CronJob":
        return obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return obj["spec"]["template"]["spec"]


WORKLOADS = ("cronjob/reconciler", "deployment/reconciler", "service/reconciler-metrics")


@pytest.fixture
def no_workload_left(kubectl: Kubectl) -> Iterator[None]:
    """The overlays' workloads deleted when the test ends, so that the next
    test (or the next run on a kept cluster) applies them anew."""
    yield
    kubectl.run("delete", "-n", SYSTEM_NS, *WORKLOADS, "--ignore-not-found", "--wait=false")


def shipped_overlays(test: Callable[..., None]) -> Callable[..., None]:
    """A test that applies the shipped overlays for real: the CRDs, the
    ClusterRole other tests bind to, and the Lease and Role in reconciler-system."""
    serial = pytest.mark.serial("applies the shipped overlays to the cluster")
    return pytest.mark.usefixtures("no_workload_left")(serial(test))


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_overlay_builds_with_kubectl_kustomize(kubectl: Kubectl, overlay: str) -> None:
    docs = [
        d for d in yaml.safe_load_all(kubectl.run("kustomize", str(ROOT / overlay)).stdout) if d
    ]
    assert {d["kind"] for d in docs} == OVERLAYS[overlay]
    crds = {d["metadata"]["name"] for d in docs if d["kind"] == "CustomResourceDefinition"}
    assert crds == {"redis.myapp.demo.kubebuilder.io", "xcas.apps.xca.k8s.kb.cx"}
    (container,) = pod_spec(workload(docs))["containers"]
    assert container["image"] == f"reconciler:{__version__}"
    for d in docs:
        labels = d["metadata"].get("labels", {})
        if d["kind"] != "CustomResourceDefinition":
            assert labels.get("app.kubernetes.io/part-of") == "reconciler", d["kind"]
        if d["kind"] not in (
            "Namespace",
            "CustomResourceDefinition",
            "ClusterRole",
            "ClusterRoleBinding",
        ):
            assert d["metadata"]["namespace"] == SYSTEM_NS, d["kind"]


@pytest.mark.parametrize(
    ("img", "want"),
    [
        (
            "registry.example.com:5000/team/reconciler:1.2",
            "registry.example.com:5000/team/reconciler:1.2",
        ),
        ("registry.example.com/reconciler", f"registry.example.com/reconciler:{__version__}"),
        ("reg.example/r@sha256:" + "a" * 64, "reg.example/r@sha256:" + "a" * 64),
    ],
)
def test_make_deploy_sets_the_image_without_editing_config(
    kubectl: Kubectl, img: str, want: str
) -> None:
    before = (ROOT / "config" / "daemon" / "kustomization.yaml").read_text()
    for overlay in OVERLAYS:
        (container,) = pod_spec(workload(rendered(kubectl, overlay, img)))["containers"]
        assert container["image"] == want
    assert (ROOT / "config" / "daemon" / "kustomization.yaml").read_text() == before


@shipped_overlays
def test_overlays_apply_as_they_are_and_undeploy_keeps_the_crds(kubectl: Kubectl) -> None:
    # A server-side dry-run needs the namespace to exist: create it first.
    kubectl.run("apply", "-k", str(ROOT / "config" / "rbac"))
    dry = kubectl.run("apply", "-k", str(ROOT / "config" / "cronjob"), "--dry-run=server")
    assert "cronjob.batch/reconciler created (server dry run)" in dry.stdout
    assert not warnings(dry.stderr), dry.stderr
    # The CronJob overlay as the README gives it; the daemon's through make deploy.
    out = kubectl.run("apply", "-k", str(ROOT / "config" / "cronjob"))
    assert "cronjob.batch/reconciler created" in out.stdout and not warnings(out.stderr)
    dry = deploy(
        kubectl,
        "deploy",
        "config/daemon",
        f"registry.example.com/reconciler:{__version__}",
        "--dry-run=server",
    )
    assert "deployment.apps/reconciler created (server dry run)" in dry
    assert "service/reconciler-metrics created (server dry run)" in dry
    deploy(kubectl, "deploy", "config/daemon", f"registry.example.com/reconciler:{__version__}")
    image = kubectl.json("get", "deployment", "reconciler", "-n", SYSTEM_NS)["spec"]["template"][
        "spec"
    ]["containers"][0]["image"]
    assert image == f"registry.example.com/reconciler:{__version__}"

    gone = deploy(kubectl, "undeploy", "config/daemon", "", "--dry-run=server")
    assert (
        'deployment.apps "reconciler" deleted from reconciler-system namespace (server dry run)'
        in gone
    )
    assert 'namespace "reconciler-system" deleted (server dry run)' in gone
    assert "customresourcedefinition" not in gone


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_overlay_pods_meet_restricted_pod_security(kubectl: Kubectl, ns: str, overlay: str) -> None:
    kubectl.run("label", "namespace", ns, "pod-security.kubernetes.io/enforce=restricted")
    kubectl.run("create", "serviceaccount", "reconciler", "-n", ns)
    spec = pod_spec(workload(rendered(kubectl, overlay)))

    def create(spec: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": ns},
            "spec": spec,
        }
        return kubectl.run(
            "create", "--dry-run=server", "-f", "-", stdin=json.dumps(pod), check=False
        )

    ok = create(spec)
    assert ok.returncode == 0, ok.stderr
    del spec["containers"][0]["securityContext"]
    refused = create(spec)
    assert refused.returncode != 0 and 'violates PodSecurity "restricted' in refused.stderr


# A change after the samples converged: the daemon's next passes LIST
# metadata and GET the Redis that changed, which its role must allow.
SCALE_TO_2 = '{"spec":{"num":2}}'


def token_kubeconfig(
    kubectl: Kubectl, path: Path, account: str = "reconciler", namespace: str = SYSTEM_NS
) -> Path:
    """A ServiceAccount (the overlay's by default), as its pod would be: a
    TokenRequest token."""
    token = kubectl.run("create", "token", account, "-n", namespace, "--duration=1h").stdout.strip()
    admin = yaml.safe_load(kubectl.kubeconfig.read_text())
    admin["users"] = [{"name": u["name"], "user": {"token": token}} for u in admin["users"]]
    path.write_text(yaml.safe_dump(admin))
    return path


def host_command(deployment: dict[str, Any], port: int | None) -> tuple[list[str], dict[str, str]]:
    """The container's command line and environment, run on this host: the
    image's ENTRYPOINT is `reconciler`, fieldRefs are resolved as the kubelet
    would, and the metrics port (of a daemon) moves to a free loopback one."""
    (container,) = pod_spec(deployment)["containers"]
    args = list(container["args"])
    if port is not None:
        args[args.index("--metrics-address") + 1] = f"127.0.0.1:{port}"
    env = {}
    for var in container["env"]:
        if "value" in var:
            env[var["name"]] = var["value"]
        else:
            assert var["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
            env[var["name"]] = deployment["metadata"]["namespace"]
    return [sys.executable, "-m", "reconciler", *args], env


def start_on_host(
    deployment: dict[str, Any], kubeconfig: Path, ns: str, port: int
) -> subprocess.Popen[str]:
    """The Deployment's container as a host process with ``kubeconfig``,
    scoped to the test namespace ``ns`` (the other tests' objects are left
    alone), a pass a second, its output merged."""
    cmd, env = host_command(deployment, port)
    env |= {"RECONCILER_NAMESPACES": ns, "RECONCILER_INTERVAL": "1", "RECONCILER_JITTER": "0"}
    return owned(
        subprocess.Popen(
            [*cmd, "--kubeconfig", str(kubeconfig)],
            env={**os.environ, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
    )


def sync_on_host(cronjob: dict[str, Any], kubeconfig: Path, ns: str) -> list[dict[str, Any]]:
    """The CronJob's container run on this host as a cron line would, pass
    after pass until one plans nothing, scoped to ``ns``: each pass's summary."""
    cmd, env = host_command(cronjob, None)
    env |= {"RECONCILER_NAMESPACES": ns}
    summaries = []
    for _ in range(15):
        done = subprocess.run(
            [*cmd, "--kubeconfig", str(kubeconfig), "-o", "json"],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        summaries.append(json.loads(done.stdout))
        if summaries[-1]["planned"] == 0:
            return summaries
        time.sleep(0.5)  # kwok makes the pods Running, then Ready
    raise AssertionError(f"no pass planned nothing: {[s['actions'] for s in summaries]}")


def refused_in(summaries: list[dict[str, Any]]) -> list[str]:
    """Requests answered 401 or 403, from the passes' summaries."""
    codes = (s["api_requests_by_code"] for s in summaries)
    return [k for c in codes for k, n in c.items() if k.endswith((" 401", " 403")) and n]


@shipped_overlays
def test_cronjob_overlay_syncs_the_samples_with_its_service_account(
    kubectl: Kubectl, ns: str, tmp_path: Path
) -> None:
    cronjob = workload(rendered(kubectl, "config/cronjob"))
    deploy(kubectl, "deploy", "config/cronjob")
    kubectl.run("apply", "-k", str(ROOT / "config" / "samples"), "-n", ns)
    summaries = sync_on_host(cronjob, token_kubeconfig(kubectl, tmp_path / "sa"), ns)
    assert sum(s["api_writes"] for s in summaries) > 0 and refused_in(summaries) == []
    redis = kubectl.json("get", "redis", "redis-sample", "-n", ns)
    assert redis["status"]["state"] == "Ready"


@shipped_overlays
def test_daemon_overlay_converges_the_samples_with_its_service_account(
    kubectl: Kubectl, ns: str, tmp_path: Path
) -> None:
    docs = rendered(kubectl, "config/daemon")
    deploy(kubectl, "deploy", "config/daemon")
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    port = free_port()
    proc = start_on_host(deployment, token_kubeconfig(kubectl, tmp_path / "sa"), ns, port)
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    try:
        ready = container["readinessProbe"]["httpGet"]["path"]
        wait_for(lambda: probe(port, ready) == 200, what="the readiness probe", timeout=60)
        kubectl.run("apply", "-k", str(ROOT / "config" / "samples"), "-n", ns)

        def converged() -> bool:
            redis = kubectl.json("get", "redis", "redis-sample", "-n", ns)
            xca = kubectl.json("get", "xca", "xca-sample", "-n", ns)
            return (
                redis.get("status", {}).get("readyReplicas") == 3
                and redis["status"].get("state") == "Ready"
                and xca.get("status", {}).get("active") is True
            )

        wait_for(converged, what="the samples to converge", timeout=90)
        assert probe(port, container["livenessProbe"]["httpGet"]["path"]) == 200
        kubectl.run("patch", "redis", "redis-sample", "-n", ns, "--type=merge", "-p", SCALE_TO_2)
        wait_for(lambda: len(pods(kubectl, ns)) == 2, what="the scale-down", timeout=30)
        assert refused_requests(port) == {}
        lease = kubectl.json("get", "lease", "reconciler", "-n", SYSTEM_NS)["spec"]
        assert lease["holderIdentity"]
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out[-3000:]
    assert "forbidden" not in out.lower(), out[-3000:]
    kubectl.run("delete", "lease", "reconciler", "-n", SYSTEM_NS, "--ignore-not-found")


@shipped_overlays
def test_sharded_overlay_replicas_split_the_work_with_its_service_account(
    kubectl: Kubectl, ns: str, tmp_path: Path
) -> None:
    """Two of the sharded overlay's replicas, as host processes with its
    ServiceAccount: they hold every bucket between them, converge the
    samples with their bucket labels and status.shard, and on SIGTERM leave
    with no forbidden request and no member Lease behind."""
    docs = rendered(kubectl, "config/daemon-sharded")
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    assert deployment["spec"]["replicas"] == 3
    (role,) = [d for d in docs if d["kind"] == "Role"]
    assert role["rules"][0]["verbs"] == ["get", "list", "create", "update", "delete"]
    deploy(kubectl, "deploy", "config/daemon-sharded")
    kubeconfig = token_kubeconfig(kubectl, tmp_path / "sa")
    ports = [free_port() for _ in range(2)]
    procs = [start_on_host(deployment, kubeconfig, ns, port) for port in ports]
    members = "app.kubernetes.io/component=shard-member"
    try:
        kubectl.run("apply", "-k", str(ROOT / "config" / "samples"), "-n", ns)

        def converged() -> bool:
            redis = kubectl.json("get", "redis", "redis-sample", "-n", ns)
            xca = kubectl.json("get", "xca", "xca-sample", "-n", ns)
            pods = kubectl.json("get", "pods", "-n", ns)["items"]
            label = "myapp.demo.kubebuilder.io/shard-bucket"
            return (
                redis.get("status", {}).get("state") == "Ready"
                and bool(redis["status"].get("shard"))
                and xca.get("status", {}).get("active") is True
                and bool(xca["status"].get("shard"))
                and label in redis["metadata"].get("labels", {})
                and all(label in p["metadata"].get("labels", {}) for p in pods)
            )

        wait_for(converged, what="the samples to converge, labelled", timeout=90)
        leases = kubectl.json("get", "leases", "-n", SYSTEM_NS, "-l", members)["items"]
        assert len(leases) == 2
        kubectl.run("patch", "redis", "redis-sample", "-n", ns, "--type=merge", "-p", SCALE_TO_2)
        wait_for(lambda: len(pods(kubectl, ns)) == 2, what="the scale-down", timeout=30)
        assert [refused_requests(port) for port in ports] == [{}, {}]
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        outs = [proc.communicate(timeout=60)[0] for proc in procs]
    for proc, out in zip(procs, outs, strict=True):
        assert proc.returncode == 0, out[-3000:]
        assert "forbidden" not in out.lower(), out[-3000:]
    assert kubectl.json("get", "leases", "-n", SYSTEM_NS, "-l", members)["items"] == []
    kubectl.run(
        "delete", "leases", "-n", SYSTEM_NS, "-l", "app.kubernetes.io/component=shard-bucket"
    )
