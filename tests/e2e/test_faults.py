"""Fault injection against a second local control plane of its own.

Each case injects a fault, lets the reconciler recover with ordinary passes,
and then checks the three things that must always hold: no orphan pods, no
stuck finalizers, and correct statuses. The figures (kills survived, faults
injected, objects lost) are written to .cluster-faults/fault-report.json and
printed at the end of the run.
"""

from __future__ import annotations

import json
import os
import random
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from hack.cluster import cluster as launcher

from .conftest import ROOT, Kubectl, Reconciler, delete_namespace, owned, wait_for

STATE_DIR = ROOT / ".cluster-faults"
REPORT = STATE_DIR / "fault-report.json"
FIGURES: dict[str, int] = {"faults_injected": 0, "kills_survived": 0, "objects_lost": 0}
FINALIZER = "myapp.demo.kubebuilder.io/pods"


@pytest.fixture(scope="module")
def fcluster() -> Iterator[Any]:
    was_up = launcher.status(STATE_DIR) is not None
    cluster = launcher.up(STATE_DIR)
    yield cluster
    STATE_DIR.mkdir(exist_ok=True)
    REPORT.write_text(json.dumps(FIGURES, indent=2) + "\n")
    if not was_up and not os.environ.get("KEEP_E2E_CLUSTER"):
        launcher.down(STATE_DIR)


@pytest.fixture(scope="module")
def fk(fcluster: Any) -> Kubectl:
    return Kubectl(fcluster.kubeconfig)


@pytest.fixture(scope="module")
def frec(fcluster: Any) -> Reconciler:
    return Reconciler(fcluster.kubeconfig)


@pytest.fixture
def fns(fk: Kubectl, frec: Reconciler) -> Iterator[str]:
    name = f"fault-{uuid.uuid4().hex[:8]}"
    fk.run("create", "namespace", name)
    yield name
    delete_namespace(fk, frec, name)


def many_redis(ns: str, count: int, num: int = 3, prefix: str = "r") -> str:
    docs = [
        {
            "apiVersion": "myapp.demo.kubebuilder.io/v1",
            "kind": "Redis",
            "metadata": {"name": f"{prefix}{i}", "namespace": ns},
            "spec": {"port": 6379, "num": num},
        }
        for i in range(count)
    ]
    return yaml.safe_dump_all(docs)


def settled(k: Kubectl, ns: str) -> bool:
    for p in k.json("get", "pods", "-n", ns)["items"]:
        if p["metadata"].get("deletionTimestamp"):
            return False
        conds = p.get("status", {}).get("conditions", [])
        if not any(c["type"] == "Ready" and c["status"] == "True" for c in conds):
            return False
    return True


def converge(rec: Reconciler, k: Kubectl, ns: str, passes: int = 30) -> int:
    """Run passes until one is clean and writes nothing; return how many ran."""
    for n in range(1, passes + 1):
        result = rec.sync(ns, expect=None)
        if result.code == 0 and result.writes == 0 and result.summary.get("planned") == 0:
            return n
        wait_for(lambda: settled(k, ns), what="pods to settle", timeout=90)
    raise AssertionError(f"no convergence in {passes} passes")


