"""The Deployments we ship, run for real on the real node real-0
(CONTRIBUTING.md "The real node"): config/daemon, config/daemon-sharded and
the chart's (`helm template`), each rendered and changed as shipped.py says.
Each pod runs the reconciler's image as uid 65532 on a read-only root, with
the projected ServiceAccount token and no kubeconfig, becomes Ready by the
kubelet's readiness probe, answers /readyz from the host, takes its Lease,
converges a Redis (whose pod lands on kwok), and on SIGTERM (scaled to 0)
leaves the Lease free and says so.

Skipped, with the cluster's reason, where there is no real node."""

from __future__ import annotations

import errno
import json
import re
import subprocess
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml

from hack.cluster import realnode

from .conftest import Kubectl, NotYet, owned, wait_for
from .shipped import (
    UID,
    Workload,
    adapt,
    http,
    kustomized,
    placing,
    pod_spec,
    pods,
    ready,
    redis_ready,
    workload,
)
from .test_chart import CHART, helm, run_helm  # noqa: F401 (helm: a fixture)

MEMBERS = "app.kubernetes.io/component=shard-member"  # a sharded replica's own Lease
SELECTOR = "app.kubernetes.io/name=reconciler,app.kubernetes.io/component=controller"


@pytest.fixture
def placed(kubectl: Kubectl, ns: str, real_node: dict[str, str]) -> Iterator[Workload]:
    yield from placing(kubectl, ns)


def redis(kubectl: Kubectl, ns: str) -> None:
    """One Redis of one pod, on kwok's nodes: what a daemon converges."""
    doc = {
        "apiVersion": "myapp.demo.kubebuilder.io/v1",
        "kind": "Redis",
        "metadata": {"name": "r", "namespace": ns},
        "spec": {"num": 1},
    }
    kubectl.apply(json.dumps(doc))


# What the container sees of itself: its user, its root mount, where its
# credentials come from (no kubeconfig: the projected token, bound to the pod)
# and which variables the kubelet gave it.
INSIDE = """
import base64, json, os
mounts = [l.split() for l in open("/proc/self/mountinfo")]
root = [m for m in mounts if m[4] == "/"][-1]
try:
    open("/probe", "w")
    errno = 0
except OSError as exc:
    errno = exc.errno
sa = "/var/run/secrets/kubernetes.io/serviceaccount/"
claims = open(sa + "token").read().split(".")[1]
claims = json.loads(base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4)))
kube = os.path.join(os.path.expanduser("~"), ".kube", "config")
print(json.dumps({
    "uid": os.getuid(), "gid": os.getgid(), "root": root[5].split(","), "errno": errno,
    "kubeconfig": [os.environ.get("KUBECONFIG"), os.path.exists(kube)],
    "sub": claims["sub"], "pod": claims["kubernetes.io"].get("pod", {}).get("name"),
    "env": sorted(k for k in os.environ if k.startswith(("RECONCILER_", "KUBERNETES_SERVICE"))),
}))
"""


def inside(kubectl: Kubectl, ns: str, pod: str) -> dict[str, Any]:
    out = kubectl.run("exec", "-n", ns, pod, "--", "python", "-c", INSIDE).stdout
    return dict(json.loads(out))


def refused(ip: str, port: int) -> list[str]:
    """The daemon's requests the cluster refused (401, 403), by its /metrics."""
    code, text = http(ip, port, "/metrics")
    assert code == 200 and "reconciler_api_requests_total" in text, text[-500:]
    return re.findall(r'^reconciler_api_requests_total\{.*code="40[13]".*\} [1-9]', text, re.M)


class Follow:
    """`kubectl logs -f` of a Deployment's pods, each line prefixed with its
    pod, until their containers exit: what they log on SIGTERM is read after
    the pods are gone."""

    def __init__(self, kubectl: Kubectl, ns: str, names: set[str]) -> None:
        cmd = ["kubectl", "logs", "-f", "-n", ns, "-l", SELECTOR, "--prefix", "--tail=-1",
               "--max-log-requests=10", "--kubeconfig", str(kubectl.kubeconfig)]  # fmt: skip
        self.proc = owned(subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True))
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        wait_for(lambda: all(f"[pod/{n}/" in self.text() for n in names), what="each pod's log")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def text(self) -> str:
        return "".join(self.lines)

    def until_exit(self) -> str:
        self.proc.wait(timeout=90)
        self.reader.join(timeout=10)
        return self.text()


