"""The optional NetworkPolicies of the reconciler's own pods (config/network-policy,
the chart's networkPolicy.*) and the optional PodMonitor of the Redis pods'
exporters (config/prometheus-redis, the chart's metrics.redisPodMonitor.*),
rendered by `kubectl kustomize` and `helm template` without a cluster: each
selects the pods it is for, in every mode, by the labels those pods carry, and
opens only the ports it names."""

from __future__ import annotations

import importlib
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.kinds.redis.identity import pod_labels

from . import builders
from .test_chart_render import CHART, helm, render, without_helm_labels
from .test_manifests import CONFIG, tool

Objects = dict[tuple[str, str], dict[str, Any]]

NETWORK_POLICY = CONFIG / "network-policy"
PROMETHEUS_REDIS = CONFIG / "prometheus-redis"
# The overlays the NetworkPolicies are for, and whether their pods serve /metrics.
OVERLAYS = {"daemon": True, "daemon-sharded": True, "cronjob": False}
# The chart's modes, as (values, serves /metrics).
MODES: dict[str, tuple[tuple[str, ...], bool]] = {
    "daemon": ((), True),
    "daemon sharded": (("--set", "shard.enable=true", "--set", "replicas=3"), True),
    "cronjob": (("--set", "mode=cronjob"), False),
}
ENABLE = ("--set", "networkPolicy.enable=true")
POD_MONITOR = ("--set", "metrics.redisPodMonitor.enable=true")
PLACEHOLDER_NAMESPACE = "monitoring"


def kustomize(path: Path) -> Objects:
    out = subprocess.run(
        [tool("kubectl"), "kustomize", str(path)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(out.stdout) if d}


def of_kind(objects: Objects, kind: str) -> dict[str, dict[str, Any]]:
    return {name: obj for (k, name), obj in objects.items() if k == kind}


def pod_templates(objects: Objects) -> list[tuple[str, dict[str, Any]]]:
    """(namespace, pod template) of each Deployment and CronJob."""
    found = []
    for (kind, _), obj in objects.items():
        if kind == "Deployment":
            found.append((obj["metadata"]["namespace"], obj["spec"]["template"]))
        elif kind == "CronJob":
            job = obj["spec"]["jobTemplate"]["spec"]
            found.append((obj["metadata"]["namespace"], job["template"]))
    assert found, "no workload rendered"
    return found


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A label selector as the apiserver reads it; {} selects everything."""
    assert set(selector) <= {"matchLabels", "matchExpressions"}, selector
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expr in selector.get("matchExpressions", []):
        key, op, values = expr["key"], expr["operator"], expr.get("values", [])
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[op]
        if not ok:
            return False
    return True


def policies_for(objects: Objects, namespace: str, labels: dict[str, str]) -> set[str]:
    return {
        name
        for name, policy in of_kind(objects, "NetworkPolicy").items()
        if policy["metadata"]["namespace"] == namespace
        and selects(policy["spec"]["podSelector"], labels)
    }


def metrics_port(objects: Objects) -> int:
    """The daemon container's port named metrics."""
    (deployment,) = of_kind(objects, "Deployment").values()
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    (port,) = [p for p in container["ports"] if p["name"] == "metrics"]
    assert port["protocol"] == "TCP"
    return int(port["containerPort"])


def assert_allows_only_the_apiserver_and_dns(policy: dict[str, Any], api_ports: set[int]) -> None:
    spec = policy["spec"]
    assert set(spec["policyTypes"]) == {"Ingress", "Egress"}
    # No ingress rule: nothing may connect but what another policy allows.
    assert not spec.get("ingress")
    api, dns = spec["egress"]
    # The apiserver at any address (its address is the cluster's), on its ports only.
    assert "to" not in api
    assert {(p["protocol"], p["port"]) for p in api["ports"]} == {("TCP", p) for p in api_ports}
    (peer,) = dns["to"]
    assert peer["namespaceSelector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": "kube-system"}
    }
    assert selects(peer["podSelector"], {"k8s-app": "kube-dns"})
    assert {(p["protocol"], p["port"]) for p in dns["ports"]} == {("UDP", 53), ("TCP", 53)}
    # An egress rule without ports, or without peers and ports, would allow much more.
    for rule in spec["egress"]:
        assert rule.get("ports"), rule
        assert all(p.get("port") for p in rule["ports"]), rule