def check_invariants(k: Kubectl, ns: str, expected: dict[str, int]) -> None:
    """No orphan pods, no stuck finalizers, correct statuses; count lost objects."""
    redis = {r["metadata"]["name"]: r for r in k.json("get", "redis", "-n", ns)["items"]}
    pods = k.json("get", "pods", "-n", ns)["items"]
    assert sorted(redis) == sorted(expected), "unexpected set of Redis objects"
    uids = {r["metadata"]["uid"]: name for name, r in redis.items()}
    owned: dict[str, list[str]] = {name: [] for name in redis}
    for p in pods:
        refs = [r for r in p["metadata"].get("ownerReferences", []) if r.get("controller")]
        assert len(refs) == 1 and refs[0]["uid"] in uids, f"orphan pod {p['metadata']['name']}"
        owned[uids[refs[0]["uid"]]].append(p["metadata"]["name"])
    lost = 0
    for name, num in expected.items():
        r = redis[name]
        assert not r["metadata"].get("deletionTimestamp"), f"{name} stuck in deletion"
        assert r["metadata"].get("finalizers") == [FINALIZER]
        want = sorted(f"{name}-{i}" for i in range(num))
        lost += len(set(want) - set(owned[name]))
        assert sorted(owned[name]) == want, f"{name}: pods {owned[name]}"
        st = r["status"]
        assert (st["replicas"], st["readyReplicas"], st["updatedReplicas"]) == (num, num, num)
        assert st["observedGeneration"] == r["metadata"]["generation"]
    FIGURES["objects_lost"] += lost


def start_sync(rec: Reconciler, ns: str, env: dict[str, str]) -> subprocess.Popen[str]:
    cmd = [
        sys.executable,
        "-m",
        "reconciler",
        "sync",
        "-n",
        ns,
        "--kubeconfig",
        str(rec.kubeconfig),
        "-o",
        "json",
    ]
    return owned(
        subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **env},
        )
    )


SLOW = {"RECONCILER_QPS": "25", "RECONCILER_BURST": "1", "RECONCILER_WRITE_CONCURRENCY": "2"}


# ---------------------------------------------------------------- the cases


def test_apiserver_dies_mid_pass(fcluster, fk: Kubectl, frec: Reconciler, fns: str):
    fk.apply(many_redis(fns, 15))
    proc = start_sync(frec, fns, SLOW)
    wait_for(
        lambda: len(fk.json("get", "pods", "-n", fns)["items"]) >= 3,
        timeout=30,
        interval=0.05,
        what="the pass to be under way",
    )
    launcher.stop_component("kube-apiserver", STATE_DIR)
    FIGURES["faults_injected"] += 1
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        launcher.start_component("kube-apiserver", STATE_DIR)
    assert proc.returncode == 1, err[-2000:]
    summary = json.loads(out)
    assert summary["errors"] and summary["result"] == "errors"
    converge(frec, fk, fns)
    check_invariants(fk, fns, {f"r{i}": 3 for i in range(15)})


def test_reconciler_killed_at_random_points(fk: Kubectl, frec: Reconciler, fns: str):
    rng = random.Random(20261122)
    num = 3
    fk.apply(many_redis(fns, 50, num=num))
    kills = finished = 0
    while kills < 20:
        proc = start_sync(frec, fns, {**SLOW, "RECONCILER_QPS": "60"})
        time.sleep(rng.uniform(0.6, 2.5))  # the interpreter starts in ~0.5 s
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.wait(timeout=30)
        if proc.returncode != -signal.SIGKILL:
            # A pass outran its kill (a fast machine): give the next ones work.
            finished += 1
            assert finished <= 10, "passes keep finishing before they can be killed"
            num += 1
            fk.apply(many_redis(fns, 50, num=num))
    FIGURES["faults_injected"] += kills
    FIGURES["kills_survived"] += kills
    converge(frec, fk, fns)
    check_invariants(fk, fns, {f"r{i}": num for i in range(50)})

    # Kill passes that are deleting half of them too.
    fk.run("delete", "redis", *[f"r{i}" for i in range(0, 50, 2)], "-n", fns, "--wait=false")
    for _ in range(5):
        proc = start_sync(frec, fns, {**SLOW, "RECONCILER_QPS": "60"})
        time.sleep(rng.uniform(0.6, 1.5))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
            FIGURES["faults_injected"] += 1
            FIGURES["kills_survived"] += 1
        proc.wait(timeout=30)
    converge(frec, fk, fns)
    check_invariants(fk, fns, {f"r{i}": num for i in range(1, 50, 2)})


