"""One `reconciler run` over two clusters against two, one per cluster.

Both contenders meet the same work, in one run on the same machine: two bench
clusters started fresh side by side (their own etcd, apiserver, controllers
and kwok), each with a namespace of N Redis and N Xca, and one kubeconfig with
a context for each. For each contender:

- the time from its start to the common end state (bench.watch) in each
  cluster;
- the peak RSS of its processes (wait4): the one process's, or the two's added;
- its client CPU per steady round, once both clusters have settled back to
  the interval: the CPU of its processes over the next rounds, over the
  rounds (one round: a pass in each cluster).

Targets (issue 48): peak RSS at most 0.65x the two processes', client CPU per
steady round at most 1.1x, the time to the end state in each cluster at most
1.2x a process of its own.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import proc
from bench.contenders import Setup
from bench.cpu import process_cpu
from bench.daemon import _free_port, _metrics
from bench.kubeapi import populate
from bench.watch import namespace_board
from reconciler.kinds.redis.identity import FINALIZER

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parent.parent
NAMES = ("one", "two")
INTERVAL = 10.0  # seconds: the steady rounds come this often
STEADY_ROUNDS = 3
SETTLED_AFTER = 40.0  # seconds after the end state: past 1 + 2 + 4 + 8 s of settling passes
TARGETS = {  # the one process against the two
    "peak RSS": ("max_rss_mb", 0.65),
    "client CPU per steady round": ("steady_cpu_per_round", 1.1),
    "time to the end state, worst cluster": ("wall_ratio", 1.2),
}
CONTENDERS = ("fleet", "apart")


def state_dirs(first: Path) -> tuple[Path, Path]:
    return first, first.with_name(first.name + "-2")


def _argv(kubeconfig: Path, namespace: str, contexts: tuple[str, ...], port: int) -> list[str]:
    argv = [sys.executable, "-m", "reconciler", "run", "-n", namespace]
    argv += ["--kubeconfig", str(kubeconfig), "--interval", f"{INTERVAL:g}", "--jitter", "0"]
    argv += ["--metrics-address", f"127.0.0.1:{port}"]
    for context in contexts:
        argv += ["--context", context]
    return argv


def _passes(port: int) -> float:
    return _metrics(port).get("reconciler_passes_total", 0.0)


def _steady(children: list[tuple[proc.Child, int]], clusters: int) -> float:
    """CPU seconds of ``children`` per round of passes over every cluster,
    over STEADY_ROUNDS rounds at the interval."""
    cpu0 = sum(process_cpu(c.pid) for c, _ in children)
    passes0 = sum(_passes(port) for _, port in children)
    want = passes0 + STEADY_ROUNDS * clusters
    deadline = time.monotonic() + INTERVAL * (STEADY_ROUNDS + 2) + 30
    while time.monotonic() < deadline:
        time.sleep(1.0)
        if sum(_passes(port) for _, port in children) >= want:
            break
    rounds = (sum(_passes(port) for _, port in children) - passes0) / clusters
    cpu = sum(process_cpu(c.pid) for c, _ in children) - cpu0
    return cpu / rounds if rounds else float("nan")


def run_contender(
    name: str, setups: list[Setup], kubeconfig: Path, n: int, code_dir: Path, timeout: float
) -> dict[str, Any]:
    """``fleet``: one process with both contexts; ``apart``: a process each."""
    namespace = f"fleet-{n}-{name}-{os.urandom(3).hex()}"
    for setup in setups:
        populate(setup.api, namespace, n)
    boards = [namespace_board(s.api, namespace, n, FINALIZER, children=True) for s in setups]
    groups = [NAMES] if name == "fleet" else [(c,) for c in NAMES]
    env = setups[0].reconciler_env()
    started = time.monotonic()
    children = []
    for contexts in groups:
        port = _free_port()
        log_path = setups[0].log_dir / f"{namespace}.{'+'.join(contexts)}.log"
        argv = _argv(kubeconfig, namespace, contexts, port)
        children.append((proc.Child(argv, env, log_path, code_dir), port))
    walls: list[float | None] = []
    steady = float("nan")
    try:
        for board in boards:
            board.wait(lambda b: b.reached_at is not None, timeout=timeout)
            walls.append(board.reached_at - started if board.reached_at is not None else None)
        if all(w is not None for w in walls):
            time.sleep(SETTLED_AFTER)
            steady = _steady(children, len(NAMES))
    finally:
        for child, _ in children:
            child.stop()
        usages = [child.wait() for child, _ in children]
        for board in boards:
            board.stop()
    return {
        "namespace": namespace,
        "walls": dict(zip(NAMES, walls, strict=True)),
        "max_rss_mb": sum(u.max_rss_mb for u in usages),
        "cpu": sum(u.cpu for u in usages),
        "steady_cpu_per_round": steady,
        "processes": len(children),
        "returncodes": [u.returncode for u in usages],
    }


def verdicts(fleet: dict[str, Any], apart: dict[str, Any]) -> dict[str, dict[str, Any]]:
    ratios = [
        (fleet["walls"][c] or float("inf")) / (apart["walls"][c] or float("nan")) for c in NAMES
    ]
    measured = {
        "max_rss_mb": fleet["max_rss_mb"] / apart["max_rss_mb"],
        "steady_cpu_per_round": fleet["steady_cpu_per_round"] / apart["steady_cpu_per_round"],
        "wall_ratio": max(ratios),
    }
    out = {}
    for what, (key, bound) in TARGETS.items():
        value = measured[key]
        out[what] = {"measured": round(value, 3), "target": bound, "pass": value <= bound}
    return out


def table(n: int, results: dict[str, list[dict[str, Any]]], judged: dict[str, Any]) -> str:
    lines = [
        f"N={n} Redis and N Xca in each of two clusters; medians of {len(results['fleet'])}",
        "| contender | end state s (one, two) | peak RSS MB | client CPU s per steady round |",
        "|---|---|---|---|",
    ]
    for name in CONTENDERS:
        m = median_of(results[name])
        walls = ", ".join(f"{m['walls'][c]:.2f}" for c in NAMES)
        label = "one process, both contexts" if name == "fleet" else "two processes, one each"
        rss, cpu = m["max_rss_mb"], m["steady_cpu_per_round"]
        lines.append(f"| {label} | {walls} | {rss:.0f} | {cpu:.3f} |")
    lines += ["", "| target | measured | bound | verdict |", "|---|---|---|---|"]
    for what, v in judged.items():
        verdict = "PASS" if v["pass"] else "FAIL"
        lines.append(f"| {what} | {v['measured']:.2f}x | {v['target']}x | {verdict} |")
    return "\n".join(lines)


def median_of(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median over the rounds (a round that never reached the end
    state counts as infinitely slow, not as missing)."""

    def med(get: Callable[[dict[str, Any]], float | None]) -> float:
        values = [get(r) for r in rounds]
        return float(statistics.median(float("inf") if v is None else v for v in values))

    return {
        "walls": {c: med(lambda r, c=c: r["walls"][c]) for c in NAMES},
        "max_rss_mb": med(lambda r: r["max_rss_mb"]),
        "steady_cpu_per_round": med(lambda r: r["steady_cpu_per_round"]),
    }


