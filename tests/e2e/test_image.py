"""The image, built by `make docker-build` and run as the overlays run it.

There is no registry here, so the Dockerfile's base is a stand-in made from
Debian's packages (hack/image/base.sh); the rest of the Dockerfile builds as it
is. Each container gets the settings of the rendered overlay's pod (user,
read-only root, dropped capabilities, /tmp as a tmpfs, environment, limits),
the host's network (the apiserver is on loopback), and a service account
mount with a TokenRequest token of the overlay's ServiceAccount, so the
in-cluster configuration is the one that runs.
The overlays' pods themselves run under a kubelet: test_real_daemon.py, test_real_cronjob.py.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator

import pytest

from hack.image import podman

from .conftest import ROOT, Kubectl, free_port, probe, wait_for

IMG = "localhost/reconciler:e2e"
SYSTEM_NS = "reconciler-system"
# What podman itself writes into any container: the entries for the uid in
# /etc/passwd and /etc/group, and the mount point of the service account.
ENGINE_WRITES = {
    "C /etc",
    "C /etc/passwd",
    "C /etc/group",
    "A /run/secrets/kubernetes.io",
    "A /run/secrets/kubernetes.io/serviceaccount",
}


@pytest.fixture(scope="module")
def engine() -> podman.Engine:
    if missing := podman.missing_tools():
        message = f"no image builder here: {', '.join(missing)} missing (make image-deps)"
        if os.environ.get("REQUIRE_SYSTEM_TOOLS"):
            pytest.fail(message)
        pytest.skip(message)
    return podman.engine()


@pytest.fixture(scope="module")
def image(engine: podman.Engine) -> Iterator[str]:
    built = engine.build(IMG, engine.base())
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    assert f"podman building {IMG}" in built.stderr
    yield IMG
    engine.run("image", "prune", "--force", check=False)  # the previous build's layers


@pytest.fixture(scope="module")
def in_cluster(kubectl: Kubectl, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Flags that make the container a pod of the overlay's ServiceAccount."""
    kubectl.run("apply", "-k", str(ROOT / "config" / "rbac"))
    kubectl.run("apply", "-k", str(ROOT / "config" / "leader-election"))
    token = kubectl.run(
        "create", "token", "reconciler", "-n", SYSTEM_NS, "--duration=1h"
    ).stdout.strip()
    sa = tmp_path_factory.mktemp("sa") / "serviceaccount"
    return podman.in_cluster(kubectl.kubeconfig, token, sa, SYSTEM_NS)


def run(engine: podman.Engine, *args: str) -> subprocess.CompletedProcess[str]:
    return engine.run("run", *args, check=False, timeout=120)


def diff(engine: podman.Engine, name: str) -> set[str]:
    try:
        return set(engine.run("diff", name).stdout.splitlines())
    finally:
        engine.run("rm", "--force", name, check=False)


def written(engine: podman.Engine, image: str, run_flags: list[str], *args: str) -> set[str]:
    """What a container with a writable root wrote, once it has exited,
    besides what the engine writes into every container."""
    name = f"reconciler-diff-{uuid.uuid4().hex[:6]}"
    done = run(engine, "--name", name, *run_flags, image, *args)
    assert done.returncode == 0, done.stderr[-3000:]
    return diff(engine, name) - ENGINE_WRITES


def written_by_daemon(engine: podman.Engine, image: str, run_flags: list[str]) -> set[str]:
    """The same, for `reconciler run` once ready and stopped."""
    name = f"reconciler-diff-{uuid.uuid4().hex[:6]}"
    port = free_port()
    args = ["run", "--interval", "1", "--metrics-address", f"127.0.0.1:{port}"]
    started = run(engine, "-d", "--name", name, *run_flags, image, *args)
    assert started.returncode == 0, started.stderr
    wait_for(lambda: probe(port, "/readyz") == 200, what="the daemon ready", timeout=60)
    engine.run("stop", "--time", "30", name)
    return diff(engine, name) - ENGINE_WRITES


def test_nothing_is_written_outside_tmp_and_nothing_compiled_at_start(
    engine: podman.Engine, image: str, kubectl: Kubectl, ns: str, in_cluster: list[str]
) -> None:
    """A writable root, to see what a start would write if it could. As the
    overlay's uid: nothing outside /tmp. As root, with bytecode writing turned
    back on: no .pyc, so every module `sync` and `run` import was compiled in
    the image. A module left out of the image's compile step shows that the
    check sees one."""
    pod, container = podman.overlay_pod("config/cronjob")
    flags = [f for f in podman.container_args(pod, container, SYSTEM_NS) if f != "--read-only"]
    scope = ["-e", f"RECONCILER_NAMESPACES={ns}", *in_cluster]
    assert written(engine, image, [*flags, *scope], "sync") == set()

    root = [*scope, "--tmpfs", "/tmp", "--user", "0:0", "-e", "PYTHONDONTWRITEBYTECODE="]
    assert sorted(written(engine, image, root, "sync")) == []
    assert sorted(written_by_daemon(engine, image, root)) == []

    control = written(
        engine,
        image,
        [*root, "--entrypoint", "python"],
        "-c",
        "import apscheduler.schedulers.background",
    )
    assert any(
        line.startswith("A ") and line.endswith("background.cpython-311.pyc") for line in control
    ), control


def test_image_answers_help_and_exits_3_when_the_apiserver_is_unreachable(
    engine: podman.Engine, image: str, in_cluster: list[str]
) -> None:
    helped = run(engine, "--rm", image, "--help")
    assert helped.returncode == 0 and "sync" in helped.stdout, helped.stderr
    closed = [
        f"KUBERNETES_SERVICE_PORT={free_port()}" if f.startswith("KUBERNETES_SERVICE_PORT=") else f
        for f in in_cluster
    ]
    lost = run(engine, "--rm", *closed, image, "sync")
    assert lost.returncode == 3, (lost.returncode, lost.stderr[-2000:])
    assert "cannot reach the cluster" in lost.stderr, lost.stderr[-2000:]