def test_second_writer_races_the_reconciler(fk: Kubectl, frec: Reconciler, fns: str, fcluster):
    fk.apply(many_redis(fns, 5))
    stop = threading.Event()
    racer = Kubectl(fcluster.kubeconfig)

    def race() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            for i in range(5):
                racer.run(
                    "label", "--overwrite", "redis", f"r{i}", "-n", fns, f"racer={n}", check=False
                )

    thread = threading.Thread(target=race)
    thread.start()
    conflicts = passes = 0
    try:
        # A converged pass writes nothing and so cannot conflict: change num
        # before every pass so that each one writes pods and a status (with
        # resourceVersion) while the racer keeps relabelling the same objects.
        while passes < 8 or (conflicts == 0 and passes < 30):
            fk.apply(many_redis(fns, 5, num=3 + passes % 2))
            passes += 1
            result = frec.sync(fns, expect=None)
            assert result.code == 0, result.stderr[-2000:]  # a 409 is not an error
            conflicts += sum(
                n for k, n in result.summary["actions"].items() if k.endswith("/conflict")
            )
    finally:
        stop.set()
        thread.join()
    FIGURES["faults_injected"] += conflicts
    assert conflicts > 0, f"the racer caused no conflict in {passes} passes; nothing was tested"
    fk.apply(many_redis(fns, 5, num=3))
    converge(frec, fk, fns)
    check_invariants(fk, fns, {f"r{i}": 3 for i in range(5)})


class _Throttler(BaseHTTPRequestHandler):
    """Loopback proxy to the apiserver that answers every 4th request with 429."""

    upstream: str = ""
    token: str = ""
    ca: str = ""
    count = 0
    throttled = 0
    lock = threading.Lock()

    def _proxy(self) -> None:
        cls = type(self)
        with cls.lock:
            cls.count += 1
            throttle = cls.count % 4 == 0
            if throttle:
                cls.throttled += 1
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)) or None
        if throttle:
            payload = json.dumps(
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "status": "Failure",
                    "reason": "TooManyRequests",
                    "message": "slow down",
                    "code": 429,
                }
            ).encode()
            self.send_response(429)
            self.send_header("Retry-After", "1")
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        req = urllib.request.Request(cls.upstream + self.path, data=body, method=self.command)
        for key in ("Content-Type", "Accept"):
            if self.headers.get(key):
                req.add_header(key, self.headers[key])
        req.add_header("Authorization", f"Bearer {cls.token}")
        ctx = ssl.create_default_context(cafile=cls.ca)
        opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=ctx)
        )
        try:
            resp = opener.open(req, timeout=30)
            code, data, ctype = resp.status, resp.read(), resp.headers.get("Content-Type", "")
        except urllib.error.HTTPError as exc:
            code, data, ctype = exc.code, exc.read(), exc.headers.get("Content-Type", "")
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _proxy

    def log_message(self, *args: Any) -> None:
        pass


def test_429_with_retry_after_is_honoured(
    fcluster, fk: Kubectl, frec: Reconciler, fns: str, tmp_path: Path
):
    _Throttler.upstream = fcluster.server
    _Throttler.token = fcluster.token
    _Throttler.ca = str(fcluster.ca_file)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Throttler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    kubeconfig = tmp_path / "throttled"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "t",
                "clusters": [
                    {
                        "name": "t",
                        "cluster": {"server": f"http://127.0.0.1:{server.server_address[1]}"},
                    }
                ],
                "users": [{"name": "t", "user": {"token": "unused-the-proxy-authenticates"}}],
                "contexts": [{"name": "t", "context": {"cluster": "t", "user": "t"}}],
            }
        )
    )
    try:
        fk.apply(many_redis(fns, 3))
        throttled = Reconciler(kubeconfig)
        started = time.monotonic()
        result = throttled.sync(fns)  # exit 0: every 429 was retried
        took = time.monotonic() - started
    finally:
        server.shutdown()
    throttles = result.summary["api_requests_by_code"]
    n429 = sum(n for k, n in throttles.items() if k.endswith(" 429"))
    assert n429 >= 3 and n429 == _Throttler.throttled
    FIGURES["faults_injected"] += n429
    # Retry-After: 1 honoured: a write concurrency of 8 overlaps some of the waits.
    assert took >= n429 / 8
    retries = [ln for ln in result.stderr.splitlines() if "429; retry" in ln]
    assert len(retries) == n429  # one line per retry, no storm of errors
    assert "ERROR" not in result.stderr
    converge(frec, fk, fns)
    check_invariants(fk, fns, {f"r{i}": 3 for i in range(3)})