def main(argv: list[str] | None = None) -> int:
    from bench.run import STATE_DIR, freeze_code, publish
    from hack.cluster import cluster as launcher

    p = argparse.ArgumentParser(prog="python -m bench.fleet", description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=1000, help="Redis (and Xca) in each cluster")
    p.add_argument("--rounds", type=int, default=1, help="end states per contender")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds to the end state")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    code = freeze_code(STATE_DIR / "frozen" / f"fleet-{stamp}", True)
    dirs = state_dirs(STATE_DIR)
    kubeconfig = STATE_DIR / "fleet.kubeconfig"

    def fresh() -> list[Setup]:
        for d in dirs:
            launcher.down(d)
        clusters = [launcher.up(d) for d in dirs]
        launcher.fleet_kubeconfig(dict(zip(NAMES, clusters, strict=True)), kubeconfig)
        logs = STATE_DIR / "logs" / f"fleet-{stamp}"
        return [
            Setup.for_cluster(c, d, logs, Path(code["dir"]), kopf_timeout=args.timeout)
            for c, d in zip(clusters, dirs, strict=True)
        ]

    results: dict[str, list[dict[str, Any]]] = {name: [] for name in CONTENDERS}
    try:
        for i in range(max(1, args.rounds)):
            for name in CONTENDERS if i % 2 == 0 else CONTENDERS[::-1]:
                log.info("round %d: %s", i + 1, name)
                done = run_contender(
                    name, fresh(), kubeconfig, args.n, Path(code["dir"]), args.timeout
                )
                log.info("round %d: %s: %s", i + 1, name, done)
                results[name].append(done)
    finally:
        for d in dirs:
            launcher.down(d)
    fleet, apart = median_of(results["fleet"]), median_of(results["apart"])
    judged = verdicts(fleet, apart)
    text = table(args.n, results, judged)
    doc = {
        "code": code,
        "rounds": results,
        "medians": {"fleet": fleet, "apart": apart},
        "verdicts": judged,
        "table": text,
    }
    publish("fleet", stamp, argv, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
