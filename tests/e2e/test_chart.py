"""The Helm chart in dist/chart against the kustomize sources in config/: the
same objects where both have them, so the two never drift; then installed on
the local control plane, its daemon's pod spec run on the host with the
release's ServiceAccount (no registry here, as in test_deploy.py), and
uninstalled, which leaves the CRDs and so every Redis and Xca."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import ROOT, Kubectl, free_port, probe, refused_requests, wait_for
from .test_deploy import SCALE_TO_2, refused_in, start_on_host, sync_on_host, token_kubeconfig
from .test_redis import pods

CHART = ROOT / "dist" / "chart"
SYSTEM_NS = "reconciler-system"
# Labels Helm adds or changes, which kustomize's objects do not carry.
HELM_LABELS = {"app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "helm.sh/chart"}
MODES = {
    "cronjob": (["config/cronjob"], []),
    "daemon": (["config/daemon"], []),
    "daemon sharded": (
        ["config/daemon-sharded"],
        ["--set", "shard.enable=true", "--set", "replicas=3"],
    ),
    "daemon with metrics": (
        ["config/daemon", "config/prometheus"],
        [
            "--set",
            "metrics.serviceMonitor.enable=true",
            "--set",
            "metrics.prometheusRule.enable=true",
        ],
    ),
}


@pytest.fixture(scope="module")
def helm() -> str:
    found = shutil.which("helm")
    if found is None:
        if os.environ.get("REQUIRE_SYSTEM_TOOLS"):
            pytest.fail("helm is missing (make helm)")
        pytest.skip("helm is missing (make helm)")
    return found


def run_helm(helm: str, *args: str, kubeconfig: Path | None = None, check: bool = True) -> Any:
    env = {**os.environ}
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    out = subprocess.run([helm, *args], capture_output=True, text=True, env=env, timeout=120)
    if check:
        assert out.returncode == 0, f"helm {' '.join(args)}: {out.stderr}"
    return out


def by_name(text: str) -> dict[tuple[str, str], dict[str, Any]]:
    """Objects by (kind, name), without the labels only Helm sets."""
    found = {}
    for doc in yaml.safe_load_all(text):
        if not doc:
            continue
        labels = doc["metadata"].get("labels", {})
        for key in HELM_LABELS:
            labels.pop(key, None)
        found[(doc["kind"], doc["metadata"]["name"])] = doc
    return found


def test_chart_lints_in_every_mode(helm: str) -> None:
    for mode, (_, extra) in MODES.items():
        run_helm(helm, "lint", "--strict", str(CHART), "--set", f"mode={mode.split()[0]}", *extra)


@pytest.mark.parametrize("mode", sorted(MODES))
def test_chart_renders_the_objects_of_the_kustomize_overlays(
    helm: str, kubectl: Kubectl, mode: str
) -> None:
    overlays, extra = MODES[mode]
    values = ["--set", f"mode={mode.split()[0]}", *extra]
    chart = by_name(
        run_helm(
            helm, "template", "reconciler", str(CHART), "-n", SYSTEM_NS, "--include-crds", *values
        ).stdout
    )
    kustomized: dict[tuple[str, str], dict[str, Any]] = {}
    for overlay in overlays:
        kustomized |= by_name(kubectl.run("kustomize", str(ROOT / overlay)).stdout)
    # The release's namespace is Helm's to make (--create-namespace); all else is in both.
    assert set(kustomized) - set(chart) == {("Namespace", SYSTEM_NS)}
    assert set(chart) - set(kustomized) == set()
    for key, obj in chart.items():
        assert obj == kustomized[key], key


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (["--set", "mode=operator"], 'mode: "operator" is neither cronjob nor daemon'),
        (
            ["--set", "replicas=3", "--set", "leaderElection.enable=false"],
            "replicas: 3 replicas without leaderElection.enable or shard.enable would all",
        ),
        (
            ["--set", "mode=cronjob", "--set", "shard.enable=true"],
            "shard.enable needs mode: daemon",
        ),
        (
            ["--set", "mode=cronjob", "--set", "metrics.serviceMonitor.enable=true"],
            "the ServiceMonitor and the PrometheusRule need mode: daemon",
        ),
    ],
)
def test_chart_refuses_values_that_cannot_work(helm: str, values: list[str], message: str) -> None:
    out = run_helm(helm, "template", "reconciler", str(CHART), *values, check=False)
    assert out.returncode != 0 and message in out.stderr, out.stderr


def test_chart_values_reach_the_workloads(helm: str) -> None:
    rendered = by_name(
        run_helm(
            helm,
            "template",
            "nightly",
            str(CHART),
            "--set",
            "mode=cronjob",
            "--set",
            "schedule=0 3 * * *",
            "--set",
            "image.repository=registry.example.com/reconciler",
            "--set",
            "image.tag=1.2.3",
            "--set",
            "settings.namespaces=team-a\\,team-b",
        ).stdout
    )
    job = rendered[("CronJob", "nightly")]["spec"]
    assert job["schedule"] == "0 3 * * *"
    (container,) = job["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "registry.example.com/reconciler:1.2.3"
    assert {"name": "RECONCILER_NAMESPACES", "value": "team-a,team-b"} in container["env"]
    assert rendered[("ClusterRoleBinding", "nightly")]["subjects"][0]["name"] == "nightly"
    daemon = by_name(
        run_helm(
            helm, "template", "r", str(CHART), "--set", "interval=5", "--set", "replicas=1"
        ).stdout
    )[("Deployment", "r")]["spec"]
    assert daemon["replicas"] == 1
    (container,) = daemon["template"]["spec"]["containers"]
    assert {"name": "RECONCILER_INTERVAL", "value": "5"} in container["env"]


def test_helm_install_runs_and_uninstall_keeps_the_crds(
    helm: str, kubectl: Kubectl, ns: str, tmp_path: Path
) -> None:
    """A release beside the kustomize objects other tests apply: its own name
    and namespace, so that its ClusterRole does not collide with theirs."""
    release = f"rh-{uuid.uuid4().hex[:6]}"
    kubeconfig = kubectl.kubeconfig
    installed = run_helm(
        helm,
        "install",
        release,
        str(CHART),
        "-n",
        release,
        "--create-namespace",
        kubeconfig=kubeconfig,
    )
    assert "STATUS: deployed" in installed.stdout
    try:
        deployment = kubectl.json("get", "deployment", release, "-n", release)
        port = free_port()
        sa = token_kubeconfig(kubectl, tmp_path / "sa", release, release)
        proc = start_on_host(deployment, sa, ns, port)
        try:
            wait_for(lambda: probe(port, "/readyz") == 200, what="the readiness probe", timeout=60)
            kubectl.run("apply", "-k", str(ROOT / "config" / "samples"), "-n", ns)

            def converged() -> bool:
                redis = kubectl.json("get", "redis", "redis-sample", "-n", ns)
                return redis.get("status", {}).get("state") == "Ready"

            wait_for(converged, what="the samples to converge", timeout=90)
            lease = kubectl.json("get", "lease", "reconciler", "-n", release)["spec"]
            assert lease["holderIdentity"]
            patch = ("patch", "redis", "redis-sample", "-n", ns, "--type=merge", "-p")
            kubectl.run(*patch, SCALE_TO_2)
            wait_for(lambda: len(pods(kubectl, ns)) == 2, what="the scale-down", timeout=30)
            assert refused_requests(port) == {}
        finally:
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, out[-3000:]
        assert "forbidden" not in out.lower(), out[-3000:]
    finally:
        gone = run_helm(helm, "uninstall", release, "-n", release, kubeconfig=kubeconfig)
        kubectl.run("delete", "namespace", release, "--wait=false", check=False)
    assert f'release "{release}" uninstalled' in gone.stdout
    assert kubectl.run("get", "clusterrole", release, check=False).returncode != 0
    for crd in ("redis.myapp.demo.kubebuilder.io", "xcas.apps.xca.k8s.kb.cx"):
        kubectl.run("get", "crd", crd)
    kubectl.run("get", "redis", "redis-sample", "-n", ns)


def test_helm_cronjob_mode_syncs_with_its_service_account(
    helm: str, kubectl: Kubectl, ns: str, tmp_path: Path
) -> None:
    """The chart's CronJob, its container run on this host with the release's
    ServiceAccount: it converges the samples and is refused nothing."""
    release = f"rc-{uuid.uuid4().hex[:6]}"
    kubeconfig = kubectl.kubeconfig
    install = ("install", release, str(CHART), "-n", release, "--create-namespace")
    run_helm(helm, *install, "--set", "mode=cronjob", kubeconfig=kubeconfig)
    try:
        cronjob = kubectl.json("get", "cronjob", release, "-n", release)
        kubectl.run("apply", "-k", str(ROOT / "config" / "samples"), "-n", ns)
        sa = token_kubeconfig(kubectl, tmp_path / "sa", release, release)
        summaries = sync_on_host(cronjob, sa, ns)
        assert sum(s["api_writes"] for s in summaries) > 0 and refused_in(summaries) == []
    finally:
        run_helm(helm, "uninstall", release, "-n", release, kubeconfig=kubeconfig)
        kubectl.run("delete", "namespace", release, "--wait=false", check=False)
