"""`make docker-build` and `make docker-push` (hack/image.sh) pick the builder
in the documented order: docker only when its engine answers, then podman,
then buildah. Fake builders on PATH record how they were called."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "hack" / "image.sh"
FAKE = """#!/bin/sh
echo "$(basename "$0") $*" >> "$CALLS"
[ "$1" = info ] && exit {info}
exit 0
"""


def builders(tmp_path: Path, *names: str, docker_engine: bool = True) -> Path:
    """A PATH holding only the named fake builders and what the script needs."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("dirname", "basename"):
        found = shutil.which(tool)
        assert found, tool
        (bin_dir / tool).symlink_to(found)
    for name in names:
        fake = bin_dir / name
        fake.write_text(FAKE.format(info=0 if docker_engine else 1))
        fake.chmod(0o755)
    return bin_dir


def image_sh(
    tmp_path: Path, bin_dir: Path, verb: str, **env: str
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    calls = tmp_path / "calls"
    calls.touch()
    done = subprocess.run(
        ["/bin/bash", str(SCRIPT), verb],
        env={"PATH": str(bin_dir), "CALLS": str(calls), **env},
        capture_output=True,
        text=True,
    )
    return done, calls.read_text().splitlines()


@pytest.mark.parametrize(
    ("present", "docker_engine", "want"),
    [
        (("docker", "podman", "buildah"), True, "docker build -t r:1 ."),
        (("docker", "podman", "buildah"), False, "podman build -t r:1 --isolation chroot ."),
        (("docker", "buildah"), False, "buildah bud -t r:1 --isolation chroot ."),
        (("podman",), True, "podman build -t r:1 --isolation chroot ."),
    ],
)
def test_build_uses_the_first_builder_that_can_build(
    tmp_path: Path, present: tuple[str, ...], docker_engine: bool, want: str
) -> None:
    done, calls = image_sh(
        tmp_path, builders(tmp_path, *present, docker_engine=docker_engine), "build", IMG="r:1"
    )
    assert done.returncode == 0, done.stderr
    assert calls[-1] == want, calls


def test_base_becomes_a_build_argument_and_push_uses_the_same_builder(tmp_path: Path) -> None:
    bin_dir = builders(tmp_path, "docker", "podman", docker_engine=False)
    done, calls = image_sh(tmp_path, bin_dir, "build", IMG="r:1", BASE="localhost/base:x")
    assert done.returncode == 0, done.stderr
    assert "--build-arg BASE=localhost/base:x" in calls[-1]
    done, calls = image_sh(tmp_path, bin_dir, "push", IMG="r:1")
    assert done.returncode == 0 and calls[-1] == "podman push r:1", calls


def test_no_builder_is_said_plainly(tmp_path: Path) -> None:
    bin_dir = builders(tmp_path, "docker", docker_engine=False)  # a client, no engine
    done, _ = image_sh(tmp_path, bin_dir, "build", IMG="r")
    assert done.returncode == 1
    want = "no image builder found: install docker (with a running engine), podman or buildah"
    assert want in done.stderr


def test_build_without_img_is_refused(tmp_path: Path) -> None:
    done, calls = image_sh(tmp_path, builders(tmp_path, "podman"), "build")
    assert done.returncode == 2 and "set IMG" in done.stderr and calls == []


def test_builder_can_be_chosen(tmp_path: Path) -> None:
    bin_dir = builders(tmp_path, "docker", "buildah")
    done, calls = image_sh(tmp_path, bin_dir, "build", IMG="r:1", BUILDER="buildah")
    assert done.returncode == 0 and calls[-1].startswith("buildah bud"), (done.stderr, calls)
    done, _ = image_sh(tmp_path, bin_dir, "build", IMG="r:1", BUILDER="podman")
    assert done.returncode == 1 and "BUILDER=podman is not installed" in done.stderr


def test_make_docker_build_passes_img_and_base(tmp_path: Path) -> None:
    if shutil.which("make") is None:
        pytest.skip("make is missing")
    bin_dir = builders(tmp_path, "podman")
    (bin_dir / "bash").symlink_to("/bin/bash")
    calls = tmp_path / "calls"
    done = subprocess.run(
        ["make", "--no-print-directory", "-C", str(ROOT), "docker-build", "IMG=r:2", "BASE=b:1"],
        env={
            **os.environ,
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "CALLS": str(calls),
            "BUILDER": "podman",  # the fake, whatever else this machine has
        },
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert calls.read_text().splitlines()[-1] == (
        "podman build -t r:2 --build-arg BASE=b:1 --isolation chroot ."
    )
