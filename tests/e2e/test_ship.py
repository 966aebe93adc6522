"""Issue 4, ship it three ways: the artefacts in config/, systemd/ and the
Dockerfile, exercised against the local control plane as an operator would
use them. A manifest that only parses proves little; these tests reconcile
as the shipped ServiceAccount, dry-run the workloads on the server, speak
sd_notify with the daemon. The image itself is built and run in test_image.py."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.kinds.redis.identity import GROUP as REDIS_GROUP
from reconciler.kinds.xca import GROUP as XCA_GROUP

from ..unit.test_manifests import (
    NAMED_RULES,
    RULES,
)
from .conftest import ROOT, Kubectl, Reconciler, wait_for
from .test_redis import FINALIZER, pods, redis_yaml, settled

CONFIG = ROOT / "config"
SA_NS = "reconciler-system"
SA_USER = f"system:serviceaccount:{SA_NS}:reconciler"


def redis_with(ns: str, spec: str, name: str = "r") -> str:
    return f"""
apiVersion: myapp.demo.kubebuilder.io/v1
kind: Redis
metadata: {{name: {name}, namespace: {ns}}}
spec: {spec}
"""


# ---------------------------------------------------------------- the CRDs


def test_samples_and_the_schema_edges_not_covered_elsewhere(kubectl: Kubectl, ns: str):
    kubectl.run("apply", "-n", ns, "-k", str(CONFIG / "samples"))

    def dry_run(spec: str) -> subprocess.CompletedProcess[str]:
        return kubectl.run(
            "apply", "--dry-run=server", "-f", "-", stdin=redis_with(ns, spec), check=False
        )

    digest = "a" * 64
    for good in (
        "{image: redis:7.2-alpine}",
        f"{{image: 'registry.example.com:5000/team/redis:7.2@sha256:{digest}'}}",
        "{num: 100, port: 6370}",
    ):
        ok = dry_run(good)
        assert ok.returncode == 0, f"{good}: {ok.stderr}"
    for bad, field, why in (
        ("{image: 'Redis:Latest'}", "spec.image", "should match"),
        ("{image: 'redis:7 alpine'}", "spec.image", "should match"),
        ("{image: 'redis:'}", "spec.image", "should match"),
        ("{num: 101}", "spec.num", "less than or equal to 100"),
        ("{num: three}", "spec.num", "must be of type integer"),
        ("{image: 5}", "spec.image", "must be of type string"),
    ):
        refused = dry_run(bad)
        assert refused.returncode != 0, f"{bad} was accepted"
        assert field in refused.stderr and why in refused.stderr, refused.stderr
    # As JSON: kubectl reads a document that starts with "{" as JSON, not YAML.
    bad_xca = kubectl.apply(
        json.dumps(
            {
                "apiVersion": f"{XCA_GROUP}/v1beta1",
                "kind": "Xca",
                "metadata": {"name": "x", "namespace": ns},
                "spec": {"foo": 5},
            }
        ),
        check=False,
    )
    assert bad_xca.returncode != 0 and "spec.foo" in bad_xca.stderr

    # The short name and the category; the category lists both kinds with their columns.
    assert kubectl.run("get", "rds", "-n", ns, "-o", "name").stdout.split() == [
        "redis.myapp.demo.kubebuilder.io/redis-sample"
    ]
    both = kubectl.run("get", "reconciler", "-n", ns).stdout
    headers = [line.split() for line in both.splitlines() if line.startswith("NAME")]
    assert ["NAME", "DESIRED", "READY", "UP-TO-DATE", "STATUS", "AGE"] in headers
    assert ["NAME", "ACTIVE", "LAST", "UPDATE", "AGE"] in headers
    assert "redis.myapp.demo.kubebuilder.io/redis-sample" in both
    assert "xca.apps.xca.k8s.kb.cx/xca-sample" in both


# --------------------------------------------------------------------- RBAC


@pytest.fixture(scope="module")
def rbac(kubectl: Kubectl) -> None:
    kubectl.run("apply", "-k", str(CONFIG / "rbac"))


@pytest.fixture(scope="module")
def sa_kubeconfig(kubectl: Kubectl, rbac: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A kubeconfig holding a TokenRequest token for the shipped ServiceAccount,
    as docs/install.md tells a bastion operator to write one."""
    token = kubectl.run(
        "create", "token", "reconciler", "-n", SA_NS, "--duration=1h"
    ).stdout.strip()
    admin = yaml.safe_load(kubectl.kubeconfig.read_text())
    context = next(c for c in admin["contexts"] if c["name"] == admin["current-context"])
    cluster = next(c for c in admin["clusters"] if c["name"] == context["context"]["cluster"])
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": cluster["cluster"]}],
        "users": [{"name": "reconciler", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "local", "user": "reconciler"}}],
        "current-context": "sa",
    }
    path = tmp_path_factory.mktemp("sa") / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def events(kubectl: Kubectl, ns: str) -> list[dict[str, Any]]:
    return kubectl.json("get", "events", "-n", ns)["items"]


