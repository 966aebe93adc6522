"""Issue 4, ship it three ways: the artefacts in config/, systemd/ and the
Dockerfile, exercised against the local control plane as an operator would
use them. A manifest that only parses proves little; these tests reconcile
as the shipped ServiceAccount, dry-run the workloads on the server, speak
sd_notify with the daemon. The image itself is built and run in test_image.py."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
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
def sa_kubeconfig(kubectl: Kubectl, rbac: None) -> Iterator[Path]:
    """A kubeconfig holding a TokenRequest token for the shipped ServiceAccount,
    written by docs/install.md's step 5, its block run as written."""
    with Bastion(kubectl) as bastion:
        bastion.run(credentials_recipe())
        yield bastion.checkout / "kubeconfig"


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


# ------------------------------------------------ docs/install.md, as written

INSTALL_MD = ROOT / "docs" / "install.md"
SH_BLOCK = re.compile(r"^```sh\n(.*?)^```$", re.MULTILINE | re.DOTALL)
STEPS, CRON = "The steps, in order", "The one-shot: `reconciler-sync.timer` or cron"
# The steps a test cannot take here: the admin's applies (the fixtures make the
# same), the venv (the tests run in one), systemd (not on this host).
NOT_HERE = (
    "kubectl apply -f crds/",
    "kubectl apply -k config/rbac",
    "kubectl apply -k config/leader-election",
    "python3 -m venv /opt/reconciler",
    "/opt/reconciler/bin/pip install .",
    "cp systemd/reconciler.service /etc/systemd/system/",
    "systemctl daemon-reload && systemctl enable --now reconciler",
)


def install_blocks(section: str) -> list[str]:
    """The ```sh blocks of one ### section of docs/install.md."""
    text = INSTALL_MD.read_text()
    start = text.index(f"### {section}\n")
    end = text.find("\n### ", start + 1)
    return SH_BLOCK.findall(text[start : end if end != -1 else None])


def commands(block: str) -> list[str]:
    """A block's commands: continued lines joined, comments dropped."""
    lines = (
        re.sub(r"\s+# .*$", "", line).strip() for line in block.replace("\\\n", " ").split("\n")
    )
    return [re.sub(r"\s+", " ", line) for line in lines if line and not line.startswith("#")]


def credentials_recipe() -> str:
    (recipe,) = [b for b in install_blocks(STEPS) if "kubectl create token reconciler" in b]
    return recipe


# The host's paths a bastion's steps write, moved under a test's ``root``.
HOST_PATHS = (
    "/etc/reconciler",
    "/etc/cron.d",
    "/var/lib/reconciler",
    "/opt/reconciler",
    "/usr/local/bin",
)


class Bastion:
    """A root shell on a bastion, in a temporary directory: a checkout (its
    config/, crds/ and systemd/), HOME with the admin's kubeconfig as
    ~/.kube/config and no KUBECONFIG, and /etc, /var/lib, /opt under ``root``.
    The venv of step 3 is this one's."""

    def __init__(self, kubectl: Kubectl) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="bastion-", dir="/tmp"))
        self.dir.chmod(0o755)  # a system user walks into root/var/lib
        self.checkout, self.home, self.root = (self.dir / d for d in ("checkout", "home", "root"))
        self.bin = self.root / "usr" / "local" / "bin"
        for made in (self.checkout, self.home / ".kube", self.root / "var" / "lib", self.bin):
            made.mkdir(parents=True)
        for name in ("config", "crds", "systemd"):
            (self.checkout / name).symlink_to(ROOT / name)
        self.admin = self.home / ".kube" / "config"
        shutil.copy(kubectl.kubeconfig, self.admin)
        shim = self.root / "opt" / "reconciler" / "bin" / "reconciler"
        shim.parent.mkdir(parents=True)
        shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m reconciler "$@"\n')
        shim.chmod(0o755)

    def here(self, script: str) -> str:
        """The script with the host's paths moved under ``root``."""
        for path in HOST_PATHS:
            script = script.replace(path, f"{self.root}{path}")
        return script

    def run(self, script: str, moved: bool = False) -> subprocess.CompletedProcess[str]:
        """``script`` in a fresh shell, its paths moved under ``root`` unless
        they already are (``moved``)."""
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        env = {k: v for k, v in env.items() if not k.startswith("RECONCILER_")}
        proc = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script if moved else self.here(script)],
            cwd=self.checkout,
            env={**env, "HOME": str(self.home)},
            capture_output=True,
            text=True,
            timeout=120,
        )
        if proc.returncode != 0:
            raise AssertionError(f"{script}\nexited {proc.returncode}: {proc.stderr}")
        return proc

    def __enter__(self) -> Bastion:
        return self

    def __exit__(self, *_: object) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def bastion(kubectl: Kubectl, rbac: None) -> Iterator[Bastion]:
    with Bastion(kubectl) as made:
        yield made


def test_the_credential_recipe_leaves_the_admin_shell_the_admin(
    kubectl: Kubectl, bastion: Bastion
) -> None:
    """Step 5 writes the ServiceAccount's kubeconfig without making the shell
    that typed it the ServiceAccount: the next `kubectl` is still the admin."""
    admin_before = bastion.admin.read_bytes()
    whoami = "kubectl auth whoami -o jsonpath='{.status.userInfo.username}'"
    admin = kubectl.run(*shlex.split(whoami)[1:]).stdout
    after = bastion.run(f"{credentials_recipe()}\n{whoami}").stdout
    assert after.splitlines()[-1] == admin != SA_USER
    assert bastion.admin.read_bytes() == admin_before
    written = bastion.checkout / "kubeconfig"
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    assert sorted(p.name for p in bastion.checkout.iterdir()) == [
        "config",
        "crds",
        "kubeconfig",
        "systemd",
    ]  # no ca.crt left
    doc = yaml.safe_load(written.read_text())
    (cluster,) = doc["clusters"]
    assert "certificate-authority-data" in cluster["cluster"]
    assert "certificate-authority" not in cluster["cluster"]  # embedded: no file to read
    as_sa = Kubectl(written).run(*shlex.split(whoami)[1:]).stdout
    assert as_sa == SA_USER