def run_deployment(
    kubectl: Kubectl, place: Workload, ns: str, docs: list[dict[str, Any]], *, links: bool
) -> None:
    """Apply ``docs`` (the Service before the Deployment), then prove what
    the module's docstring lists, and that scaling to 0 frees the Lease."""
    wns, deploy = place.name, workload(docs)
    spec = pod_spec(deploy)
    (container,) = spec["containers"]
    port = container["ports"][0]["containerPort"]
    probes = [container[kind]["httpGet"] for kind in ("readinessProbe", "livenessProbe")]
    assert [p["path"] for p in probes] == ["/readyz", "/healthz"], probes  # as shipped
    sharded = "--shard" in container["args"]
    redis(kubectl, ns)
    place.apply(docs)

    def each(check: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]] | NotYet:
        found = pods(kubectl, wns, SELECTOR)
        for pod in found:
            exited(kubectl, pod)
        good = [p for p in found if check(p)]
        phases = [p.get("status", {}).get("phase") for p in found]
        return good if len(good) == deploy["spec"]["replicas"] else NotYet(f"{phases}")

    def answers(pod: dict[str, Any]) -> bool:
        ip = pod.get("status", {}).get("podIP")
        return bool(ip) and http(ip, port, "/readyz") == (200, "ok\n")

    # From the host first: the kubelet probes every 10 s, its verdict is awaited last.
    running = wait_for(lambda: each(answers), what="/readyz 200 from each pod", timeout=90)
    names = {p["metadata"]["name"] for p in running}
    for pod in running:
        assert pod["spec"]["nodeName"] == realnode.NAME
        assert http(pod["status"]["podIP"], port, "/healthz")[0] == 200

    wait_for(lambda: redis_ready(kubectl, ns, "r"), what="the Redis converged", timeout=60)
    holders = {h.split("_")[0] for h in lease_holders(kubectl, wns, sharded)}  # pod_suffix
    assert holders == names if sharded else len(holders) == 1 and holders <= names, holders

    seen = inside(kubectl, wns, running[0]["metadata"]["name"])
    assert (seen["uid"], seen["gid"]) == (UID, UID)
    assert "ro" in seen["root"] and seen["errno"] == errno.EROFS, seen
    assert seen["kubeconfig"] == [None, False]
    assert seen["sub"] == f"system:serviceaccount:{wns}:{spec['serviceAccountName']}"
    assert seen["pod"] == running[0]["metadata"]["name"]  # a token bound to this pod
    assert "KUBERNETES_SERVICE_HOST" in seen["env"]
    assert ("RECONCILER_METRICS_SERVICE_HOST" in seen["env"]) is links, seen["env"]
    for pod in running:
        assert refused(pod["status"]["podIP"], port) == []

    wait_for(lambda: each(ready), what="each pod Ready by the kubelet's probe", timeout=30)

    follow = Follow(kubectl, wns, names)
    kubectl.run("scale", "deployment", deploy["metadata"]["name"], "-n", wns, "--replicas=0")
    logs = follow.until_exit()
    wait_for(lambda: not pods(kubectl, wns, SELECTOR), what="the pods gone", timeout=60)
    assert lease_holders(kubectl, wns, sharded) == []
    released = "shard: left; member lease" if sharded else f"released lease {wns}/reconciler"
    for name in names:
        own = "\n".join(line for line in logs.splitlines() if line.startswith(f"[pod/{name}/"))
        assert "stopped after" in own, own[-3000:]
        # The holder gives the Lease up. A standby stopped at the same moment
        # may take it in the instant it is free and give it up in turn.
        assert released in own or name not in holders, own[-3000:]
    assert '"level": "info"' in logs  # RECONCILER_LOG_FORMAT=json, as shipped
    assert "forbidden" not in logs.lower(), logs[-3000:]


def exited(kubectl: Kubectl, pod: dict[str, Any]) -> None:
    """Fail at once, with its log, if the pod's container has exited."""
    for status in pod.get("status", {}).get("containerStatuses", []):
        if ended := status.get("lastState", {}).get("terminated"):
            meta = pod["metadata"]
            logs = kubectl.run("logs", "-n", meta["namespace"], meta["name"], "--previous")
            raise AssertionError(f"{meta['name']} exited {ended['exitCode']}: {logs.stdout}")


def lease_holders(kubectl: Kubectl, wns: str, sharded: bool) -> list[str]:
    """Who holds the leader Lease, or the member Leases of a sharded one."""
    if sharded:
        found = kubectl.json("get", "leases", "-n", wns, "-l", MEMBERS)
        return [lease["spec"].get("holderIdentity", "") for lease in found["items"]]
    lease = kubectl.json("get", "lease", "reconciler", "-n", wns)
    return [h] if (h := lease["spec"].get("holderIdentity")) else []


def test_the_shipped_daemon_runs_on_a_real_node(
    kubectl: Kubectl, placed: Workload, ns: str, real_node: dict[str, str]
) -> None:
    docs = adapt(kustomized("config/daemon"), placed.name, ns, real_node["reconciler"])
    run_deployment(kubectl, placed, ns, docs, links=False)


def test_the_sharded_daemon_runs_on_a_real_node_beside_service_links(
    kubectl: Kubectl, placed: Workload, ns: str, real_node: dict[str, str]
) -> None:
    """With enableServiceLinks turned back on, so the kubelet gives the pods
    the RECONCILER_METRICS_* variables of the Service reconciler-metrics:
    the settings take them for what they are, not for settings."""
    docs = adapt(kustomized("config/daemon-sharded"), placed.name, ns, real_node["reconciler"])
    pod_spec(workload(docs))["enableServiceLinks"] = True
    run_deployment(kubectl, placed, ns, docs, links=True)


def test_the_charts_daemon_runs_on_a_real_node(
    kubectl: Kubectl, placed: Workload, ns: str, real_node: dict[str, str], request: Any
) -> None:
    binary = request.getfixturevalue("helm")  # test_chart's: skips where helm is missing
    release = f"rc-{ns.removeprefix('e2e-')}"
    out = run_helm(binary, "template", release, str(CHART), "-n", placed.name).stdout
    rendered = [d for d in yaml.safe_load_all(out) if d]
    # The chart makes no Namespace: the shipped one, restricted, as an admin would.
    namespace = next(d for d in kustomized("config/daemon") if d["kind"] == "Namespace")
    docs = adapt([namespace, *rendered], placed.name, ns, real_node["reconciler"])
    run_deployment(kubectl, placed, ns, docs, links=False)
