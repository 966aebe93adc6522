"""`make mutate`: mutation testing of the planner, the kinds, the executor and the model.

mutmut (configured in setup.cfg) changes the code one small edit at a time and
runs the unit tests against each change. A change the tests do not notice
"survives": either the tests miss a behaviour, or the change is equivalent (it
behaves the same). Equivalent mutants are listed, each with the reason, in
hack/mutate-equivalent.txt; they leave the score's denominator.

A mutant that mypy --strict rejects (setup.cfg type_check_command) could never
be merged, since `make lint` runs mypy: it is not viable, and leaves the
denominator too, as a mutant that does not compile does in other languages.
mutmut 3.6 and later wrap each function in a decorator typed Callable[P, R],
which loses a TypeGuard (kinds/redis/spec.is_int): mypy then rejects the
unmutated wrappers and mutmut stops. --no-type-check runs without that filter,
so a mypy-rejected mutant is run and counted as any other.

Prints, per module, mutants killed by the tests / (viable - equivalent), and
exits 1 when a module is below the target. Mutant names number the edits within a function,
so the equivalent list is reviewed whenever those functions change: a listed
name that no longer survives is reported as stale.

    python hack/mutate.py            # run, then report
    python hack/mutate.py --report   # report the last run only
    python hack/mutate.py --only reconciler.kinds.redis --sample 300 --seed 7
    python hack/mutate.py --only reconciler.kinds.redis --survivors  # after adding tests

A sample runs only that many mutants of the modules chosen, picked by the seed
from the sorted list of their names, so two runs with the same seed and the same
code run the same mutants; the report then scores, per source module, only the
mutants that were run.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import random
import re
import shutil
import subprocess
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EQUIVALENT = ROOT / "hack" / "mutate-equivalent.txt"
TARGET = 0.95
MODULES = (
    "reconciler.engine.plan",
    "reconciler.kinds",
    "reconciler.engine.apply",
    "reconciler.engine.writes",  # the executor's requests, moved out of apply
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


def mutmut_env() -> dict[str, str]:
    # mutmut runs mypy (setup.cfg type_check_command) by name: the venv's first.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return {**os.environ, "HYPOTHESIS_PROFILE": "mutate", "PATH": path}


# `mutmut` with setup.cfg's type_check_command left out (--no-type-check).
UNTYPED = """
from mutmut.__main__ import cli
from mutmut.configuration import config

