"""What only a running process shows, on the real node real-0 (`make
cluster-up REAL_NODE=1`, CONTRIBUTING.md "The real node"): a Redis with a
password runs a real redis-server, which refuses a client without the
password and answers one with it, and its exporter, built here from its Go
module, logs in with that password (`redis_up 1`); `kubectl logs` and
`kubectl exec` reach the pod through the kubelet, which knows the apiserver by
its client certificate.

The same pod runs the server arguments the author-input work ran locally
(tests/unit/kinds/redis/test_server_real.py): a few of its accepted
directives, seen by `CONFIG GET`, the server behind its password and on its
port alone; a changed directive is seen after the roll, in the new pod. A
hostile directive the CRD would refuse, stored past admission (as an object
stored before the CRD's rules), is refused by the reconciler, naming its
field, and no pod is made.

Skipped, with the cluster's reason, where there is no real node."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import urllib.request
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from hack.cluster import realnode, realnode_config
from reconciler.kinds.redis.server import METRICS_PORT
from tests.unit.kinds.redis.test_server_real import ACCEPTED, HOSTILE

from .conftest import Kubectl, Reconciler, wait_for

PASSWORD = "s3cret-real-node"
# Some of test_server_real's accepted directives -> what CONFIG GET answers.
DIRECTIVES = {
    "maxmemory 100mb": ("maxmemory", "104857600"),
    "maxmemory-policy allkeys-lru": ("maxmemory-policy", "allkeys-lru"),
    "save 900 1 300 10": ("save", "900 1 300 10"),
    "appendonly yes": ("appendonly", "yes"),
    "slowlog-log-slower-than -1": ("slowlog-log-slower-than", "-1"),
    "  hz   10  ": ("hz", "10"),
    "latency-tracking-info-percentiles 50 99 99.9": (
        "latency-tracking-info-percentiles",
        "50 99 99.9",
    ),
}
CHANGED = ("maxmemory 200mb", ("maxmemory", "209715200"))
HOSTILE_DIRECTIVE = "maxmemory 1mb --port 7000"


@pytest.fixture(scope="module")
def node_images(real_node: dict[str, str]) -> dict[str, str]:
    if shutil.which("redis-cli") is None:
        pytest.skip("redis-cli not installed (make deps installs redis-server)")
    return real_node


def placed(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """A Redis of ``spec`` put on real-0 by its label and taint."""
    return {
        "apiVersion": "myapp.demo.kubebuilder.io/v1",
        "kind": "Redis",
        "metadata": {"name": name},
        "spec": {"num": 1, **spec, **realnode_config.placement()},
    }


def _redis(name: str, image: str, exporter: str, **spec: Any) -> dict[str, Any]:
    auth = {"passwordSecret": {"name": f"{name}-auth"}}
    return placed(name, {"image": image, "auth": auth, "exporter": {"image": exporter}, **spec})


def ready_pod(kubectl: Kubectl, ns: str, name: str) -> dict[str, Any] | None:
    """The pod if it is Ready with an address (None while absent or not)."""
    found = kubectl.run("get", "pod", "-n", ns, name, "-o", "json", check=False)
    if found.returncode != 0:
        return None
    pod = json.loads(found.stdout)
    conditions = pod.get("status", {}).get("conditions", [])
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
    return pod if ready and pod["status"].get("podIP") else None


def cli(ip: str, *args: str) -> str:
    cmd = ["redis-cli", "-h", ip, "-p", "6379", "--no-auth-warning", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip()


def _metrics(ip: str) -> str:
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(
        f"http://{ip}:{METRICS_PORT}/metrics", timeout=10
    ) as resp:
        return resp.read().decode()


def test_a_real_redis_server_asks_its_password_and_runs_its_directives(
    kubectl: Kubectl, reconciler: Reconciler, ns: str, node_images: dict[str, str], cluster: Any
) -> None:
    assert set(DIRECTIVES) <= set(ACCEPTED)
    kubectl.run("create", "secret", "generic", "r-auth", "-n", ns,
                f"--from-literal=password={PASSWORD}")  # fmt: skip
    doc = _redis("r", node_images["redis"], node_images["exporter"], config=list(DIRECTIVES))
    kubectl.run("apply", "-n", ns, "-f", "-", stdin=json.dumps(doc))
    hostile = {"image": node_images["redis"], "config": ["maxmemory 1mb", HOSTILE_DIRECTIVE]}
    _stored_past_admission(kubectl, cluster, ns, placed("hostile", hostile))
    open_ = placed("open", {"image": node_images["redis"]})  # no spec.auth
    kubectl.run("apply", "-n", ns, "-f", "-", stdin=json.dumps(open_))
    reconciler.sync(ns)

    pod = wait_for(lambda: ready_pod(kubectl, ns, "r-0"), what="r-0 Ready", timeout=90)
    assert pod["spec"]["nodeName"] == realnode.NAME
    ip = pod["status"]["podIP"]

    assert cli(ip, "PING").startswith("NOAUTH")
    assert cli(ip, "-a", PASSWORD, "PING") == "PONG"
    assert "\nredis_up 1\n" in _metrics(ip)
    assert config_get(ip, PASSWORD, DIRECTIVES.values()) == dict(DIRECTIVES.values())
    assert _listening(kubectl, ns, "r-0") == {6379, METRICS_PORT}

    # Through the kubelet, as the apiserver's client certificate.
    logs = kubectl.run("logs", "-n", ns, "r-0", "-c", "redis").stdout
    assert "Ready to accept connections" in logs
    inside = kubectl.run("exec", "-n", ns, "r-0", "-c", "redis", "--",
                         "redis-cli", "--no-auth-warning", "-a", PASSWORD, "PING")  # fmt: skip
    assert inside.stdout.strip() == "PONG"

    degraded = _condition(kubectl, ns, "hostile", "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "InvalidSpec"), degraded
    assert "spec.config[1]" in degraded["message"], degraded
    assert HOSTILE[HOSTILE_DIRECTIVE] in degraded["message"], degraded
    pods = kubectl.json("get", "pods", "-n", ns)["items"]
    assert sorted(p["metadata"]["name"] for p in pods) == ["open-0", "r-0"]

    # Without spec.auth, who may connect is spec.networkPolicy's to say: the
    # server's protected mode, on in Debian's build, would refuse every client
    # but loopback.
    opened = wait_for(lambda: ready_pod(kubectl, ns, "open-0"), what="open-0 Ready", timeout=60)
    assert cli(opened["status"]["podIP"], "PING") == "PONG"

    config = [d for d in DIRECTIVES if not d.startswith("maxmemory ")] + [CHANGED[0]]
    kubectl.run("patch", "redis", "r", "-n", ns, "--type=merge",
                "-p", json.dumps({"spec": {"config": config}}))  # fmt: skip
    old = pod["metadata"]["uid"]

    def rolled() -> dict[str, Any] | None:
        reconciler.sync(ns)
        new = ready_pod(kubectl, ns, "r-0")
        return new if new and new["metadata"]["uid"] != old else None

    new = wait_for(rolled, what="r-0 replaced and Ready", timeout=90, interval=0.5)
    assert config_get(new["status"]["podIP"], PASSWORD, [CHANGED[1]]) == dict([CHANGED[1]])


def config_get(ip: str, password: str, wanted: Any) -> dict[str, str]:
    """CONFIG GET of each directive's name, by name."""
    found: dict[str, str] = {}
    for name, _ in wanted:
        lines = cli(ip, "-a", password, "CONFIG", "GET", name).splitlines()
        found.update(zip(lines[::2], lines[1::2], strict=True))
    return found


