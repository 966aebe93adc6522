"""The Helm chart in dist/chart rendered by `helm template`, without a cluster:
what its values change in the objects of config/. tests/e2e/test_chart.py
checks that the default rendering equals the kustomize overlays and installs
it. helm is built from the Go module proxy and linked into .venv/bin by `make
helm`; `make test` requires it, as it requires promtool."""

from __future__ import annotations

import subprocess
from typing import Any

import yaml

from .test_manifests import CONFIG, ROOT, docs, tool

CHART = ROOT / "dist" / "chart"
METRICS = (
    "--set",
    "metrics.serviceMonitor.enable=true",
    "--set",
    "metrics.prometheusRule.enable=true",
)
FLOW = ("--set", "flowControl.enable=true")
FLOW_KINDS = {"FlowSchema", "PriorityLevelConfiguration"}
# Labels Helm adds or sets, which config/ does not carry or carries otherwise.
HELM_LABELS = {"app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "helm.sh/chart"}


def helm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tool("helm", "make helm"), *args], capture_output=True, text=True, timeout=120
    )


def render(
    *values: str, release: str = "reconciler", namespace: str = "reconciler-system"
) -> dict[tuple[str, str], dict[str, Any]]:
    out = helm("template", release, str(CHART), "-n", namespace, *values)
    assert out.returncode == 0, out.stderr
    return {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(out.stdout) if d}


def without_helm_labels(obj: dict[str, Any]) -> dict[str, Any]:
    labels = obj["metadata"].get("labels", {})
    for key in HELM_LABELS:
        labels.pop(key, None)
    return obj


def config_rules() -> dict[str, Any]:
    return yaml.safe_load((CONFIG / "prometheus" / "rules.yaml").read_text())["spec"]


def test_the_charts_rules_are_config_prometheus_rules():
    chart = (CHART / "files" / "prometheus-rules.yaml").read_text()
    assert chart == (CONFIG / "prometheus" / "rules.yaml").read_text()


def test_monitor_and_rule_carry_the_labels_prometheus_selects_them_by():
    plain = render(*METRICS)
    labelled = render(
        *METRICS,
        "--set",
        "metrics.serviceMonitor.labels.release=kube-prometheus-stack",
        "--set",
        "metrics.prometheusRule.labels.team=platform",
    )
    for kind, added in (
        ("ServiceMonitor", {"release": "kube-prometheus-stack"}),
        ("PrometheusRule", {"team": "platform"}),
    ):
        before = plain[(kind, "reconciler")]["metadata"]["labels"]
        assert labelled[(kind, "reconciler")]["metadata"]["labels"] == before | added, kind
        assert not set(added) & set(before)


def test_runbook_urls_are_repository_paths_unless_a_base_url_is_given():
    assert render(*METRICS)[("PrometheusRule", "reconciler")]["spec"] == config_rules()
    base = "https://git.example.com/platform/reconciler/blob/v0.2.0/docs/operations.md"
    spec = render(*METRICS, "--set", f"metrics.prometheusRule.runbookBaseURL={base}")[
        ("PrometheusRule", "reconciler")
    ]["spec"]
    alerts = [r for g in spec["groups"] for r in g["rules"] if "alert" in r]
    assert len(alerts) == sum(1 for g in config_rules()["groups"] for r in g["rules"])
    for alert in alerts:
        assert alert["annotations"]["runbook_url"] == f"{base}#{alert['alert'].lower()}"


def test_rules_select_what_the_release_names():
    """The scrape job is the metrics Service's name; the CronJob is the release's."""
    rendered = render(*METRICS, release="nightly", namespace="ops")
    assert ("Service", "nightly-metrics") in rendered
    spec = rendered[("PrometheusRule", "nightly")]["spec"]
    exprs = "\n".join(r["expr"] for g in spec["groups"] for r in g["rules"])
    for name in ('job="nightly-metrics"', 'cronjob="nightly"', 'namespace="ops"'):
        assert name in exprs
    for name in ("reconciler-metrics", "reconciler-system", 'cronjob="reconciler"'):
        assert name not in exprs
    for group in spec["groups"]:
        for rule in group["rules"]:
            rule["expr"] = (
                rule["expr"]
                .replace('"nightly-metrics"', '"reconciler-metrics"')
                .replace('cronjob="nightly"', 'cronjob="reconciler"')
                .replace('namespace="ops"', 'namespace="reconciler-system"')
            )
    assert spec == config_rules()


def test_flow_control_is_off_by_default_and_as_config_flowcontrol_when_on():
    assert not {kind for kind, _ in render() if kind in FLOW_KINDS}
    chart = {
        key: without_helm_labels(obj) for key, obj in render(*FLOW).items() if key[0] in FLOW_KINDS
    }
    config = {
        (d["kind"], d["metadata"]["name"]): without_helm_labels(d)
        for d in docs("flowcontrol/flowcontrol.yaml")
    }
    assert chart == config


def test_flow_schemas_name_the_releases_service_account():
    rendered = render(*FLOW, release="nightly", namespace="ops")
    levels = {name for kind, name in rendered if kind == "PriorityLevelConfiguration"}
    assert levels == {"nightly", "nightly-leases"}
    for name in ("nightly", "nightly-leases"):
        spec = rendered[("FlowSchema", name)]["spec"]
        assert spec["priorityLevelConfiguration"]["name"] == name
        (rule,) = spec["rules"]
        sa = {"name": "nightly", "namespace": "ops"}
        assert rule["subjects"] == [{"kind": "ServiceAccount", "serviceAccount": sa}]
    assert rendered[("ServiceAccount", "nightly")]["metadata"]["namespace"] == "ops"


def test_helm_lint_accepts_the_new_values():
    out = helm(
        "lint",
        "--strict",
        str(CHART),
        *METRICS,
        *FLOW,
        "--set",
        "metrics.serviceMonitor.labels.release=kube-prometheus-stack",
        "--set",
        "metrics.prometheusRule.labels.release=kube-prometheus-stack",
        "--set",
        "metrics.prometheusRule.runbookBaseURL=https://git.example.com/docs/operations.md",
    )
    assert out.returncode == 0, out.stdout + out.stderr