def _redis_crd() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "crds/myapp.demo.kubebuilder.io_redis.yaml").read_text())


def test_objects_that_bypass_the_schema(fk: Kubectl, frec: Reconciler, fns: str):
    strict = _redis_crd()
    loose = _redis_crd()
    version = loose["spec"]["versions"][0]
    version["schema"]["openAPIV3Schema"]["properties"]["spec"] = {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
    }
    # spec.num cannot be of the wrong type even so: the scale subresource
    # reads it, and the apiserver refuses a Redis whose num is not an integer.
    bad = {
        "bad-port": {"port": 6399, "num": 1},
        "bad-num": {"port": 6379, "num": 300},
        "bad-image": {"port": 6379, "num": 1, "image": "Not An Image"},
        "bad-paused": {"port": 6379, "num": 1, "paused": "yes"},
        "bad-tolerations": {"port": 6379, "num": 1, "tolerations": {"key": "a"}},
    }
    try:
        fk.run(
            "apply", "--server-side", "--force-conflicts", "-f", "-", stdin=yaml.safe_dump(loose)
        )
        for name, spec in bad.items():
            fk.apply(
                yaml.safe_dump(
                    {
                        "apiVersion": "myapp.demo.kubebuilder.io/v1",
                        "kind": "Redis",
                        "metadata": {"name": name, "namespace": fns},
                        "spec": spec,
                    }
                )
            )
    finally:
        fk.run(
            "apply", "--server-side", "--force-conflicts", "-f", "-", stdin=yaml.safe_dump(strict)
        )
    FIGURES["faults_injected"] += len(bad)
    fk.apply(many_redis(fns, 1, num=2, prefix="good"))
    result = frec.sync(fns, expect=None)
    assert result.code == 0, result.stderr[-2000:]
    fields = {
        "bad-port": "spec.port",
        "bad-num": "spec.num",
        "bad-image": "spec.image",
        "bad-paused": "spec.paused",
        "bad-tolerations": "spec.tolerations",
    }
    for name, field in fields.items():
        obj = fk.json("get", "redis", name, "-n", fns)
        degraded = next(c for c in obj["status"]["conditions"] if c["type"] == "Degraded")
        assert degraded["status"] == "True" and degraded["reason"] == "InvalidSpec"
        assert field in degraded["message"]
        events = fk.json(
            "get", "events", "-n", fns, "--field-selector", f"involvedObject.name={name}"
        )["items"]
        assert any(e["type"] == "Warning" and field in e["message"] for e in events)
    assert (
        fk.json(
            "get",
            "pods",
            "-n",
            fns,
            "-l",
            f"app.kubernetes.io/instance in ({','.join(bad)})",
        )["items"]
        == []
    )
    for r in bad:
        fk.run("delete", "redis", r, "-n", fns, "--wait=false")
    converge(frec, fk, fns)
    check_invariants(fk, fns, {"good0": 2})


