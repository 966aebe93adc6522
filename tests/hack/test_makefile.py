"""The Makefile on a bastion: `make install`, `uninstall`, `deploy` and
`undeploy` need kubectl and nothing else, `make run` and `make sync` only the
venv; Go, apt-get and the source builds stay with the local cluster and the
tests. Make runs here with a PATH of a few symlinks (make, bash, coreutils,
awk) and a fake kubectl that records how it was called, and with VENV pointing
at a directory that holds none of the local cluster's binaries."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SYSTEM_PATH = "/usr/bin:/bin"
# What make and hack/deploy.sh call besides kubectl.
TOOLS = ("make", "bash", "env", "dirname", "mktemp", "realpath", "rm", "awk")
BUILD_STEPS = re.compile(
    r"hack/deps\.sh|hack/cluster/build\.sh|hack/tools/|apt-get|(^|[\s;&|(])go\s", re.M
)

# What the fake kubectl prints for `kubectl kustomize ...`: a CRD whose schema
# has `kind` keys of its own (indented, as in every CRD), between two others.
RENDERED = """\
apiVersion: v1
kind: Namespace
metadata:
  name: reconciler-system
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: redis.example.com
spec:
  versions:
  - schema:
      openAPIV3Schema:
        properties:
          kind:
            type: string
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: reconciler
  namespace: reconciler-system
"""

FAKE_KUBECTL = """\
#!{python}
# A kubectl that appends its arguments (and what it read for `-f -`) to a log.
import json, os, sys
args = sys.argv[1:]
if args[:1] == ["kustomize"] and os.environ.get("REAL_KUBECTL"):
    os.execv(os.environ["REAL_KUBECTL"], ["kubectl", *args])
stdin = sys.stdin.read() if args[-2:] == ["-f", "-"] or "-" in args else None
with open({log!r}, "a") as log:
    log.write(json.dumps({{"kubectl": {tag!r}, "args": args, "stdin": stdin}}) + "\\n")
if args[:1] == ["kustomize"]:
    sys.stdout.write({rendered!r})
"""


def fake_kubectl(directory: Path, log: Path, tag: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "kubectl"
    path.write_text(
        FAKE_KUBECTL.format(python=sys.executable, log=str(log), tag=tag, rendered=RENDERED)
    )
    path.chmod(0o755)
    return path


@pytest.fixture
def bare(tmp_path: Path) -> Path:
    """A bin directory with make, bash and the few tools the recipes use: no
    go, no kubectl, no python3, nothing of the local cluster."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool, path=SYSTEM_PATH)
        if found is None:
            pytest.skip(f"{tool} is not in {SYSTEM_PATH}")
        (bin_dir / tool).symlink_to(found)
    return bin_dir


