"""`make demo` as a user runs it (hack/demo.sh, on the cluster already up):
the samples converge, and where the real node runs, its last step is a real
`redis-cli PING` with the sample's password, answered PONG by a pod the demo
made on real-0. Its objects are in the namespace `default`, which no other
test uses, and it leaves it as it found it."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from .conftest import ROOT, Kubectl, Reconciler, wait_for

# The demo's passes, as a user types them, have no -n: they cover every
# namespace, so beside other tests they would write to theirs.
pytestmark = pytest.mark.serial("make demo's passes cover every namespace")

DEFAULT = "default"
MADE = [("redis", "redis-sample"), ("redis", "redis-real"), ("xca", "xca-sample")]


@pytest.fixture
def clean_default(kubectl: Kubectl, reconciler: Reconciler) -> Iterator[None]:
    yield
    for kind, name in MADE:
        kubectl.run("delete", kind, name, "-n", DEFAULT, "--wait=false", "--ignore-not-found")
    kubectl.run("delete", "secret", "redis-sample-auth", "-n", DEFAULT, "--ignore-not-found")

    def gone() -> bool:
        reconciler.sync(DEFAULT, expect=None)
        left = [
            n
            for k, n in MADE
            if kubectl.run("get", k, n, "-n", DEFAULT, check=False).returncode == 0
        ]
        return not left

    wait_for(gone, what="the demo's objects gone", timeout=60, interval=0.5)


def test_the_demo_ends_with_a_real_ping(
    cluster: Any, real_node: dict[str, str], clean_default: None
) -> None:
    env = {**os.environ, "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", "hack/demo.sh"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "redis-cli -h " in done.stdout, done.stdout[-3000:]
    assert done.stdout.splitlines().count("PONG") == 1, done.stdout[-3000:]
