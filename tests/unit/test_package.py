"""`python -m build` makes an sdist and a wheel, and each installs with pipx
into a clean place where `reconciler --version` answers: what a user of the
package gets, not the editable install the tests run against."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler import __version__

ROOT = Path(__file__).resolve().parents[2]
# Local state and caches, not part of the source (as in .gitignore).
IGNORED = (".git", ".venv", ".cluster*", "mutants", ".*cache", ".hypothesis", "build", "dist")
IGNORED += ("*.egg-info", "__pycache__")


def _tool(module: str) -> None:
    if subprocess.run([sys.executable, "-c", f"import {module}"]).returncode != 0:
        if os.environ.get("REQUIRE_SYSTEM_TOOLS"):
            pytest.fail(f"{module} is not installed (make deps installs it)")
        pytest.skip(f"{module} is not installed")


def test_sdist_and_wheel_install_with_pipx_and_answer_version(tmp_path):
    _tool("build")
    _tool("pipx")
    src = tmp_path / "src"  # a copy, so the build leaves nothing in the checkout
    shutil.copytree(
        ROOT,
        src,
        ignore=shutil.ignore_patterns(*IGNORED),
    )
    dist = tmp_path / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(dist), str(src)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    wheel = next(dist.glob("reconciler-*.whl"))
    sdist = next(dist.glob("reconciler-*.tar.gz"))
    for artifact in (wheel, sdist):
        home = tmp_path / f"pipx-{artifact.suffix}"
        env = {
            **os.environ,
            "PIPX_HOME": str(home / "home"),
            "PIPX_BIN_DIR": str(home / "bin"),
            "PIPX_MAN_DIR": str(home / "man"),
        }
        installed = subprocess.run(
            [sys.executable, "-m", "pipx", "install", str(artifact)],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert installed.returncode == 0, installed.stderr[-2000:]
        answer = subprocess.run(
            [str(home / "bin" / "reconciler"), "--version"], capture_output=True, text=True
        )
        assert answer.stdout.strip() == f"reconciler, version {__version__}", artifact.name
        # The CRDs are package data: printed from any directory, as crds/ has them.
        printed = subprocess.run(
            [str(home / "bin" / "reconciler"), "manifests", "crds"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
        )
        shipped = "---\n".join(p.read_text() for p in sorted((ROOT / "crds").glob("*.yaml")))
        assert printed.returncode == 0 and printed.stdout == shipped, printed.stderr
