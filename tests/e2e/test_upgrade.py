"""docs/install.md's "Upgrading", followed on a bastion from 0.1.0 to this
release with a Redis running. 0.1.0's CRDs (tests/e2e/fixtures/crds-0.1.0)
and 0.1.0's code (`git archive` of the commit that released it) converge a
Redis of three pods, as the shipped ServiceAccount; against those CRDs this
release's `plan` warns and `check` fails, each naming the step. Then each
line of the section's bastion block, as written, while 0.1.0's daemon runs:
the CRDs, the RBAC, the code (this release's `check` passes), the restart.
This release's passes converge the Redis and replace no pod."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from reconciler import __version__
from reconciler.checks.cluster import CRD_FIX
from reconciler.engine.crd_release import APPLY_CRDS
from reconciler.kinds.redis.identity import FIELDS_HASH_ANNOTATION, TEMPLATE_HASH_ANNOTATION

from .conftest import ROOT, Kubectl, NotYet, free_port, kubeconfig_for, owned, passes_done, wait_for
from .test_redis import pods, redis, redis_yaml, settled

RELEASED = "b0c7f86"  # 0.1.0: tests/e2e/fixtures/crds-0.1.0/README.md
OLD = "0.1.0"
OLD_CRDS = Path(__file__).parent / "fixtures" / "crds-0.1.0"
CRDS = ("redis.myapp.demo.kubebuilder.io", "xcas.apps.xca.k8s.kb.cx")
INSTALL_MD = ROOT / "docs" / "install.md"

pytestmark = pytest.mark.serial("installs the 0.1.0 CRDs that every namespace's Redis is served by")


def bastion_steps() -> list[str]:
    """The commands of the section's bastion block, comments cut."""
    section = INSTALL_MD.read_text().split("\n## Upgrading\n", 1)[1]
    bastion = section.split("\n### On a bastion\n", 1)[1]
    found = re.search(r"```sh\n(.*?)```", bastion, re.S)
    assert found, "no sh block under Upgrading / On a bastion"
    return [ln.split("  #")[0].strip() for ln in found[1].splitlines() if ln.strip()]


@dataclass
class Release:
    """One release's code run as `python -m reconciler` by this venv's
    python: ``code`` is the directory its package is in (None: this tree's)."""

    code: Path | None
    kubeconfig: Path

    def command(self, *args: str) -> tuple[list[str], dict[str, str], Path]:
        env = {**os.environ, "PYTHONPATH": str(self.code)} if self.code else dict(os.environ)
        cmd = [sys.executable, "-m", "reconciler", *args, "--kubeconfig", str(self.kubeconfig)]
        # -m puts the working directory first on sys.path: run from the code's own.
        return cmd, env, self.code or ROOT

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        cmd, env, cwd = self.command(*args)
        return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=120)

    def sync(self, ns: str) -> dict[str, Any]:
        proc = self.cli("sync", "-n", ns, "-o", "json")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return dict(json.loads(proc.stdout))

    def converge(self, kubectl: Kubectl, ns: str) -> list[dict[str, Any]]:
        """Passes until one plans nothing and writes nothing."""
        done: list[dict[str, Any]] = []
        for _ in range(20):
            done.append(self.sync(ns))
            if done[-1]["api_writes"] == 0 and done[-1]["planned"] == 0:
                return done
            wait_for(lambda: settled(kubectl, ns), what="pods Ready")
        raise AssertionError(f"no convergence: {[d['actions'] for d in done]}")

    def version(self) -> str:
        return self.cli("--version").stdout.split()[-1]

    def daemon(self, ns: str, port: int, state: Path) -> subprocess.Popen[str]:
        cmd, env, cwd = self.command(
            "run", "-n", ns, "--interval", "1", "--jitter", "0",
            "--metrics-address", f"127.0.0.1:{port}", "--state-file", str(state),
        )  # fmt: skip
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=cwd
        )
        return owned(proc)


def passes(port: int) -> float:
    """A daemon's passes done; 0 until it listens."""
    try:
        return passes_done(port)
    except OSError:
        return 0.0


def more_passes(port: int, count: int, what: str) -> None:
    seen = passes(port)
    wait_for(lambda: passes(port) >= seen + count, what=what, timeout=30)


class Bastion:
    """A bastion the section's lines are run on: the `kubectl` lines as
    written from this checkout (the new release's) as the admin; `pip
    install` switches the code the next start runs; the restart stops the
    daemon and starts it again on the same state file."""

    def __init__(self, kubectl: Kubectl, ns: str, state: Path, old: Release, new: Release):
        self.kubectl, self.ns, self.state, self.code, self.new = kubectl, ns, state, old, new
        self.start()

    def start(self) -> None:
        self.port = free_port()
        self.daemon = self.code.daemon(self.ns, self.port, self.state)
        more_passes(self.port, 2, f"passes of {self.code.version()}'s daemon")

    def stop(self) -> str:
        """Stop the daemon: it stops cleanly, having logged no error."""
        self.daemon.send_signal(signal.SIGTERM)
        out, _ = self.daemon.communicate(timeout=30)
        assert self.daemon.returncode == 0, out[-3000:]
        errors = [ln for ln in out.splitlines() if " ERROR " in ln or "Traceback" in ln]
        assert not errors, out[-3000:]
        return out

    def do(self, step: str) -> None:
        argv = shlex.split(step)
        if argv[0] == "kubectl":
            env = {**os.environ, "KUBECONFIG": str(self.kubectl.kubeconfig)}
            done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
            assert done.returncode == 0, f"{step}: {done.stderr}"
            if argv[1:3] == ["apply", "-f"]:
                established(self.kubectl)
            more_passes(self.port, 2, f"the running daemon's passes after {step}")
        elif argv == ["/opt/reconciler/bin/pip", "install", "."]:
            self.code = self.new
            self.checks_pass()
        elif argv == ["systemctl", "restart", "reconciler"]:
            self.stop()
            self.start()
        else:
            raise AssertionError(f"the test does not know this step of the section: {step}")

    def checks_pass(self) -> None:
        """The section: `reconciler check` before the restart, every line ✓."""
        checked = self.code.cli("check", "-n", self.ns)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert not [ln for ln in checked.stdout.splitlines() if ln.startswith("✗")]
        for name in CRDS:
            assert f"✓ CRDs: {name} of release {__version__}\n" in checked.stdout