def test_service_account_converges_the_samples(
    kubectl: Kubectl, ns: str, sa_kubeconfig: Path
) -> None:
    sa = Reconciler(sa_kubeconfig)
    kubectl.run("apply", "-n", ns, "-k", str(CONFIG / "samples"))
    results = sa.converge(ns, settle=lambda: settled(kubectl, ns))  # each pass exits 0
    assert results[0].summary["actions"]["Pod/create/ok"] == 3
    for r in results:
        assert r.summary["errors"] == [] and "forbidden" not in r.stderr.lower(), r.stderr

    redis = kubectl.json("get", "redis", "redis-sample", "-n", ns)
    assert redis["metadata"]["finalizers"] == [FINALIZER]
    assert redis["status"]["readyReplicas"] == 3
    assert sorted(pods(kubectl, ns)) == [f"redis-sample-{i}" for i in range(3)]
    assert kubectl.json("get", "xca", "xca-sample", "-n", ns)["status"]["active"] is True
    reasons = {(e["source"].get("component"), e["reason"]) for e in events(kubectl, ns)}
    assert ("redis-controller", "CreatePod") in reasons
    assert any(reason == "Activated" for _, reason in reasons)

    # The same event twice is aggregated: GET and PATCH on events as this identity.
    for _ in range(2):
        kubectl.run("delete", "pod", "redis-sample-1", "-n", ns, "--wait=true")
        assert "forbidden" not in sa.sync(ns).stderr.lower()
    (again,) = [
        e
        for e in events(kubectl, ns)
        if e["message"] == "Created pod redis-sample-1: deleted by hand"
    ]
    assert again["count"] == 2

    # Deletion: pods deleted, then the finalizer released, all as this identity.
    kubectl.run("delete", "redis", "redis-sample", "-n", ns, "--wait=false")
    for _ in range(20):
        sa.sync(ns)
        if kubectl.run("get", "redis", "redis-sample", "-n", ns, check=False).returncode:
            break
        wait_for(lambda: settled(kubectl, ns) or not pods(kubectl, ns), what="pods settle")
    else:
        raise AssertionError("the Redis was never released")
    assert pods(kubectl, ns) == {}


def test_service_account_sees_a_foreign_pod_and_says_so_in_status(
    kubectl: Kubectl, ns: str, sa_kubeconfig: Path
) -> None:
    """The desired name no pod of ours holds is looked up by name: the
    ClusterRole's get on pods covers that, and the conflict is written to the
    status."""
    sa = Reconciler(sa_kubeconfig)
    kubectl.run("run", "redis-sample-1", "-n", ns, "--image=busybox", "--restart=Never")
    kubectl.apply(redis_yaml(ns, num=2))
    first = sa.sync(ns)
    assert first.summary["errors"] == [] and "forbidden" not in first.stderr.lower()
    assert "Pod/create/failed" not in first.summary["actions"]
    status = kubectl.json("get", "redis", "redis-sample", "-n", ns)["status"]
    assert status["state"] == "PodConflict" and "redis-sample-1" in status["message"]


