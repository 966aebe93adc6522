"""The e2e suite as `make test` runs it, in two steps on one local cluster.

1. The tests that share the cluster run side by side on ``E2E_WORKERS`` xdist
   workers: most of an e2e test's time is spent waiting on other components
   (kwok, the garbage collector, a daemon's next pass), not on the two cores.
   A module is the unit a worker takes (``--dist loadscope``): several hold
   a module-scoped fixture that must exist once (test_faults' and test_fleet's
   own clusters, test_image's build), and a second worker tearing it down
   would pull it from under the first. Workers take the modules longest
   first, by their times in the last run (kept in the cache).
2. The tests marked ``serial`` (they stop or throttle an apiserver, change
   CRDs or webhooks, run cluster-wide daemons...) then run alone.

Both steps always run; the 20 slowest tests of the two are printed last. The
cluster is brought up once for both and taken down at the end unless it was
already up (or KEEP_E2E_CLUSTER is set). Extra arguments go to both pytests,
e.g. ``python hack/e2e.py tests/e2e/test_redis.py -x``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from hack.cluster import cluster as launcher
from hack.cluster import realnode

ROOT = Path(__file__).resolve().parents[1]
WORKERS = 3  # measured on the 2-core machine: CONTRIBUTING.md, "How long the tests take"
SLOWEST = 20
NO_TESTS = 5  # pytest's exit code when the selection is empty
TEST_NAMESPACE_PREFIX = "e2e-"  # the e2e tests' namespaces (tests/e2e/conftest.py, ns)
SETTLE = 180.0  # seconds to wait for them to be gone before the serial step
# Each module's time in the last run, so the next gives the longest out first.
DURATIONS = (
    Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    / "reconciler"
    / "e2e-durations.json"
)


@dataclass(frozen=True)
class Step:
    name: str
    marker: str
    xdist: tuple[str, ...]


def steps(workers: int) -> tuple[Step, ...]:
    side = (
        ("-n", str(workers), "--dist", "loadscope", "--no-loadscope-reorder") if workers > 1 else ()
    )
    return (
        Step("side by side", "e2e and not serial", side),
        Step("serial", "e2e and serial", ()),
    )


@dataclass(frozen=True)
class Timing:
    test: str
    seconds: float


def timings(report: Path) -> list[Timing]:
    """Each test's whole time (setup, call and teardown) from a JUnit report."""
    if not report.exists():
        return []
    root = ET.parse(report).getroot()
    return [
        Timing(f"{case.get('classname', '')}::{case.get('name', '')}", float(case.get("time", 0)))
        for case in root.iter("testcase")
    ]


def slowest(reports: list[Path], count: int = SLOWEST) -> list[Timing]:
    every = [t for report in reports for t in timings(report)]
    return sorted(every, key=lambda t: t.seconds, reverse=True)[:count]


def outcome(codes: list[int]) -> int:
    """0 if every step passed or selected nothing, else the first failure's code."""
    failed = [code for code in codes if code not in (0, NO_TESTS)]
    if failed:
        return failed[0]
    return 0 if any(code == 0 for code in codes) else NO_TESTS


def _nothing_left(node: realnode.Node) -> int:
    """0 if the real node, once down, left nothing on the host; else 1, each
    leftover printed: a run that leaves mounts or processes behind fails."""
    left = node.leftovers()
    for line in left:
        print(f"== left on the host by the real node: {line}")
    return 1 if left else 0


def module_seconds(reports: list[Path]) -> dict[str, float]:
    """Each module's whole time, by its path (tests/e2e/test_x.py)."""
    seconds: dict[str, float] = {}
    for t in (t for report in reports for t in timings(report)):
        module = "/".join(t.test.split("::")[0].split(".")[:3]) + ".py"
        seconds[module] = seconds.get(module, 0.0) + t.seconds
    return seconds


def longest_first(modules: list[str], known: dict[str, float]) -> list[str]:
    """The modules in the order workers should take them: a module of unknown
    time first, then the longest. A long module taken last would run on alone
    while the other workers sit idle; taken first, the short ones fill in
    around it."""
    return sorted(modules, key=lambda m: (-known.get(m, float("inf")), m))


def remembered() -> dict[str, float]:
    try:
        found = json.loads(DURATIONS.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in found.items()} if isinstance(found, dict) else {}


def remember(reports: list[Path]) -> None:
    DURATIONS.parent.mkdir(parents=True, exist_ok=True)
    DURATIONS.write_text(json.dumps({**remembered(), **module_seconds(reports)}, indent=1))


def targets(argv: list[str]) -> list[str]:
    """What both steps run: the arguments given, else every module, the
    longest of the last run first."""
    if argv:
        return argv
    modules = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests" / "e2e").glob("test_*.py"))
    return longest_first(modules, remembered())


def test_namespaces(kubeconfig: Path) -> list[str]:
    """The e2e tests' namespaces still in the cluster (terminating, mostly)."""
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    cmd = ["kubectl", "get", "namespaces", "-o", "name"]
    found = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
    names = [line.removeprefix("namespace/") for line in found.stdout.split()]
    return [n for n in names if n.startswith(TEST_NAMESPACE_PREFIX)]


def settle(kubeconfig: Path) -> None:
    """Before the serial step: the side-by-side tests left their namespaces
    to the namespace controller, and a serial test may pass over every
    namespace, where their pods would be another test's leftovers."""
    deadline = time.monotonic() + SETTLE
    while (left := test_namespaces(kubeconfig)) and time.monotonic() < deadline:
        time.sleep(1)
    if left:
        print(f"== still deleting after {SETTLE:.0f}s: {' '.join(left)}")


def main(argv: list[str]) -> int:
    workers = int(os.environ.get("E2E_WORKERS", WORKERS))
    was_up = launcher.status() is not None
    cluster = launcher.up()
    codes = []
    with tempfile.TemporaryDirectory(prefix="e2e-reports-") as tmp:
        reports = []
        try:
            for i, step in enumerate(steps(workers)):
                if i:
                    settle(cluster.kubeconfig)
                report = Path(tmp) / f"{step.name.replace(' ', '-')}.xml"
                reports.append(report)
                print(f"== e2e, {step.name}: pytest -m '{step.marker}' {' '.join(step.xdist)}")
                cmd = [sys.executable, "-m", "pytest", "-q", "-m", step.marker, *step.xdist]
                cmd += [f"--junitxml={report}", *targets(argv)]
                codes.append(subprocess.run(cmd, cwd=ROOT).returncode)
        finally:
            if not was_up and not os.environ.get("KEEP_E2E_CLUSTER"):
                node = realnode.Node.of(launcher.DEFAULT_STATE_DIR)
                asked = realnode.requested(node)
                launcher.down()
                if asked:
                    codes.append(_nothing_left(node))
        remember(reports[:1])  # the order matters to the side-by-side step only
        print(f"== the {SLOWEST} slowest e2e tests (setup, call and teardown)")
        for t in slowest(reports):
            print(f"{t.seconds:8.1f}s  {t.test}")
    return outcome(codes)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
