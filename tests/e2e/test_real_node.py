"""What only a running process shows, on the real node real-0 (`make
cluster-up REAL_NODE=1`, CONTRIBUTING.md "The real node"): a Redis with a
password runs a real redis-server, which refuses a client without the
password and answers one with it, and its exporter, built here from its Go
module, logs in with that password (`redis_up 1`); `kubectl logs` and
`kubectl exec` reach the pod through the kubelet, which knows the apiserver by
its client certificate.

Skipped, with the cluster's reason, where there is no real node."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.request
from typing import Any

import pytest

from hack.cluster import realnode
from reconciler.kinds.redis.server import METRICS_PORT

from .conftest import Kubectl, Reconciler, wait_for

PASSWORD = "s3cret-real-node"


@pytest.fixture(scope="module")
def node_images(real_node: dict[str, str]) -> dict[str, str]:
    if shutil.which("redis-cli") is None:
        pytest.skip("redis-cli not installed (make deps installs redis-server)")
    return real_node


def _redis(name: str, image: str, exporter: str) -> dict[str, Any]:
    key, value = realnode.LABEL
    return {
        "apiVersion": "myapp.demo.kubebuilder.io/v1",
        "kind": "Redis",
        "metadata": {"name": name},
        "spec": {
            "num": 1,
            "image": image,
            "auth": {"passwordSecret": {"name": f"{name}-auth"}},
            "exporter": {"image": exporter},
            "nodeSelector": {key: value},
            "tolerations": [
                {"key": key, "operator": "Equal", "value": value, "effect": "NoSchedule"}
            ],
        },
    }


def _ready_pod(kubectl: Kubectl, ns: str, name: str) -> dict[str, Any] | None:
    pod = kubectl.json("get", "pod", "-n", ns, name)
    conditions = pod.get("status", {}).get("conditions", [])
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
    return pod if ready and pod["status"].get("podIP") else None


def _cli(ip: str, *args: str) -> str:
    cmd = ["redis-cli", "-h", ip, "-p", "6379", "--no-auth-warning", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip()


def _metrics(ip: str) -> str:
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(
        f"http://{ip}:{METRICS_PORT}/metrics", timeout=10
    ) as resp:
        return resp.read().decode()


def test_a_password_is_asked_for_by_a_real_redis_server(
    kubectl: Kubectl, reconciler: Reconciler, ns: str, node_images: dict[str, str]
) -> None:
    kubectl.run("create", "secret", "generic", "r-auth", "-n", ns,
                f"--from-literal=password={PASSWORD}")  # fmt: skip
    kubectl.run("apply", "-n", ns, "-f", "-", stdin=json.dumps(
        _redis("r", node_images["redis"], node_images["exporter"])))  # fmt: skip
    reconciler.sync(ns)

    pod = wait_for(lambda: _ready_pod(kubectl, ns, "r-0"), what="r-0 Ready", timeout=90)
    assert pod["spec"]["nodeName"] == realnode.NAME
    ip = pod["status"]["podIP"]

    assert _cli(ip, "PING").startswith("NOAUTH")
    assert _cli(ip, "-a", PASSWORD, "PING") == "PONG"
    assert "\nredis_up 1\n" in _metrics(ip)

    # Through the kubelet, as the apiserver's client certificate.
    logs = kubectl.run("logs", "-n", ns, "r-0", "-c", "redis").stdout
    assert "Ready to accept connections" in logs
    inside = kubectl.run("exec", "-n", ns, "r-0", "-c", "redis", "--",
                         "redis-cli", "--no-auth-warning", "-a", PASSWORD, "PING")  # fmt: skip
    assert inside.stdout.strip() == "PONG"
