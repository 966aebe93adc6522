"""What we ship, rendered as users render it (`kubectl kustomize`, `helm
template`) and put on the real node real-0 with as few changes as a test
needs (`adapt`), for test_real_daemon.py and test_real_cronjob.py.

The changes: the objects move from reconciler-system to the test's own
namespace (so their Leases collide with no other test's and the shipped
Namespace's Pod Security labels still apply), the ClusterRoleBinding binds
that namespace's ServiceAccount under the namespace's name, the pod gets the
node's image, nodeSelector and toleration and RECONCILER_NAMESPACES, the
namespace of the test's Redis (so it touches no other test's objects), and a
CronJob is suspended (only the Jobs made from it run). Every other setting
is the shipped one, and those the tests rely on are asserted as shipped."""

from __future__ import annotations

import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import yaml

from hack.cluster import realnode_config

from .conftest import ROOT, Kubectl, NotYet

CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding"}
# config/rbac's, applied once a session (conftest): the CRDs are the cluster's too.
SHARED_ROLE = ("ClusterRole", "reconciler")
UID = 65532  # the image's USER and the manifests' runAsUser


def kustomized(overlay: str) -> list[dict[str, Any]]:
    out = subprocess.run(
        ["kubectl", "kustomize", str(ROOT / overlay)],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def workload(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (found,) = [d for d in docs if d["kind"] in ("Deployment", "CronJob")]
    return found


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    """A Deployment's or a CronJob's pod spec, itself (not a copy)."""
    if obj["kind"] == "CronJob":
        found = obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    else:
        found = obj["spec"]["template"]["spec"]
    assert isinstance(found, dict)
    return found


def assert_shipped(spec: dict[str, Any]) -> None:
    """The settings the tests rely on, as shipped, not added by `adapt`."""
    (container,) = spec["containers"]
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["runAsUser"] == UID, sc
    assert spec["securityContext"]["runAsUser"] == UID
    assert spec["enableServiceLinks"] is False
    assert "nodeSelector" not in spec and "tolerations" not in spec
    env = {e["name"] for e in container.get("env", [])}
    assert "RECONCILER_NAMESPACES" not in env and "KUBECONFIG" not in env, env


def adapt(docs: list[dict[str, Any]], wns: str, ns: str, image: str) -> list[dict[str, Any]]:
    """The rendered objects moved to ``wns``, their pod on real-0 running
    ``image`` and reconciling ``ns`` only (the module's docstring says why)."""
    out = []
    for doc in docs:
        kind, meta = doc["kind"], doc["metadata"]
        if kind == "CustomResourceDefinition" or (kind, meta["name"]) == SHARED_ROLE:
            continue
        if kind == "Namespace":
            meta["name"] = wns
        elif kind not in CLUSTER_SCOPED:
            meta["namespace"] = wns
        if kind == "ClusterRoleBinding" and meta["name"] == "reconciler":
            meta["name"] = wns  # kustomize's binds reconciler-system's account
        for subject in doc.get("subjects", []):
            subject["namespace"] = wns
        if kind in ("Deployment", "CronJob"):
            spec = pod_spec(doc)
            assert_shipped(spec)
            spec.update(realnode_config.placement())
            (container,) = spec["containers"]
            container["image"] = image
            container["env"].append({"name": "RECONCILER_NAMESPACES", "value": ns})
        if kind == "CronJob":
            doc["spec"]["suspend"] = True
        out.append(doc)
    return out


class Workload:
    """A test's own namespace for what it ships (``name``), and the
    cluster-scoped objects it applied, all deleted when the test ends."""

    def __init__(self, kubectl: Kubectl, ns: str) -> None:
        self.kubectl, self.name = kubectl, f"{ns}-sys"
        self.cluster_scoped: list[tuple[str, str]] = []

    def apply(self, docs: list[dict[str, Any]]) -> None:
        kinds = [(d["kind"], d["metadata"]["name"]) for d in docs]
        self.cluster_scoped += [(kind, name) for kind, name in kinds if kind in CLUSTER_SCOPED]
        self.kubectl.apply(yaml.safe_dump_all(docs))

    def close(self) -> None:
        for kind, name in reversed(self.cluster_scoped):
            self.kubectl.run("delete", kind, name, "--wait=false", check=False)


def placing(kubectl: Kubectl, ns: str) -> Iterator[Workload]:
    """The body of each test module's fixture ``placed``."""
    found = Workload(kubectl, ns)
    yield found
    found.close()


def pods(kubectl: Kubectl, ns: str, selector: str) -> list[dict[str, Any]]:
    return list(kubectl.json("get", "pods", "-n", ns, "-l", selector)["items"])


def ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def redis_ready(kubectl: Kubectl, ns: str, name: str) -> bool | NotYet:
    state = kubectl.json("get", "redis", name, "-n", ns).get("status", {}).get("state")
    return state == "Ready" or NotYet(f"state {state}")


def http(ip: str, port: int, path: str) -> tuple[int, str]:
    """A GET from the host to a pod on real-0, by its IP; 0 while nothing
    listens there."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"http://{ip}:{port}{path}", timeout=5) as resp:
            return int(resp.status), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError as exc:
        return 0, str(exc)