def test_service_account_puts_back_a_pod_label_removed_by_hand(
    kubectl: Kubectl, ns: str, sa_kubeconfig: Path
) -> None:
    """The metadata repair is a PATCH on the pod: the ClusterRole grants it."""
    sa = Reconciler(sa_kubeconfig)
    kubectl.apply(redis_yaml(ns, num=1))
    sa.converge(ns, settle=lambda: settled(kubectl, ns))
    kubectl.run("label", "pod", "redis-sample-0", "-n", ns, "app.kubernetes.io/name-")
    repair = sa.sync(ns)
    assert repair.summary["errors"] == [], repair.stderr
    assert repair.summary["actions"] == {"Pod/patch-metadata/ok": 1}
    labels = kubectl.json("get", "pod", "redis-sample-0", "-n", ns)["metadata"]["labels"]
    assert labels["app.kubernetes.io/name"] == "redis"


def access_reviews(kubectl: Kubectl, ns: str, asks: list[tuple[str, str, str]]) -> list[bool]:
    """One SubjectAccessReview per (group, resource[/sub], verb), in one request."""
    items = []
    for group, resource, verb in asks:
        plural, _, sub = resource.partition("/")
        attrs = {"namespace": ns, "group": group, "resource": plural, "verb": verb}
        if sub:
            attrs["subresource"] = sub
        items.append(
            {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "spec": {"user": SA_USER, "resourceAttributes": attrs},
            }
        )
    listing = json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    out = kubectl.run("create", "-f", "-", "-o", "json", stdin=listing).stdout
    decoder, answers, at = json.JSONDecoder(), [], 0
    while out[at:].strip():  # kubectl prints one JSON document per object
        review, at = decoder.raw_decode(out, at + len(out[at:]) - len(out[at:].lstrip()))
        answers.append(bool(review["status"].get("allowed")))
    assert len(answers) == len(asks)
    return answers


def test_service_account_is_refused_everything_else(
    kubectl: Kubectl, ns: str, sa_kubeconfig: Path
) -> None:
    granted = [(g, r, v) for (g, r), verbs in sorted(RULES.items()) for v in sorted(verbs)]
    redis, xca = REDIS_GROUP, XCA_GROUP
    refused = [
        ("", "secrets", "list"),
        ("", "secrets", "get"),
        ("", "configmaps", "list"),
        ("", "pods", "watch"),
        ("", "pods", "update"),
        ("", "pods/exec", "create"),
        ("", "services", "delete"),  # the garbage collector deletes a Redis's Service
        ("", "services", "watch"),
        ("policy", "poddisruptionbudgets", "watch"),
        ("", "persistentvolumeclaims", "watch"),
        ("", "persistentvolumes", "list"),  # the volumes are the provisioner's
        ("storage.k8s.io", "storageclasses", "get"),
        ("storage.k8s.io", "storageclasses", "create"),
        ("", "events", "list"),
        ("", "events", "delete"),
        ("", "serviceaccounts/token", "create"),
        (redis, "redis", "deletecollection"),
        (redis, "redis", "watch"),
        (redis, "redis", "create"),
        (redis, "redis", "update"),
        (redis, "redis", "delete"),
        (redis, "redis/status", "update"),
        (xca, "xcas", "delete"),
        (xca, "xcas/finalizers", "update"),
        ("coordination.k8s.io", "leases", "create"),
        ("rbac.authorization.k8s.io", "roles", "create"),
    ]
    answers = access_reviews(kubectl, ns, granted + refused)
    assert dict(zip(granted, answers[: len(granted)], strict=True)) == dict.fromkeys(granted, True)
    assert dict(zip(refused, answers[len(granted) :], strict=True)) == dict.fromkeys(refused, False)
    # And for real, with the token itself.
    as_sa = Kubectl(sa_kubeconfig)
    for (group, resource), (_, names) in NAMED_RULES.items():
        for name in names:
            as_sa.run("get", f"{resource}.{group}", name)  # granted by name
        other = as_sa.run("get", f"{resource}.{group}", "leases.coordination.k8s.io", check=False)
        assert other.returncode != 0 and "Forbidden" in other.stderr
    secrets = as_sa.run("get", "secrets", "-n", ns, check=False)
    assert secrets.returncode != 0 and "Forbidden" in secrets.stderr
    delete = as_sa.run("delete", "redis", "anything", "-n", ns, check=False)
    assert delete.returncode != 0 and "Forbidden" in delete.stderr
    assert as_sa.run("auth", "can-i", "list", "secrets", "-A", check=False).stdout.strip() == "no"