def test_rotated_service_account_token_is_reread(fk: Kubectl, fcluster, fns: str, tmp_path: Path):
    from reconciler.client.kube import Kube
    from reconciler.config import Config
    from reconciler.engine.state import State
    from reconciler.engine.sync import Mode, PassSetup, pass_once
    from reconciler.result import PassOutcome

    fk.run("create", "serviceaccount", "rotator", "-n", fns)
    fk.run(
        "create",
        "clusterrolebinding",
        f"rotator-{fns}",
        "--clusterrole=cluster-admin",
        f"--serviceaccount={fns}:rotator",
    )
    fk.run("create", "secret", "generic", "s1", "-n", fns)
    fk.run("create", "secret", "generic", "s2", "-n", fns)

    def token(secret: str) -> str:
        return fk.run(
            "create",
            "token",
            "rotator",
            "-n",
            fns,
            "--bound-object-kind=Secret",
            f"--bound-object-name={secret}",
            "--duration=10m",
        ).stdout.strip()

    token_file = tmp_path / "token"
    token_file.write_text(token("s1"))
    base = yaml.safe_load(Path(fcluster.kubeconfig).read_text())
    base["users"][0]["user"] = {"tokenFile": str(token_file)}
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(base))
    kube = Kube(Config(kubeconfig=str(kubeconfig)))
    config = Config(namespaces=(fns,))
    fk.apply(many_redis(fns, 1, num=1))
    try:
        assert pass_once(PassSetup(kube=kube, config=config), State()).outcome is PassOutcome.OK
        fk.run("delete", "secret", "s1", "-n", fns)  # token 1 is now invalid
        wait_for(
            lambda: (
                pass_once(PassSetup(kube=kube, config=config, mode=Mode.PLAN), State()).outcome
                is PassOutcome.UNREACHABLE
            ),
            what="the old token to be rejected",
            timeout=30,
        )
        token_file.write_text(token("s2"))  # the kubelet rotates the file
        later = token_file.stat().st_mtime + 1  # a new mtime, however coarse the clock
        os.utime(token_file, (later, later))
        result = pass_once(PassSetup(kube=kube, config=config), State())
        assert result.outcome is PassOutcome.OK, result.errors
    finally:
        fk.run("delete", "clusterrolebinding", f"rotator-{fns}", check=False)
    FIGURES["faults_injected"] += 1


def test_redis_deleted_and_finalizer_stripped_while_down(fk: Kubectl, frec: Reconciler, fns: str):
    fk.apply(many_redis(fns, 2, num=2))
    converge(frec, fk, fns)
    # While the reconciler is down, someone deletes r0 and strips our finalizer.
    fk.run("delete", "redis", "r0", "-n", fns, "--wait=false")
    fk.run(
        "patch", "redis", "r0", "-n", fns, "--type=merge", "-p", '{"metadata":{"finalizers":null}}'
    )
    FIGURES["faults_injected"] += 1
    # The garbage collector removes r0's pods through their ownerReferences.
    wait_for(
        lambda: (
            not fk.json("get", "pods", "-n", fns, "-l", "app.kubernetes.io/instance=r0")["items"]
        ),
        what="garbage collection of r0's pods",
        timeout=60,
    )
    converge(frec, fk, fns)
    check_invariants(fk, fns, {"r1": 2})


def test_missing_crd_is_named_and_other_kinds_still_reconciled(
    fk: Kubectl, frec: Reconciler, fns: str
):
    xca_crd = ROOT / "crds/apps.xca.k8s.kb.cx_xcas.yaml"
    fk.run("delete", "-f", str(xca_crd), "--wait=true")
    FIGURES["faults_injected"] += 1
    try:
        fk.apply(many_redis(fns, 1, num=1))
        result = frec.sync(fns, expect=1)
        assert any("the Xca CRD is not installed" in e for e in result.summary["errors"])
        assert result.summary["actions"].get("Pod/create/ok") == 1
    finally:
        fk.run("apply", "--server-side", "--force-conflicts", "-f", str(xca_crd))
        fk.run("wait", "--for=condition=established", "crd/xcas.apps.xca.k8s.kb.cx")
    converge(frec, fk, fns)
    check_invariants(fk, fns, {"r0": 1})