def _listening(kubectl: Kubectl, ns: str, pod: str) -> set[int]:
    """The TCP ports the pod's network namespace listens on, read from its
    /proc (state 0A), not from what the server says of itself."""
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        text = kubectl.run("exec", "-n", ns, pod, "-c", "redis", "--", "cat", table).stdout
        for line in text.splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def _condition(kubectl: Kubectl, ns: str, name: str, kind: str) -> dict[str, Any]:
    conditions = kubectl.json("get", "redis", "-n", ns, name).get("status", {}).get("conditions")
    return next(c for c in conditions or () if c["type"] == kind)


def _stored_past_admission(kubectl: Kubectl, cluster: Any, ns: str, doc: dict[str, Any]) -> None:
    """``doc`` written into etcd as the apiserver stores a custom resource
    (JSON under /registry/<group>/<plural>/), past the CRD's schema and rules:
    a Redis stored before those rules, or by anything that skips admission.
    Only this namespace's object is touched."""
    name = doc["metadata"]["name"]
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    meta = {"name": name, "namespace": ns, "uid": str(uuid.uuid4()), "generation": 1,
            "creationTimestamp": now}  # fmt: skip
    value = json.dumps({**doc, "metadata": meta}).encode()
    key = f"/registry/myapp.demo.kubebuilder.io/redis/{ns}/{name}".encode()
    port = json.loads((cluster.state_dir / "state.json").read_text())["ports"]["etcd"]
    body = {"key": base64.b64encode(key).decode(), "value": base64.b64encode(value).decode()}
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v3/kv/put", data=json.dumps(body).encode(), method="POST"
    )
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=10):
        pass
    served = ("get", "redis", "-n", ns, name)
    wait_for(lambda: kubectl.run(*served, check=False).returncode == 0, what=f"{name} served")