def test_service_account_leads_with_the_leader_election_role(
    kubectl: Kubectl, ns: str, sa_kubeconfig: Path
) -> None:
    """config/leader-election is enough for `run --leader-elect`, as config/daemon
    runs it: take the Lease, reconcile, release it."""
    kubectl.run("apply", "-k", str(CONFIG / "leader-election"))
    kubectl.apply(redis_with(ns, "{port: 6379, num: 1}"))
    proc = Reconciler(sa_kubeconfig).daemon(
        ns,
        "--leader-elect",
        "--leader-election-namespace",
        SA_NS,
        "--leader-election-id",
        f"lease-{ns}",
    )
    try:
        wait_for(
            lambda: kubectl.run("get", "pod", "r-0", "-n", ns, check=False).returncode == 0,
            what="the leader to create the pod",
            timeout=60,
        )
        lease = kubectl.json("get", "lease", f"lease-{ns}", "-n", SA_NS)["spec"]
        assert lease["holderIdentity"]
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out[-2000:]
    assert "released lease" in out
    released = kubectl.json("get", "lease", f"lease-{ns}", "-n", SA_NS)["spec"]
    assert released.get("holderIdentity", "") == ""
    kubectl.run("delete", "lease", f"lease-{ns}", "-n", SA_NS)


# ---------------------------------------------------------------- workloads


# ------------------------------------------------------------- sd_notify


class Notifications:
    """The NOTIFY_SOCKET end of systemd: a bound datagram socket."""

    def __init__(self) -> None:
        # sun_path holds 108 bytes; pytest's tmp_path can be longer.
        self.dir = tempfile.mkdtemp(prefix="sdn-", dir="/tmp")
        self.path = os.path.join(self.dir, "notify")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.seen: list[str] = []

    def wait(self, message: str, proc: subprocess.Popen[str], timeout: float = 60) -> None:
        """Until ``message`` arrives anew (earlier copies do not count)."""
        deadline = time.monotonic() + timeout
        start = len(self.seen)
        while message not in self.seen[start:]:
            if proc.poll() is not None:
                raise AssertionError(f"daemon exited {proc.returncode}; got {self.seen}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no {message} in {timeout}s; got {self.seen}")
            self.sock.settimeout(max(0.1, min(1.0, deadline - time.monotonic())))
            try:
                self.seen.append(self.sock.recv(4096).decode())
            except TimeoutError:
                continue

    def close(self) -> None:
        self.sock.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def notifications() -> Iterator[Notifications]:
    n = Notifications()
    yield n
    n.close()


def test_daemon_speaks_sd_notify(
    kubectl: Kubectl, cluster: Any, ns: str, tmp_path: Path, notifications: Notifications
) -> None:
    """What Type=notify and WatchdogSec in systemd/reconciler.service rely on."""
    kubectl.apply(redis_yaml(ns, num=1))
    state = tmp_path / "state.json"
    log = (tmp_path / "daemon.log").open("w+")
    proc = Reconciler(cluster.kubeconfig).daemon(
        ns, "--state-file", str(state), env={"NOTIFY_SOCKET": notifications.path}, stdout=log
    )
    try:
        notifications.wait("READY=1", proc)
        assert "redis-sample-0" in pods(kubectl, ns)  # READY=1 follows a real pass
        notifications.wait("WATCHDOG=1", proc)
        notifications.wait("WATCHDOG=1", proc)  # and again after the next pass
        proc.send_signal(signal.SIGTERM)
        notifications.wait("STOPPING=1", proc)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.seek(0)
        output = log.read()
        log.close()
    seen = notifications.seen
    assert seen[0] == "READY=1", seen
    statuses = [m for m in seen if m.startswith("STATUS=")]
    assert statuses and all(s.startswith("STATUS=pass ") for s in statuses), seen
    assert seen.index("READY=1") < seen.index(statuses[0]) < seen.index("WATCHDOG=1")
    assert seen[-1] == "STOPPING=1" and seen.count("WATCHDOG=1") >= 2
    assert state.is_file(), output