def sample_checks() -> list[str]:
    """The names of the ✓ lines docs/install.md shows step 6 printing."""
    text = INSTALL_MD.read_text()
    at = text.index("\n```\n✓ config:")
    sample = text[at + 5 : text.index("\n```", at + 5)]
    return [line[2:].split(":")[0] for line in sample.splitlines()]


def test_the_bastion_steps_check_the_unit_s_arguments_before_it_starts(bastion: Bastion) -> None:
    """Steps 4 to 6 of docs/install.md as written, in their order, each but
    those this host cannot take (NOT_HERE); `check` passes before systemd is
    asked to start anything."""
    blocks = install_blocks(STEPS)
    recipe = credentials_recipe()
    ordered = [c for b in blocks for c in ([recipe] if b == recipe else commands(b))]
    skipped = [c for c in ordered if c in NOT_HERE]
    assert skipped == list(NOT_HERE), "a step the test neither takes nor skips"
    check = next(i for i, c in enumerate(ordered) if "/reconciler check " in c)
    assert check < ordered.index("systemctl daemon-reload && systemctl enable --now reconciler")
    taken = [c for c in ordered if c not in NOT_HERE]
    # reconciler on PATH, the config, the credential, its install, the check
    assert len(taken) == 5, taken
    out = bastion.run("\n".join(taken)).stdout
    printed = [line[2:].split(":")[0] for line in out.splitlines() if line[:1] in "✓✗!"]
    assert all(line.startswith("✓") for line in out.splitlines() if line[:1] in "✓✗!"), out
    assert printed == sample_checks(), out
    etc = bastion.root / "etc" / "reconciler"
    assert stat.S_IMODE((etc / "kubeconfig").stat().st_mode) == 0o600
    assert stat.S_IMODE((etc / "reconciler.yaml").stat().st_mode) == 0o644
    assert not (bastion.checkout / "kubeconfig").exists()
    # check's fix lines name `reconciler`: the one on PATH is the venv's.
    on_path = bastion.run(f"PATH={bastion.bin}:$PATH; command -v reconciler", moved=True).stdout
    assert Path(on_path.strip()).resolve() == (bastion.root / "opt/reconciler/bin/reconciler")


def as_user(uid: int, gid: int, script: str) -> subprocess.CompletedProcess[str]:
    argv = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "sh", "-c", script]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def test_the_cron_user_reads_the_kubeconfig_and_keeps_its_state(
    kubectl: Kubectl, bastion: Bastion, ns: str
) -> None:
    """The cron path of docs/install.md: the `reconciler` system user it makes
    (in a copy of /etc's account files) may read the kubeconfig step 5 made
    root's alone, and lock and write in its state directory; its line syncs."""
    main, _, after = install_blocks(STEPS)
    config_step = next(c for c in commands(main) if c.startswith("install "))
    bastion.run("\n".join([config_step, credentials_recipe(), commands(after)[0]]))
    etc = bastion.root / "etc"
    for name in ("passwd", "group", "shadow", "gshadow", "login.defs"):
        shutil.copy(Path("/etc") / name, etc / name)
    (etc / "cron.d").mkdir()
    (block,) = [b for b in install_blocks(CRON) if "useradd" in b]
    useradd, rest = block.split("\n", 1)
    assert useradd.startswith("useradd ") and useradd.endswith(" reconciler")
    bastion.run(useradd.replace("useradd ", f"useradd --prefix {bastion.root} ", 1))
    accounts = (etc / "passwd").read_text().splitlines()
    entry = next(e for e in accounts if e.startswith("reconciler:"))
    _, _, uid, gid, _, home, _ = entry.split(":")
    state_dir = bastion.here("/var/lib/reconciler")
    assert (home, int(uid) < 1000) == (state_dir, True), entry  # a system user
    # The host's accounts know no `reconciler`: the names become its numbers.
    numbered = rest.replace("-o reconciler -g reconciler", f"-o {uid} -g {gid}")
    bastion.run(numbered.replace("chgrp reconciler ", f"chgrp {gid} "))
    (line,) = (etc / "cron.d" / "reconciler").read_text().splitlines()
    fields = line.split()
    assert fields[5] == "reconciler", line  # the user cron runs it as
    command = fields[6:]
    lock = command[command.index("-n") + 1]
    kubeconfig = command[command.index("--kubeconfig") + 1]
    state = command[command.index("--state-file") + 1]
    assert Path(lock).parent == Path(state).parent == Path(state_dir)
    its_part = f"flock -n {lock} sh -c 'cat {kubeconfig} >/dev/null && touch {state}'"
    assert as_user(int(uid), int(gid), its_part).returncode == 0
    other = as_user(int(uid) + 1, int(gid) + 1, f"cat {kubeconfig}")
    assert other.returncode != 0 and "Permission denied" in other.stderr
    # Its line, as root here (the venv of these tests is under /root), in this test's namespace.
    kubectl.apply(redis_with(ns, "{num: 1}"))
    synced = bastion.run(f"{shlex.join(command)} -n {ns} -o json", moved=True)
    assert json.loads(synced.stdout)["errors"] == [], synced.stderr
    assert "r-0" in pods(kubectl, ns)
