"""`make mutate`: mutation testing of the planner, the kinds, the executor and the model.

mutmut (configured in setup.cfg) changes the code one small edit at a time and
runs the unit tests against each change. A change the tests do not notice
"survives": either the tests miss a behaviour, or the change is equivalent (it
behaves the same). Equivalent mutants are listed, each with the reason, in
hack/mutate-equivalent.txt; they leave the score's denominator.

A mutant that mypy --strict rejects (setup.cfg type_check_command) could never
be merged, since `make lint` runs mypy: it is not viable, and leaves the
denominator too, as a mutant that does not compile does in other languages.

Prints, per module, mutants killed by the tests / (viable - equivalent), and
exits 1 when a module is below the target. Mutant names number the edits within a function,
so the equivalent list is reviewed whenever those functions change: a listed
name that no longer survives is reported as stale.

    python hack/mutate.py            # run, then report
    python hack/mutate.py --report   # report the last run only
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EQUIVALENT = ROOT / "hack" / "mutate-equivalent.txt"
TARGET = 0.95
MODULES = (
    "reconciler.engine.plan",
    "reconciler.kinds",
    "reconciler.engine.apply",
    "reconciler.engine.failures",  # the executor's, moved out of apply
    "reconciler.model",
    "reconciler.client.pod_dict",  # the model's decoders, moved to client/
    "reconciler.client.json_wire",
    "reconciler.client.pod_fields",  # the typed decoders' pod, shared
)
LINE = re.compile(r"^\s*(\S+__mutmut_\d+): (.+)$")


def mutmut() -> str:
    here = Path(sys.executable).parent / "mutmut"
    return str(here) if here.exists() else "mutmut"


def run(children: int) -> None:
    shutil.rmtree(ROOT / "mutants", ignore_errors=True)
    # mutmut runs mypy (setup.cfg type_check_command) by name: the venv's first.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {**os.environ, "HYPOTHESIS_PROFILE": "mutate", "PATH": path}
    args = [mutmut(), "run", "--max-children", str(children)]
    subprocess.run(args, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)


def results() -> dict[str, str]:
    out = subprocess.run(
        [mutmut(), "results", "--all", "true"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    found = {}
    for line in out.splitlines():
        if m := LINE.match(line):
            found[m.group(1)] = m.group(2).strip()
    return found


def equivalent() -> dict[str, str]:
    """name -> why, from lines "name  # why"; blank lines and comments skipped."""
    listed = {}
    for raw in EQUIVALENT.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, _, why = line.partition("#")
        if not why.strip():
            raise SystemExit(f"{EQUIVALENT.name}: {name.strip()}: say why it is equivalent")
        listed[name.strip()] = why.strip()
    return listed


def module_of(name: str) -> str:
    return next((m for m in MODULES if name.startswith(m + ".")), "other")


def report(found: dict[str, str], listed: dict[str, str]) -> bool:
    by_module: dict[str, Counter[str]] = defaultdict(Counter)
    survivors: list[str] = []
    for name, status in sorted(found.items()):
        if status in ("not checked", "skipped"):
            continue
        module = module_of(name)
        if status == "survived" and name in listed:
            by_module[module]["equivalent"] += 1
        elif status == "caught by type check":
            by_module[module]["not viable"] += 1
        else:
            by_module[module][status] += 1
            if status != "killed":
                survivors.append(f"{name}: {status}")
    ok = True
    header = ("module", "killed", "left", "equiv", "mypy", "score")
    print("{:<20} {:>7} {:>6} {:>6} {:>6} {:>7}".format(*header))
    for module in MODULES:
        counts = by_module[module]
        equiv = counts.pop("equivalent", 0)
        typed = counts.pop("not viable", 0)
        total = sum(counts.values())
        score = counts["killed"] / total if total else 1.0
        ok &= score >= TARGET
        left = total - counts["killed"]
        row = (module, counts["killed"], left, equiv, typed, f"{score:.1%}")
        print("{:<20} {:>7} {:>6} {:>6} {:>6} {:>7}".format(*row))
    for line in survivors:
        print(f"  not killed: {line}")
    stale = sorted(n for n in listed if found.get(n) != "survived")
    for name in stale:
        print(f"  stale entry in {EQUIVALENT.name} (no longer a survivor): {name}")
    print(f"target: {TARGET:.0%} of non-equivalent mutants killed in each module")
    return ok and not stale


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", action="store_true", help="report the last run only")
    parser.add_argument("--children", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()
    if not args.report:
        run(args.children)
    return 0 if report(results(), equivalent()) else 1


if __name__ == "__main__":
    sys.exit(main())
