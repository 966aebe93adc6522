"""`eval "$(python3 hack/cluster/cluster.py env)"` in a fresh shell finds the
cluster and the tools the demo's "Try next" lines use."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_env_sets_kubeconfig_and_puts_the_venv_first_on_path():
    if not (ROOT / ".venv" / "bin" / "reconciler").exists():
        pytest.skip("no .venv with reconciler installed (make deps makes one)")
    probe = (
        f'cd {ROOT} && eval "$({sys.executable} hack/cluster/cluster.py env)" && '
        'echo "$KUBECONFIG" && command -v reconciler && command -v kubectl'
    )
    bare = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"}
    out = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", probe],
        capture_output=True,
        text=True,
        env=bare,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    kubeconfig, reconciler, kubectl = out.stdout.splitlines()
    assert kubeconfig == str(ROOT / ".cluster" / "kubeconfig")
    assert reconciler == str(ROOT / ".venv" / "bin" / "reconciler")
    venv_kubectl = ROOT / ".venv" / "bin" / "kubectl"
    assert kubectl == str(venv_kubectl) if venv_kubectl.exists() else kubectl.startswith("/")