def assert_metrics_from(policy: dict[str, Any], port: int, namespaces: dict[str, Any]) -> None:
    spec = policy["spec"]
    assert spec["policyTypes"] == ["Ingress"]
    assert "egress" not in spec
    (rule,) = spec["ingress"]
    assert rule["from"] == [{"namespaceSelector": namespaces}]
    assert rule["ports"] == [{"protocol": "TCP", "port": port}]


# ------------------------------------------------------- config/network-policy


def test_network_policy_is_a_kustomization_of_two_policies_in_the_pods_namespace():
    policies = of_kind(kustomize(NETWORK_POLICY), "NetworkPolicy")
    assert set(policies) == {"reconciler", "reconciler-metrics"}
    assert kustomize(NETWORK_POLICY).keys() == {("NetworkPolicy", n) for n in policies}
    for policy in policies.values():
        assert policy["metadata"]["namespace"] == "reconciler-system"


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_network_policies_select_the_pods_of_each_overlay(overlay: str):
    policies = kustomize(NETWORK_POLICY)
    for namespace, template in pod_templates(kustomize(CONFIG / overlay)):
        chosen = policies_for(policies, namespace, template["metadata"]["labels"])
        expected = {"reconciler", "reconciler-metrics"} if OVERLAYS[overlay] else {"reconciler"}
        assert chosen == expected, overlay


def test_network_policies_leave_the_redis_pods_alone():
    """The Redis pods are the users' (issue 68: a policy of their own, on request)."""
    labels = pod_labels(builders.redis(name="cache"))
    for namespace in ("reconciler-system", "default"):
        assert policies_for(kustomize(NETWORK_POLICY), namespace, labels) == set()


def test_network_policy_egress_is_the_apiserver_and_dns():
    policy = kustomize(NETWORK_POLICY)[("NetworkPolicy", "reconciler")]
    assert_allows_only_the_apiserver_and_dns(policy, {443, 6443})


def test_only_the_named_namespace_reaches_the_daemons_metrics_port():
    daemon = kustomize(CONFIG / "daemon")
    port = metrics_port(daemon)
    # The port the metrics Service sends to, and the one the daemon listens on.
    (service,) = of_kind(daemon, "Service").values()
    (service_port,) = service["spec"]["ports"]
    assert service_port["targetPort"] == "metrics" and service_port["port"] == port
    (container,) = of_kind(daemon, "Deployment")["reconciler"]["spec"]["template"]["spec"][
        "containers"
    ]
    assert f":{port}" in container["args"]
    policy = kustomize(NETWORK_POLICY)[("NetworkPolicy", "reconciler-metrics")]
    namespaces = {"matchLabels": {"kubernetes.io/metadata.name": PLACEHOLDER_NAMESPACE}}
    assert_metrics_from(policy, port, namespaces)


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_network_policy_composes_with_each_overlay(overlay: str, tmp_path: Path):
    """An overlay of the user's own that lists both, as the kustomization says."""
    (tmp_path / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": [
                    os.path.relpath(CONFIG / overlay, tmp_path),
                    os.path.relpath(NETWORK_POLICY, tmp_path),
                ],
            }
        )
    )
    together = kustomize(tmp_path)
    assert together == kustomize(CONFIG / overlay) | kustomize(NETWORK_POLICY)


# ------------------------------------------------- the chart's networkPolicy.*


@pytest.mark.parametrize("mode", sorted(MODES))
def test_chart_renders_no_network_policy_unless_enabled(mode: str):
    values, _ = MODES[mode]
    assert of_kind(render(*values), "NetworkPolicy") == {}


