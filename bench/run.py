"""Cost per pass and convergence at scale, against the write limit and kopf.

    python -m bench.run [--sizes 100,500,1000] [--keep] [--no-kopf] [--no-profile]

Starts a dedicated local cluster in <repo>/.cluster-bench, and for each N
measures, each in a fresh namespace holding N Redis and N Xca objects: the
write limit, the reconciler's cold convergence and a steady pass, and the kopf
peer. Then it profiles a cold first pass and a steady pass at the largest N,
prints one table with the ratios and targets, and writes everything to
bench/results/<UTC timestamp>.json. See docs/performance.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import platform
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import contenders, report
from bench.contenders import Setup
from bench.kubeapi import populate
from bench.watch import namespace_board, pods_settled
from hack.cluster import cluster as launcher

log = logging.getLogger("bench")

ROOT = Path(__file__).resolve().parents[1]
STATE_DIR = ROOT / ".cluster-bench"
RESULTS = ROOT / "bench" / "results"


def publish(bench: str, stamp: str, argv: list[str] | None, doc: dict[str, Any]) -> Path:
    """Write a run's JSON to bench/results/<bench>-<stamp>.json, with the
    command that made it, and print its table and where it went."""
    out = RESULTS / f"{bench}-{stamp}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    command = f"python -m bench.{bench} " + " ".join(argv or sys.argv[1:])
    out.write_text(json.dumps({"command": command, **doc}, indent=2, default=str) + "\n")
    print(doc["table"])
    print(f"\nresults: {out}")
    return out


def _tree_hash(root: Path) -> str:
    """Content hash of the Python sources under root, to detect edits mid-run."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def byte_compile(dest: Path) -> None:
    """Compile the frozen copy as an installed package is compiled, so that a
    contender started with PYTHONDONTWRITEBYTECODE (set on the bench machine)
    does not compile reconciler/ at every start: about 0.04 s of CPU."""
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "reconciler", "bench"], cwd=dest, check=True
    )


def freeze_code(dest: Path, worktree: bool) -> dict[str, str]:
    """Copy reconciler/ and bench/ so every child of this run runs the same code.

    By default the copy is of the last commit (``git archive HEAD``), so a
    result names exactly the code it measured, whatever is being edited in the
    work tree meanwhile; ``worktree`` copies the work tree as it is instead.
    Children started with cwd=dest import the copy (for ``python -m``, the
    working directory comes first on sys.path).
    """
    dest.mkdir(parents=True, exist_ok=True)
    if worktree:
        ignore = shutil.ignore_patterns("__pycache__", "results")
        for package in ("reconciler", "bench"):
            shutil.copytree(ROOT / package, dest / package, ignore=ignore, dirs_exist_ok=True)
    else:
        archive = subprocess.run(
            ["git", "archive", "HEAD", "reconciler", "bench"], cwd=ROOT, capture_output=True
        )
        if archive.returncode != 0:
            raise SystemExit(f"git archive failed: {archive.stderr.decode().strip()}")
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    byte_compile(dest)
    return {
        "dir": str(dest),
        "source": "worktree" if worktree else "HEAD",
        "reconciler_sha": _tree_hash(dest / "reconciler"),
    }


def _git(*args: str) -> str:
    res = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
    return res.stdout.strip()


def _machine() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "loadavg_at_start": os.getloadavg(),
        "commit": _git("rev-parse", "HEAD"),
        "reconciler_dirty": bool(_git("status", "--porcelain", "reconciler")),
    }


def measure_size(setup: Setup, n: int, with_kopf: bool) -> dict[str, Any]:
    """All contenders at one N, one after the other, each settled before the next.

    The write limit runs first and last and is averaged, so a load that drifts
    during the size's measurements weighs on it as on the others."""
    log.info("N=%d: write limit (before)", n)
    runs = [contenders.run_write_limit(setup, n)]
    log.info("N=%d: write limit %.2fs", n, runs[0]["wall"])
    log.info("N=%d: reconciler cold convergence and steady pass", n)
    rec = contenders.run_reconciler(setup, n)
    row: dict[str, Any] = {"n": n, "reconciler": rec.to_json()}
    log.info("N=%d: reconciler cold %.2fs in %d passes", n, rec.cold_wall, len(rec.passes))
    if with_kopf:
        log.info("N=%d: kopf peer (timeout %.0fs)", n, setup.kopf_timeout)
        row["kopf"] = contenders.run_kopf(setup, n)
        log.info("N=%d: kopf %s", n, row["kopf"]["wall"])
    log.info("N=%d: write limit (after)", n)
    runs.append(contenders.run_write_limit(setup, n))
    log.info("N=%d: write limit %.2fs", n, runs[1]["wall"])
    row["write_limit"] = contenders.bracket(runs)
    row["write_limit_runs"] = runs
    row["ratios"] = report.ratios(row)
    row["verdicts"] = report.verdicts(row)
    return row


def _profile_pass(setup: Setup, namespace: str, prefix: Path) -> dict[str, Any]:
    argv = [sys.executable, "-m", "bench.profile", str(prefix), "--"]
    argv += ["sync", *contenders.target_args(namespace, setup.kubeconfig), "-o", "json"]
    res = subprocess.run(
        argv,
        env=setup.reconciler_env(),
        capture_output=True,
        text=True,
        cwd=setup.code_dir,
        check=False,
    )
    out: dict[str, Any] = {"returncode": res.returncode, "files": str(prefix) + ".*"}
    if res.returncode != 0:
        out["stderr"] = res.stderr.strip().splitlines()[-1:]
    for part in ("main", "workers"):
        tree = Path(f"{prefix}.{part}.txt")
        if tree.exists():
            out[f"{part}_tree"] = tree.read_text().splitlines()[:80]
    return out