def make(
    tmp_path: Path, path: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """make in the repository, with only `path` on PATH and VENV set to an
    empty directory of tmp_path (unless a test put a kubectl there)."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        ["make", "--no-print-directory", "-C", str(ROOT), f"VENV={venv}", *args],
        capture_output=True,
        text=True,
        env={"PATH": str(path), "HOME": str(tmp_path), **(env or {})},
        timeout=60,
    )


def calls(log: Path) -> list[dict[str, object]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def kinds(stream: object) -> list[str]:
    assert isinstance(stream, str)
    return [d["kind"] for d in yaml.safe_load_all(stream) if d]


def test_the_bare_path_has_no_go_and_no_kubectl(bare: Path) -> None:
    # The premise of the tests below: what they do not find is not there.
    for tool in ("go", "kubectl", "python3", "apt-get"):
        assert shutil.which(tool, path=str(bare)) is None


def test_dry_run_of_the_bastion_targets_has_no_build_step(tmp_path: Path, bare: Path) -> None:
    fake_kubectl(bare, tmp_path / "log", "path")
    targets = ("install", "deploy", "run", "uninstall", "undeploy", "sync")
    out = make(tmp_path, bare, "-n", *targets)
    assert out.returncode == 0, out.stderr
    assert not BUILD_STEPS.search(out.stdout), out.stdout
    assert "kubectl apply -f crds/" in out.stdout
    assert "kubectl delete --ignore-not-found -f crds/" in out.stdout
    assert "hack/deploy.sh deploy" in out.stdout and "hack/deploy.sh undeploy" in out.stdout
    assert "reconciler run" in out.stdout and "reconciler sync" in out.stdout
    assert "hack/venv.sh" in out.stdout  # run and sync make the venv, and only that
    assert calls(tmp_path / "log") == []  # -n ran nothing


def test_install_calls_kubectl_apply_and_nothing_else(tmp_path: Path, bare: Path) -> None:
    log = tmp_path / "log"
    fake_kubectl(bare, log, "path")
    out = make(tmp_path, bare, "install")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["kubectl apply -f crds/"]
    assert [(c["kubectl"], c["args"]) for c in calls(log)] == [("path", ["apply", "-f", "crds/"])]


def test_uninstall_calls_kubectl_delete_and_nothing_else(tmp_path: Path, bare: Path) -> None:
    log = tmp_path / "log"
    fake_kubectl(bare, log, "path")
    out = make(tmp_path, bare, "uninstall")
    assert out.returncode == 0, out.stderr
    assert [c["args"] for c in calls(log)] == [["delete", "--ignore-not-found", "-f", "crds/"]]


def test_the_local_clusters_kubectl_in_the_venv_comes_first(tmp_path: Path, bare: Path) -> None:
    # After `make deps`, VENV/bin holds the kubectl that matches the local cluster.
    log = tmp_path / "log"
    fake_kubectl(bare, log, "path")
    fake_kubectl(tmp_path / "venv" / "bin", log, "venv")
    out = make(tmp_path, bare, "install")
    assert out.returncode == 0, out.stderr
    assert [(c["kubectl"], c["args"]) for c in calls(log)] == [("venv", ["apply", "-f", "crds/"])]


def test_deploy_renders_and_applies_with_kubectl_alone(tmp_path: Path, bare: Path) -> None:
    log = tmp_path / "log"
    fake_kubectl(bare, log, "path")
    out = make(tmp_path, bare, "deploy", "IMG=registry.example.com/reconciler:0.2.0")
    assert out.returncode == 0, out.stderr
    render, apply = calls(log)
    assert render["args"][0] == "kustomize"
    assert apply["args"] == ["apply", "-f", "-"]
    assert kinds(apply["stdin"]) == ["Namespace", "CustomResourceDefinition", "Deployment"]


def test_undeploy_deletes_all_but_the_crds_with_kubectl_alone(tmp_path: Path, bare: Path) -> None:
    log = tmp_path / "log"
    fake_kubectl(bare, log, "path")
    out = make(tmp_path, bare, "undeploy")
    assert out.returncode == 0, out.stderr
    render, delete = calls(log)
    assert render["args"] == ["kustomize", "config/daemon"]
    assert delete["args"] == ["delete", "--ignore-not-found", "-f", "-"]
    assert kinds(delete["stdin"]) == ["Namespace", "Deployment"]


def test_undeploy_of_the_real_overlays_leaves_out_exactly_the_crds(
    tmp_path: Path, bare: Path
) -> None:
    real = ROOT / ".venv" / "bin" / "kubectl"
    if not os.access(real, os.X_OK):
        pytest.skip("no kubectl in .venv/bin (make deps builds it)")
    log = tmp_path / "log"
    fake_kubectl(bare, log, "path")
    for overlay in ("config/daemon", "config/cronjob", "config/daemon-sharded"):
        log.unlink(missing_ok=True)
        out = make(
            tmp_path, bare, "undeploy", f"OVERLAY={overlay}", env={"REAL_KUBECTL": str(real)}
        )
        assert out.returncode == 0, out.stderr
        (delete,) = calls(log)
        full = subprocess.run(
            [str(real), "kustomize", str(ROOT / overlay)],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
        want = [
            d for d in yaml.safe_load_all(full) if d and d["kind"] != "CustomResourceDefinition"
        ]
        assert "CustomResourceDefinition" in kinds(full)
        assert isinstance(delete["stdin"], str)
        assert [d for d in yaml.safe_load_all(delete["stdin"]) if d] == want


@pytest.mark.parametrize("target", ["install", "uninstall", "deploy", "undeploy"])
def test_without_kubectl_the_target_stops_on_one_line(
    tmp_path: Path, bare: Path, target: str
) -> None:
    out = make(tmp_path, bare, target)
    assert out.returncode != 0
    assert out.stdout == ""  # nothing ran
    (line,) = out.stderr.splitlines()
    assert f"make {target}: kubectl not found on PATH" in line
    assert "https://kubernetes.io/docs/tasks/tools/" in line and "make deps" in line


def rules() -> dict[str, tuple[list[str], str]]:
    """Each documented target: its prerequisites and its `##` line."""
    found = {}
    for line in (ROOT / "Makefile").read_text().splitlines():
        m = re.match(r"^([a-z0-9-]+):([^#=]*)## (.*)$", line)
        if m:
            found[m[1]] = (m[2].split(), m[3])
    return found


def test_help_says_which_targets_need_go(tmp_path: Path) -> None:
    table = rules()

    def builds(target: str) -> bool:
        pres, _ = table.get(target, ([], ""))
        return target in ("deps", "cluster-build") or any(builds(p) for p in pres)

    for target, (_, text) in table.items():
        if builds(target):
            assert "Go" in text or "needs what" in text, (target, text)
        else:
            assert "needs deps" not in text and "Go >=" not in text, (target, text)
    for target in ("install", "uninstall", "deploy", "undeploy"):
        assert not builds(target) and "needs kubectl only" in table[target][1]
    for target in ("run", "sync"):
        assert not builds(target) and table[target][0] == ["venv"]
        assert "no kubectl, Go or apt-get" in table[target][1]
    assert not builds("venv") and not builds("test-unit") and not builds("lint")
    for target in ("demo", "test", "test-e2e", "cluster-up", "tools", "helm", "bench"):
        assert builds(target), target