@pytest.mark.parametrize("mode", sorted(MODES))
def test_chart_network_policies_are_config_network_policy_s(mode: str):
    """The same objects, but for Helm's labels; cronjob mode has no metrics port."""
    values, serves_metrics = MODES[mode]
    chart = {
        name: without_helm_labels(obj)
        for name, obj in of_kind(render(*values, *ENABLE), "NetworkPolicy").items()
    }
    config = {
        name: without_helm_labels(obj)
        for name, obj in of_kind(kustomize(NETWORK_POLICY), "NetworkPolicy").items()
        if serves_metrics or name != "reconciler-metrics"
    }
    assert chart == config


@pytest.mark.parametrize("mode", sorted(MODES))
def test_chart_network_policies_select_the_releases_pods(mode: str):
    values, serves_metrics = MODES[mode]
    rendered = render(*values, *ENABLE, release="nightly", namespace="ops")
    policies = of_kind(rendered, "NetworkPolicy")
    assert set(policies) == ({"nightly", "nightly-metrics"} if serves_metrics else {"nightly"})
    for namespace, template in pod_templates(rendered):
        assert namespace == "ops"
        assert policies_for(rendered, namespace, template["metadata"]["labels"]) == set(policies)
    if serves_metrics:
        port = metrics_port(rendered)
        assert policies["nightly-metrics"]["spec"]["ingress"][0]["ports"][0]["port"] == port


def test_chart_network_policy_values_reach_the_policies():
    rendered = render(
        *ENABLE,
        "--set",
        "networkPolicy.metricsFrom.matchLabels.team=observability",
        "--set",
        "networkPolicy.apiServerPorts={443,8443}",
    )
    policies = of_kind(rendered, "NetworkPolicy")
    assert_allows_only_the_apiserver_and_dns(policies["reconciler"], {443, 8443})
    namespaces = {
        "matchLabels": {
            "kubernetes.io/metadata.name": PLACEHOLDER_NAMESPACE,
            "team": "observability",
        }
    }
    assert_metrics_from(policies["reconciler-metrics"], metrics_port(rendered), namespaces)


def test_chart_metrics_from_replaces_the_placeholder(tmp_path: Path):
    """As values.yaml says: Helm merges maps, so the placeholder goes with a null."""
    values = tmp_path / "values.yaml"
    values.write_text(
        yaml.safe_dump(
            {
                "networkPolicy": {
                    "enable": True,
                    "metricsFrom": {
                        "matchLabels": None,
                        "matchExpressions": [
                            {"key": "team", "operator": "In", "values": ["sre", "obs"]}
                        ],
                    },
                }
            }
        )
    )
    policy = render("-f", str(values))[("NetworkPolicy", "reconciler-metrics")]
    (peer,) = policy["spec"]["ingress"][0]["from"]
    assert peer["namespaceSelector"] == {
        "matchExpressions": [{"key": "team", "operator": "In", "values": ["sre", "obs"]}]
    }


@pytest.mark.parametrize(
    ("ports", "message"),
    [
        ("[]", "networkPolicy.apiServerPorts: name at least one port"),
        ("null", "networkPolicy.apiServerPorts: name at least one port"),
        ('[443, ""]', 'networkPolicy.apiServerPorts: "" is not a port number'),
        ("[443, https]", 'networkPolicy.apiServerPorts: "https" is not a port number'),
        ("[70000]", 'networkPolicy.apiServerPorts: "70000" is not a port number'),
    ],
)
def test_chart_refuses_api_server_ports_that_would_open_more(
    ports: str, message: str, tmp_path: Path
):
    values = tmp_path / "values.yaml"
    values.write_text(f"networkPolicy:\n  enable: true\n  apiServerPorts: {ports}\n")
    out = helm("template", "reconciler", str(CHART), "-f", str(values))
    assert out.returncode != 0
    assert message in out.stderr


# ---------------------------------------------- the Redis exporters' PodMonitor


