"""CRDs older than the binary (Helm never upgrades CRDs): a pruned status
field costs no more writes than a current CRD, a missing status
subresource is an error that is said, and a missing scale subresource
leaves our disruption budgets counted. CRDs newer than the binary are a
warning. (0.1.0's own CRDs: test_upgrade.py.)"""

from __future__ import annotations

import re
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler import __version__
from reconciler.checks.cluster import CRD_FIX
from reconciler.engine.crd_release import APPLY_CRDS

from .conftest import Kubectl, Reconciler, free_port, passes_done, wait_for
from .test_check_fixes import paste
from .test_disruption import allowed, evict
from .test_redis import redis, redis_yaml, settled

CRD = Path(__file__).parents[2] / "crds" / "myapp.demo.kubebuilder.io_redis.yaml"
NAME = "redis.myapp.demo.kubebuilder.io"
PRUNED_LINE = (
    f"status.lastProgressTime is pruned by the installed CRD {NAME}: apply the CRDs of this release"
)


def install(kubectl: Kubectl, crd: dict[str, Any]) -> None:
    kubectl.run("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=yaml.safe_dump(crd))
    kubectl.run("wait", "--for=condition=established", f"crd/{NAME}")


pytestmark = pytest.mark.serial("replaces the Redis CRD that every namespace's Redis is served by")


@pytest.fixture
def older_crd(kubectl: Kubectl) -> Iterator[Callable[[Callable[[dict[str, Any]], None]], None]]:
    """Install the Redis CRD as an older release had it; this release's again after."""

    def older(change: Callable[[dict[str, Any]], None], release: str = __version__) -> None:
        crd = yaml.safe_load(CRD.read_text())
        change(crd["spec"]["versions"][0])
        crd["metadata"]["labels"]["app.kubernetes.io/version"] = release
        install(kubectl, crd)

    yield older
    install(kubectl, yaml.safe_load(CRD.read_text()))


def without_progress_time(version: dict[str, Any]) -> None:
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]
    del status["properties"]["lastProgressTime"]


def without_status_subresource(version: dict[str, Any]) -> None:
    del version["subresources"]["status"]


def without_scale_subresource(version: dict[str, Any]) -> None:
    del version["subresources"]["scale"]


def status_writes(port: int) -> float:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    found = re.search(
        r'^reconciler_actions_total\{kind="Redis",result="ok",verb="patch-status"\} (\S+)$',
        text,
        re.M,
    )
    return float(found[1]) if found else 0.0


def test_a_pruned_status_field_is_named_once_and_not_written_again(
    kubectl: Kubectl, reconciler: Reconciler, ns: str, older_crd: Any
):
    older_crd(without_progress_time)
    kubectl.apply(redis_yaml(ns, num=2))
    port = free_port()
    proc = reconciler.daemon(ns, "--metrics-address", f"127.0.0.1:{port}")
    try:
        wait_for(lambda: settled(kubectl, ns), what="pods Ready", timeout=60)
        wait_for(lambda: redis(kubectl, ns).get("status", {}).get("state") == "Ready", what="Ready")
        seen = passes_done(port)
        wait_for(lambda: passes_done(port) >= seen + 3, what="three passes that see it Ready")
        before, seen = status_writes(port), passes_done(port)
        wait_for(lambda: passes_done(port) >= seen + 8, what="eight passes more", timeout=60)
        assert status_writes(port) == before
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    assert "lastProgressTime" not in redis(kubectl, ns)["status"]
    assert out.count(PRUNED_LINE) == 1, out[-3000:]
    # The apiserver says it too, in a Warning header on every such write: logged once.
    assert out.count('the apiserver warns: unknown field "status.lastProgressTime"') == 1
    events = kubectl.json(
        "get", "events", "-n", ns, "--field-selector", "reason=StatusFieldPruned"
    )["items"]
    assert [(e["type"], e["message"]) for e in events] == [("Warning", PRUNED_LINE)]