def labels(kubectl: Kubectl) -> dict[str, str]:
    return {
        name: kubectl.json("get", "crd", name)["metadata"]["labels"]["app.kubernetes.io/version"]
        for name in CRDS
    }


def made(kubectl: Kubectl, ns: str) -> dict[str, tuple[str, str, str]]:
    """Each pod's uid and the hashes of the template and fields it was made
    from: the same uid is the same pod, and the same hashes are what a pass
    of this release takes as up to date."""
    return {
        name: (
            pod["metadata"]["uid"],
            pod["metadata"]["annotations"][TEMPLATE_HASH_ANNOTATION],
            pod["metadata"]["annotations"][FIELDS_HASH_ANNOTATION],
        )
        for name, pod in pods(kubectl, ns).items()
    }


def ready(kubectl: Kubectl, ns: str) -> bool | NotYet:
    state = redis(kubectl, ns).get("status", {}).get("state")
    return True if state == "Ready" else NotYet(f"state {state}")


def established(kubectl: Kubectl) -> None:
    kubectl.run("wait", "--for=condition=Established", *(f"crd/{name}" for name in CRDS))


@pytest.fixture
def release_0_1_0(kubectl: Kubectl) -> Iterator[None]:
    """The CRDs as 0.1.0's `kubectl apply -f crds/` left them (replaced
    whole, then applied: its last-applied annotation); this tree's after."""
    kubectl.run("replace", "-f", str(OLD_CRDS))
    kubectl.run("apply", "-f", str(OLD_CRDS))
    established(kubectl)
    assert labels(kubectl) == dict.fromkeys(CRDS, OLD)
    try:
        yield
    finally:
        kubectl.run("replace", "-f", str(ROOT / "crds"))
        established(kubectl)


@pytest.fixture(scope="module")
def code_0_1_0(tmp_path_factory: pytest.TempPathFactory) -> Path:
    archive = subprocess.run(
        ["git", "archive", RELEASED, "reconciler"], cwd=ROOT, capture_output=True
    )
    if archive.returncode != 0:  # a shallow clone: the CRDs are fixtures, the code is not
        pytest.skip(f"{RELEASED} (0.1.0) is not in this clone: {archive.stderr.decode()}")
    dest = tmp_path_factory.mktemp("reconciler-0.1.0")
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return dest


@pytest.fixture
def service_account(kubectl: Kubectl, tmp_path: Path) -> Path:
    """A kubeconfig of the shipped ServiceAccount, as a bastion holds it."""
    token = kubectl.run(
        "create", "token", "reconciler", "-n", "reconciler-system", "--duration=10m"
    ).stdout.strip()
    return kubeconfig_for(kubectl, tmp_path / "kubeconfig", {"token": token})


def test_the_upgrade_section_from_0_1_0_with_a_redis_running(
    kubectl: Kubectl,
    ns: str,
    release_0_1_0: None,
    code_0_1_0: Path,
    service_account: Path,
    tmp_path: Path,
):
    old, new = Release(code_0_1_0, service_account), Release(None, service_account)
    assert (old.version(), new.version()) == (OLD, __version__)
    kubectl.apply(redis_yaml(ns, num=3))
    old.converge(kubectl, ns)
    wait_for(lambda: ready(kubectl, ns), what="0.1.0 says Ready")
    before = made(kubectl, ns)
    assert len(before) == 3

    # This release against 0.1.0's CRDs: plan warns, check fails, each with the step.
    planned = new.cli("plan", "-n", ns)
    warned = [
        ln for ln in planned.stderr.splitlines() if ln.startswith("warning: the installed CRD")
    ]
    assert warned == [
        f"warning: the installed CRD {name} is release {OLD}'s; this is {__version__}: "
        f"apply the CRDs of this release ({APPLY_CRDS})"
        for name in CRDS
    ], planned.stderr
    checked = new.cli("check", "-n", ns)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    failed = [ln for ln in checked.stdout.splitlines() if ln.startswith("✗")]
    assert failed == [
        f"✗ CRDs: {name} is release {OLD}'s; this is {__version__}: "
        "the fields it does not know are pruned"
        for name in CRDS
    ], checked.stdout
    assert checked.stdout.count(f"    fix: {CRD_FIX}\n") == 2, checked.stdout

    # The section's bastion block, line by line, 0.1.0's daemon running.
    host = Bastion(kubectl, ns, tmp_path / "state.json", old, new)
    steps = bastion_steps()
    for step in steps:
        host.do(step)
    assert host.code is new, steps
    last = host.stop()
    assert "the installed CRD" not in last, last[-3000:]

    assert labels(kubectl) == dict.fromkeys(CRDS, __version__)
    passes = new.converge(kubectl, ns)
    assert len(passes) == 1, [p["actions"] for p in passes]  # the daemon had converged it
    wait_for(lambda: ready(kubectl, ns), what="Ready")
    # No pod replaced, and none needed: this release's template hash of the
    # Redis is 0.1.0's (pods.template_hash leaves out what it added since).
    assert made(kubectl, ns) == before
    assert "warning:" not in new.cli("plan", "-n", ns).stderr