def redis_monitor() -> dict[str, Any]:
    (monitor,) = of_kind(kustomize(PROMETHEUS_REDIS), "PodMonitor").values()
    return monitor


def test_pod_monitor_selects_the_redis_pods_in_every_namespace_and_nothing_else():
    monitor = redis_monitor()
    spec = monitor["spec"]
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["namespace"] == "reconciler-system"
    assert spec["namespaceSelector"] == {"any": True}
    for name in ("cache", "sessions"):
        assert selects(spec["selector"], pod_labels(builders.redis(name=name)))
    assert set(spec["selector"]["matchLabels"]) == {
        "app.kubernetes.io/name",
        "app.kubernetes.io/managed-by",
    }
    # Another operator's Redis, and our own pods, are not ours to scrape here.
    other = {"app.kubernetes.io/name": "redis", "app.kubernetes.io/managed-by": "Helm"}
    assert not selects(spec["selector"], other)
    for overlay in OVERLAYS:
        for _, template in pod_templates(kustomize(CONFIG / overlay)):
            assert not selects(spec["selector"], template["metadata"]["labels"])
    # The Redis's name goes onto its series.
    assert spec["podTargetLabels"] == ["app.kubernetes.io/instance"]


def test_pod_monitor_scrapes_the_exporters_named_port():
    (endpoint,) = redis_monitor()["spec"]["podMetricsEndpoints"]
    assert endpoint == {"port": "metrics", "path": "/metrics", "interval": "30s"}
    try:
        server = importlib.import_module("reconciler.kinds.redis.server")
    except ModuleNotFoundError:  # the exporter's container is not in this tree yet
        return
    if hasattr(server, "METRICS_PORT_NAME"):
        assert endpoint["port"] == server.METRICS_PORT_NAME


def test_config_prometheus_stays_the_daemons():
    """The PodMonitor is a directory of its own: config/prometheus and
    config/prometheus-cronjob, which the chart's metrics values mirror, keep
    what they had."""
    for path in ("prometheus", "prometheus-cronjob"):
        assert of_kind(kustomize(CONFIG / path), "PodMonitor") == {}
    assert kustomize(PROMETHEUS_REDIS).keys() == {("PodMonitor", "reconciler-redis")}


@pytest.mark.parametrize("mode", sorted(MODES))
def test_chart_pod_monitor_is_off_by_default_and_config_s_when_on(mode: str):
    """In either mode: Redis pods have exporters however the reconciler runs."""
    values, _ = MODES[mode]
    assert of_kind(render(*values), "PodMonitor") == {}
    chart = of_kind(render(*values, *POD_MONITOR), "PodMonitor")
    assert {n: without_helm_labels(o) for n, o in chart.items()} == {
        "reconciler-redis": without_helm_labels(redis_monitor())
    }


def test_chart_pod_monitor_carries_the_labels_prometheus_selects_it_by():
    plain = render(*POD_MONITOR, release="nightly", namespace="ops")
    labelled = render(
        *POD_MONITOR,
        "--set",
        "metrics.redisPodMonitor.labels.release=kube-prometheus-stack",
        release="nightly",
        namespace="ops",
    )
    before = plain[("PodMonitor", "nightly-redis")]
    assert before["metadata"]["namespace"] == "ops"
    after = labelled[("PodMonitor", "nightly-redis")]["metadata"]["labels"]
    assert after == before["metadata"]["labels"] | {"release": "kube-prometheus-stack"}


def test_helm_lint_accepts_the_network_and_pod_monitor_values():
    for mode in ("daemon", "cronjob"):
        out = helm(
            "lint",
            "--strict",
            str(CHART),
            "--set",
            f"mode={mode}",
            *ENABLE,
            *POD_MONITOR,
            "--set",
            "metrics.redisPodMonitor.labels.release=kube-prometheus-stack",
            "--set",
            "networkPolicy.metricsFrom.matchLabels.team=observability",
        )
        assert out.returncode == 0, out.stdout + out.stderr