def test_a_crd_without_its_status_subresource_fails_sync_with_one_line(
    kubectl: Kubectl, reconciler: Reconciler, ns: str, older_crd: Any
):
    older_crd(without_status_subresource)
    kubectl.apply(redis_yaml(ns, num=1))
    result = reconciler.sync(ns, expect=1)
    line = f"the installed CRD {NAME} has no status subresource: apply the CRDs of this release"
    assert [e for e in result.summary["errors"] if line in e], result.summary["errors"]
    assert result.summary["actions"].get("Redis/patch-status/failed") == 1
    assert result.summary["actions"].get("Pod/create/ok") == 1  # the rest still done


def test_plan_names_a_crd_another_release_shipped(
    kubectl: Kubectl, reconciler: Reconciler, ns: str, older_crd: Any
):
    current = reconciler.cli("plan", "-n", ns)
    assert "warning: the installed CRD" not in current.stderr
    older_crd(lambda _version: None, release="0.0.9")
    proc = reconciler.cli("plan", "-n", ns)
    assert [ln for ln in proc.stderr.splitlines() if ln.startswith("warning:")] == [
        f"warning: the installed CRD {NAME} is release 0.0.9's; this is {__version__}: "
        f"apply the CRDs of this release ({APPLY_CRDS})"
    ]


def test_check_s_fix_for_an_older_crd_works_as_printed(
    kubectl: Kubectl, reconciler: Reconciler, ns: str, older_crd: Any, tmp_path: Path
):
    """The fix line under an older CRD's ✗, pasted by an admin in a directory
    with no checkout, puts this release's CRD in, and check passes it."""
    older_crd(lambda _version: None, release="0.0.9")
    before = reconciler.cli("check", "-n", ns, expect=1).stdout.splitlines()
    at = before.index(
        f"✗ CRDs: {NAME} is release 0.0.9's; this is {__version__}:"
        " the fields it does not know are pruned"
    )
    assert before[at + 1] == f"    fix: {CRD_FIX}"
    paste(kubectl, CRD_FIX, tmp_path)
    after = reconciler.cli("check", "-n", ns).stdout
    assert f"✓ CRDs: {NAME} of release {__version__}\n" in after, after


def test_a_crd_without_its_scale_subresource_still_has_its_budgets_counted(
    kubectl: Kubectl, reconciler: Reconciler, ns: str, older_crd: Any
):
    """The disruption controller counts a budget of an integer minAvailable
    from the pods alone; one of maxUnavailable it could not count without
    the Redis's scale, and every eviction would wait for it forever."""
    older_crd(without_scale_subresource)
    kubectl.apply(redis_yaml(ns, num=3))
    reconciler.converge(ns, settle=lambda: settled(kubectl, ns))
    wait_for(lambda: allowed(kubectl, ns) == 1, what="the budget counted: one may go")
    went, why = evict(kubectl, ns, "redis-sample-0")
    assert went, why


def test_a_newer_releases_crd_is_a_warning_naming_the_binary_to_run(
    reconciler: Reconciler, ns: str, older_crd: Any
):
    """CRDs newer than the binary: it ignores their new fields, so `check`
    warns (exit 0) rather than fails, and both name the release to run."""
    major, minor, _ = __version__.split(".")
    newer = f"{major}.{int(minor) + 1}.0"
    older_crd(lambda _version: None, release=newer)
    step = f"run reconciler {newer}, which knows the fields this one ignores"
    plan = reconciler.cli("plan", "-n", ns)
    assert [ln for ln in plan.stderr.splitlines() if ln.startswith("warning:")] == [
        f"warning: the installed CRD {NAME} is release {newer}'s, newer than this "
        f"{__version__}: {step}"
    ]
    check = reconciler.cli("check", "-n", ns)
    lines = check.stdout.splitlines()
    at = lines.index(f"! CRDs: {NAME} is release {newer}'s, newer than this {__version__}")
    assert lines[at + 1] == f"    fix: {step}", check.stdout
    assert not [ln for ln in lines if ln.startswith("✗")], check.stdout