config().type_check_command = []
cli(prog_name="mutmut")
"""


def run(children: int, names: Sequence[str] = (), type_check: bool = True) -> None:
    """`mutmut run`: every mutant, or only those named."""
    launch = [mutmut()] if type_check else [sys.executable, "-c", UNTYPED]
    args = [*launch, "run", "--max-children", str(children), *names]
    subprocess.run(args, cwd=ROOT, env=mutmut_env(), check=True, stdout=subprocess.DEVNULL)


def generate(children: int) -> None:
    """The mutants and their names (mutants/**.meta), written as `mutmut run` first does.

    A later `mutmut run NAME...` finds them newer than the source and keeps them.
    """
    from mutmut import __main__ as mutmut_main

    os.chdir(ROOT)
    with contextlib.redirect_stdout(io.StringIO()):  # a line per file copied
        mutmut_main.copy_src_dir()
        mutmut_main.copy_also_copy_files()
        mutmut_main.create_mutants(children)
    copy_the_rest()


def copy_the_rest(root: Path = ROOT) -> None:
    """Every tracked file not yet in mutants/: the unit tests read more than
    setup.cfg's also_copy (hack/cluster/versions.env, crds/). A tracked link
    is made again as a link (reconciler/crds -> ../crds, the package's CRDs),
    which mutmut's copy of the package leaves out."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True)
    for name in listed.stdout.decode().split("\0"):
        source, target = root / name, root / "mutants" / name
        if not name or target.exists() or target.is_symlink():
            continue
        if source.is_symlink():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(os.readlink(source))
        elif source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def sample(names: Sequence[str], size: int, seed: int) -> list[str]:
    """size names drawn by seed from the sorted names: the same for the same code."""
    chosen = random.Random(seed).sample(sorted(names), min(size, len(names)))
    return sorted(chosen)


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


def source_module(name: str) -> str:
    """reconciler.kinds.redis.status of reconciler.kinds.redis.status.x_age__mutmut_3."""
    return name.rpartition(".")[0]


def chooser(only: Sequence[str], skip: Sequence[str]) -> Callable[[str], bool]:
    """Whether a mutant's name is in one of the modules only, and in none of skip."""

    def within(name: str, prefixes: Sequence[str]) -> bool:
        return any(name == p or name.startswith(p + ".") for p in prefixes)

    return lambda name: within(source_module(name), only) and not within(source_module(name), skip)


def module_of(name: str, modules: Sequence[str]) -> str:
    return next((m for m in modules if name.startswith(m + ".")), "other")


def tally(
    found: dict[str, str], listed: dict[str, str], modules: Sequence[str]
) -> tuple[dict[str, Counter[str]], list[str]]:
    """Per module, the mutants run by their outcome; and those not killed."""
    by_module: dict[str, Counter[str]] = defaultdict(Counter)
    survivors: list[str] = []
    for name, status in sorted(found.items()):
        if status in ("not checked", "skipped"):
            continue
        module = module_of(name, modules)
        if status == "survived" and name in listed:
            by_module[module]["equivalent"] += 1
        elif status == "caught by type check":
            by_module[module]["not viable"] += 1
        else:
            by_module[module][status] += 1
            if status != "killed":
                survivors.append(f"{name}: {status}")
    return by_module, survivors


def row(width: int, first: object, *rest: object) -> str:
    return f"{first!s:<{width}}" + "".join(f" {cell!s:>7}" for cell in rest)


def report(
    found: dict[str, str],
    listed: dict[str, str],
    modules: Sequence[str] = MODULES,
    chosen: Callable[[str], bool] = lambda name: True,
) -> bool:
    found = {name: status for name, status in found.items() if chosen(name)}
    by_module, survivors = tally(found, listed, modules)
    ok = True
    width = max(len(m) for m in (*modules, "module"))
    print(row(width, "module", "killed", "left", "equiv", "mypy", "score"))
    for module in modules:
        counts = by_module[module]
        equiv = counts.pop("equivalent", 0)
        typed = counts.pop("not viable", 0)
        total = sum(counts.values())
        score = counts["killed"] / total if total else 1.0
        ok &= score >= TARGET
        left = total - counts["killed"]
        print(row(width, module, counts["killed"], left, equiv, typed, f"{score:.1%}"))
    for survivor in survivors:
        print(f"  not killed: {survivor}")
    # Run and not surviving, or gone from a module that was mutated.
    stale = sorted(
        n for n in listed if chosen(n) and found.get(n, "gone") not in ("survived", "not checked")
    )
    for name in stale:
        print(f"  stale entry in {EQUIVALENT.name} (no longer a survivor): {name}")
    print(f"target: {TARGET:.0%} of non-equivalent mutants killed in each module")
    return ok and not stale


def run_chosen(args: argparse.Namespace, chosen: Callable[[str], bool]) -> None:
    """Generates the mutants, then runs those chosen, or a sample of them."""
    generate(args.children)
    names = [name for name in results() if chosen(name)]
    if args.sample is not None:
        names = sample(names, args.sample, args.seed)
    print(f"running {len(names)} mutants", file=sys.stderr)
    run(args.children, names, not args.no_type_check)


def run_survivors(args: argparse.Namespace, chosen: Callable[[str], bool]) -> None:
    """Reruns the chosen mutants of the last run that it did not kill (after
    tests were added): the others keep their results, so a sample stays the same."""
    ran = ("killed", "not checked", "caught by type check")
    names = [name for name, status in results().items() if chosen(name) and status not in ran]
    print(f"running {len(names)} mutants again", file=sys.stderr)
    if names:
        run(args.children, names, not args.no_type_check)


def report_chosen(chosen: Callable[[str], bool]) -> bool:
    """The report of the mutants chosen that were run, per source module."""
    found = {name: status for name, status in results().items() if chosen(name)}
    ran = {source_module(name) for name, status in found.items() if status != "not checked"}
    return report(found, equivalent(), sorted(ran), chosen)


def options() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--report", action="store_true", help="report the last run only")
    add("--children", type=int, default=os.cpu_count() or 2, help="mutants run side by side")
    add(
        "--only",
        action="append",
        default=[],
        metavar="MODULE",
        help="run only the mutants of this module or package (repeatable)",
    )
    add("--skip", action="append", default=[], metavar="MODULE", help="nor those of this one")
    add("--sample", type=int, metavar="N", help="run only N mutants, drawn by --seed")
    add("--seed", type=int, default=7, help="the sample's seed (default: 7)")
    add("--no-type-check", action="store_true", help="mypy-rejected mutants run as any other")
    add("--survivors", action="store_true", help="rerun only what the last run did not kill")
    return parser.parse_args()


def main() -> int:
    args = options()
    chosen = chooser(args.only or MODULES, args.skip)
    if args.survivors:
        run_survivors(args, chosen)
    elif not args.report:
        shutil.rmtree(ROOT / "mutants", ignore_errors=True)
        if args.only or args.sample is not None:
            run_chosen(args, chosen)
        else:
            generate(args.children)
            run(args.children, type_check=not args.no_type_check)
    if args.only or args.sample is not None:
        return 0 if report_chosen(chosen) else 1
    return 0 if report(results(), equivalent()) else 1


if __name__ == "__main__":
    sys.exit(main())
