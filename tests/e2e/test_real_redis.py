"""A Redis's data and readiness on the real node real-0, where a real
kubelet mounts the local provisioner's volumes (hack/cluster/provisioner.py)
and probes a real server.

One Redis with storage, three pods: a key written in each is there after an
image change (a second tag of the same image, added on the node's
containerd), after a pod deleted by hand, and after a scale 3 -> 1 -> 3, on
the same claims and volumes. Then its image becomes one that runs but never
serves (the node's pause image): the first pod replaced stays not Ready and
the rollout waits for it, the others untouched; the image put back, it
converges with its keys.

Skipped, with the cluster's reason, where there is no real node."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from typing import Any

import pytest

from hack.cluster import realnode

from .conftest import Kubectl, Reconciler, wait_for
from .test_real_node import PASSWORD, cli, node_images, placed, ready_pod

__all__ = ["node_images"]  # the fixture, shared with test_real_node

NAME, NUM = "d", 3
PODS = [f"{NAME}-{i}" for i in range(NUM)]
WATCHED = 12  # seconds of passes that leave the rollout waiting: two probe periods


@pytest.fixture(scope="module")
def second_tag(cluster: Any, node_images: dict[str, str]) -> str:
    """Another name of the node's Redis image, tagged on its containerd: an
    image change without a registry."""
    node = realnode.Node.of(cluster.state_dir)
    image = node_images["redis"]
    second = f"{image.rpartition(':')[0]}:e2e-second"
    ctr = ["ctr", "--address", str(node.socket), "-n", "k8s.io", "images"]
    subprocess.run([*ctr, "tag", "--force", image, second], check=True, capture_output=True)
    return second


def _pods(kubectl: Kubectl, ns: str) -> dict[str, dict[str, Any]]:
    items = kubectl.json("get", "pods", "-n", ns)["items"]
    return {p["metadata"]["name"]: p for p in items if not p["metadata"].get("deletionTimestamp")}


def _image(pod: dict[str, Any]) -> str:
    return str(pod["spec"]["containers"][0]["image"])


def _claims(kubectl: Kubectl, ns: str) -> dict[str, tuple[str, str]]:
    """Each claim's uid and volume, by name."""
    items = kubectl.json("get", "pvc", "-n", ns)["items"]
    return {c["metadata"]["name"]: (c["metadata"]["uid"], c["spec"]["volumeName"]) for c in items}


def _passes_until(reconciler: Reconciler, ns: str, check: Callable[[], Any], what: str) -> Any:
    def passed() -> Any:
        reconciler.sync(ns)
        return check()

    return wait_for(passed, what=what, timeout=120, interval=0.5)


def _serving(kubectl: Kubectl, ns: str, image: str) -> Callable[[], Any]:
    """Every pod Ready on real-0 with ``image``, and no other pod."""

    def check() -> dict[str, dict[str, Any]] | None:
        if set(_pods(kubectl, ns)) != set(PODS):
            return None
        found = {n: p for n in PODS if (p := ready_pod(kubectl, ns, n)) and _image(p) == image}
        return found if len(found) == NUM else None

    return check


def _keys_there(pods: dict[str, dict[str, Any]]) -> None:
    assert {n: cli(p["status"]["podIP"], "-a", PASSWORD, "GET", "k") for n, p in pods.items()} == {
        n: n for n in pods
    }


def _patch(kubectl: Kubectl, ns: str, spec: dict[str, Any]) -> None:
    kubectl.run("patch", "redis", NAME, "-n", ns, "--type=merge",
                "-p", json.dumps({"spec": spec}))  # fmt: skip


def test_keys_stay_on_their_claims_and_a_rollout_waits_for_a_server_that_answers(
    kubectl: Kubectl,
    reconciler: Reconciler,
    ns: str,
    node_images: dict[str, str],
    second_tag: str,
) -> None:
    image = node_images["redis"]
    # With no password, the server takes no client from off the pod (protected mode).
    kubectl.run("create", "secret", "generic", "auth", "-n", ns,
                f"--from-literal=password={PASSWORD}")  # fmt: skip
    auth = {"passwordSecret": {"name": "auth"}}
    spec = {"num": NUM, "image": image, "auth": auth, "storage": {"size": "64Mi"}}
    kubectl.run("apply", "-n", ns, "-f", "-", stdin=json.dumps(placed(NAME, spec)))
    pods = _passes_until(reconciler, ns, _serving(kubectl, ns, image), "3 pods Ready")
    assert {p["spec"]["nodeName"] for p in pods.values()} == {realnode.NAME}
    claims = _claims(kubectl, ns)
    assert set(claims) == {f"data-{n}" for n in PODS}
    for name, pod in pods.items():
        assert cli(pod["status"]["podIP"], "-a", PASSWORD, "SET", "k", name) == "OK"

    _patch(kubectl, ns, {"image": second_tag})
    pods = _passes_until(reconciler, ns, _serving(kubectl, ns, second_tag), "the new image")
    _keys_there(pods)

    gone = pods[PODS[1]]["metadata"]["uid"]
    kubectl.run("delete", "pod", PODS[1], "-n", ns)
    serving = _serving(kubectl, ns, second_tag)
    pods = _passes_until(
        reconciler,
        ns,
        lambda: (p := serving()) and p[PODS[1]]["metadata"]["uid"] != gone and p,
        f"{PODS[1]} made again",
    )
    _keys_there(pods)

    _patch(kubectl, ns, {"num": 1})
    _passes_until(reconciler, ns, lambda: set(_pods(kubectl, ns)) == {PODS[0]}, "one pod")
    _patch(kubectl, ns, {"num": NUM})
    pods = _passes_until(reconciler, ns, serving, "three pods again")
    _keys_there(pods)
    assert _claims(kubectl, ns) == claims

    # A server that never answers: the node's pause image runs, serves nothing.
    before = {n: p["metadata"]["uid"] for n, p in pods.items()}
    pause = node_images["pause"]
    _patch(kubectl, ns, {"image": pause})
    _passes_until(
        reconciler,
        ns,
        lambda: (p := _pods(kubectl, ns).get(PODS[0])) and _image(p) == pause and _running(p),
        f"{PODS[0]} running the pause image",
    )
    deadline = time.monotonic() + WATCHED
    while time.monotonic() < deadline:
        reconciler.sync(ns)
        now = _pods(kubectl, ns)
        assert ready_pod(kubectl, ns, PODS[0]) is None
        assert {n: now[n]["metadata"]["uid"] for n in PODS[1:]} == {n: before[n] for n in PODS[1:]}
        time.sleep(0.5)

    _patch(kubectl, ns, {"image": image})
    pods = _passes_until(reconciler, ns, _serving(kubectl, ns, image), "the image put back")
    _keys_there(pods)
    assert _claims(kubectl, ns) == claims


def _running(pod: dict[str, Any]) -> bool:
    """Its container runs (so not Ready means its server does not answer)."""
    statuses = pod.get("status", {}).get("containerStatuses") or []
    return bool(statuses) and all("running" in s.get("state", {}) for s in statuses)