def profile(setup: Setup, n: int, out_dir: Path) -> dict[str, Any]:
    """pyinstrument over a cold first pass and a steady pass, in a namespace of their own."""
    out_dir.mkdir(parents=True, exist_ok=True)
    namespace = f"bench-{n}-profile-{os.urandom(3).hex()}"
    populate(setup.api, namespace, n)
    log.info("N=%d: profiling a cold first pass", n)
    cold = _profile_pass(setup, namespace, out_dir / f"cold-{n}")
    if "main_tree" not in cold:  # it never ran: say why rather than wait out the settle timeout
        log.error("N=%d: the profiled pass exited %d: %s", n, cold["returncode"], cold["stderr"])
        return {"n": n, "namespace": namespace, "cold_first_pass": cold}
    board = namespace_board(setup.api, namespace, n, None, with_objects=False)
    try:
        for index in range(contenders.MAX_PASSES):
            board.wait(pods_settled(n * contenders.PODS_PER_REDIS), setup.settle_timeout)
            if contenders.reconciler_pass(setup, namespace, f"profile{index}").planned == 0:
                break
    finally:
        board.stop()
    log.info("N=%d: profiling a steady pass", n)
    steady = _profile_pass(setup, namespace, out_dir / f"steady-{n}")
    return {"n": n, "namespace": namespace, "cold_first_pass": cold, "steady_pass": steady}


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n")[0])
    p.add_argument(
        "--sizes", default="100,500,1000", help="comma-separated N (default %(default)s)"
    )
    p.add_argument("--keep", action="store_true", help="leave the bench cluster running")
    p.add_argument(
        "--worktree",
        action="store_true",
        help="measure the work tree as it is (default: the last commit)",
    )
    p.add_argument("--no-kopf", action="store_true", help="skip the kopf peer")
    p.add_argument("--no-profile", action="store_true", help="skip the pyinstrument profiles")
    p.add_argument("--qps", type=int, default=1000, help="RECONCILER_QPS (default %(default)s)")
    p.add_argument("--burst", type=int, default=1000, help="RECONCILER_BURST")
    p.add_argument("--kopf-timeout", type=float, default=900.0, help="seconds per N for kopf")
    p.add_argument("--settle-timeout", type=float, default=600.0, help="max wait for Ready pods")
    p.add_argument("--out", type=Path, default=None, help="JSON path (default bench/results/)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("reconciler").setLevel(logging.WARNING)  # the recorder's dry executor
    sizes = sorted({int(s) for s in args.sizes.split(",") if s.strip()})
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = args.out or RESULTS / f"{stamp}.json"
    code = freeze_code(STATE_DIR / "frozen" / stamp, args.worktree)
    if _tree_hash(ROOT / "reconciler") != code["reconciler_sha"]:
        # The write limit is planned in this process, from the work tree: it
        # must replay the same code that the measured passes run.
        raise SystemExit(
            "reconciler/ differs from the last commit: commit it, or pass --worktree "
            "to measure the work tree"
        )
    cluster = launcher.up(STATE_DIR)
    try:
        setup = Setup.for_cluster(
            cluster,
            STATE_DIR,
            STATE_DIR / "logs" / f"bench-{stamp}",
            Path(code["dir"]),
            qps=args.qps,
            burst=args.burst,
            settle_timeout=args.settle_timeout,
            kopf_timeout=args.kopf_timeout,
        )
        doc: dict[str, Any] = {
            "started": stamp,
            "command": "python -m bench.run " + " ".join(argv or sys.argv[1:]),
            "machine": _machine(),
            "code": code,
            "settings": {
                "RECONCILER_QPS": args.qps,
                "RECONCILER_BURST": args.burst,
                "RECONCILER_WRITE_CONCURRENCY": setup.write_concurrency,
                "write_limit_workers": setup.write_concurrency,
                "kopf_timeout": args.kopf_timeout,
                "objects": "N Redis {port: 6379, num: 3} + N Xca {foo: bar} per namespace",
            },
            "sizes": [],
        }
        started = time.monotonic()
        for n in sizes:
            doc["sizes"].append(measure_size(setup, n, not args.no_kopf))
        doc["linearity"] = report.linearity(doc["sizes"])
        doc["table"] = report.table(doc["sizes"], doc["linearity"])
        if not args.no_profile:
            doc["profile"] = profile(setup, sizes[-1], STATE_DIR / "profiles" / stamp)
        doc["machine"]["loadavg_at_end"] = os.getloadavg()
        doc["code"]["changed_in_tree_during_run"] = (
            _tree_hash(ROOT / "reconciler") != code["reconciler_sha"]
        )
        doc["wall_seconds"] = time.monotonic() - started
    finally:
        if not args.keep:
            launcher.down(STATE_DIR)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    print(doc["table"])
    print(f"\nresults: {out}")
    if "profile" in doc:
        print(f"profiles: {STATE_DIR / 'profiles' / stamp}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
