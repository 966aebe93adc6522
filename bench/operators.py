"""Long-running contenders, each on a cluster of its own, started fresh, with
a namespace of N Redis and N Xca: `reconciler run` at a given interval, the
controller-runtime peer (bench/peers/crpeer), and the kopf peer. For each, in
one run:

- time from start to the common end state (bench.watch);
- the process's CPU and RSS at that moment (from /proc);
- how long a pod deleted by hand takes to come back: DELETE, then poll for
  a pod of that name with a new uid. Deletions come at random moments, so a
  polling contender's figure shows where in its interval they fell. Each
  comes a random pause after the pod before it was back, while a daemon may
  still be settling from that change; for `reconciler run`, a few more come
  only after two quiet intervals more, when it polls at its interval.
"""

from __future__ import annotations

import logging
import os
import random
import re
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import proc
from bench.contenders import KOPF_FINALIZER, PODS_PER_REDIS, Setup, _fresh, target_args
from bench.cpu import process_cpu
from bench.daemon import _rss_mb
from bench.kubeapi import CORE_PATH, Api, Request
from bench.watch import Board, namespace_board
from reconciler.kinds.redis import FINALIZER

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parent.parent
CRPEER_FINALIZER = "crpeer.bench/finalizer"
COMEBACKS = 5
QUIET_COMEBACKS = 3


def crpeer_binary() -> Path:
    """Build (or find in the cache) the controller-runtime peer."""
    out = subprocess.run(
        ["bash", str(ROOT / "bench" / "peers" / "build.sh")],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip().splitlines()[-1])


def _pod_uid(api: Api, namespace: str, name: str) -> str | None:
    resp = api.send(Request("GET", f"{CORE_PATH}/namespaces/{namespace}/pods/{name}"))
    return str(resp.json()["metadata"]["uid"]) if resp.status_code == 200 else None


def comeback(api: Api, namespace: str, name: str, timeout: float) -> float | None:
    """Seconds from deleting pod ``name`` to a new pod of that name existing."""
    old = _pod_uid(api, namespace, name)
    started = time.monotonic()
    api.send(Request("DELETE", f"{CORE_PATH}/namespaces/{namespace}/pods/{name}"))
    while time.monotonic() - started < timeout:
        uid = _pod_uid(api, namespace, name)
        if uid is not None and uid != old:
            return time.monotonic() - started
        time.sleep(0.02)
    return None


def comebacks(
    api: Api, namespace: str, spread: float, timeout: float, quiet: float = 0.0
) -> list[float | None]:
    """A few pods deleted by hand, each after a random pause of up to ``spread``
    s; with ``quiet``, that many seconds more first, and other pods."""
    times = []
    count, pod = (QUIET_COMEBACKS, 1) if quiet else (COMEBACKS, 0)
    for i in range(count):
        time.sleep(quiet + random.uniform(0, spread))
        times.append(comeback(api, namespace, f"r{i}-{pod}", timeout))
    return times


def _await(board: Board, child: proc.Child, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not child.exited():
        if board.wait(lambda b: b.reached_at is not None, timeout=0.5):
            return True
    return False


def run_operator(
    setup: Setup,
    n: int,
    role: str,
    argv: list[str],
    finalizer: str,
    env: dict[str, str],
    spread: float,
    quiet: float = 0.0,
) -> dict[str, Any]:
    """Start one contender on a fresh namespace; time it to the end state, then
    time pods deleted by hand coming back."""
    namespace = _fresh(setup, role, n)
    board = namespace_board(setup.api, namespace, n, finalizer)
    argv = [a.replace("{ns}", namespace) for a in argv]
    served_before = requests_served(setup.api)
    before = setup.meter.snapshot()
    child = proc.Child(argv, env, setup.log_dir / f"{namespace}.{role}.log", setup.code_dir)
    cpu = rss = 0.0
    back: list[float | None] = []
    back_quiet: list[float | None] = []
    try:
        reached = _await(board, child, setup.kopf_timeout)
        cpu, rss = process_cpu(child.pid), _rss_mb(child.pid)
        window = setup.meter.since(before, cpu)
        served = requests_served(setup.api) - served_before
        if reached:
            back = comebacks(setup.api, namespace, spread, timeout=spread + 60)
            if quiet:
                back_quiet = comebacks(setup.api, namespace, spread, spread + 60, quiet)
    finally:
        child.stop()
        usage = child.wait()
        board.stop()
    wall = board.reached_at - before.at if board.reached_at is not None else None
    return {
        "namespace": namespace,
        "finished": wall is not None,
        "wall": wall,
        "cpu": cpu,  # at the end state
        "rss_mb": rss,  # at the end state
        "max_rss_mb": usage.max_rss_mb,
        "returncode": usage.returncode,
        "machine_cpu": window,
        "requests": dict(served.most_common()),
        "pods": n * PODS_PER_REDIS,
        "comeback": back,
        "comeback_median": _median(back),
        "comeback_quiet": back_quiet,
        "comeback_quiet_median": _median(back_quiet),
    }


_REQUESTS = re.compile(r"^apiserver_request_total\{([^}]*)\} ([0-9.eE+-]+)$")
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def requests_served(api: Api) -> Counter[str]:
    """Requests the apiserver answered so far, by verb and resource: from the
    contender, and from the cluster's own components and the harness, which
    do the same for every contender (the same pods to schedule and run)."""
    totals: Counter[str] = Counter()
    for line in api.send(Request("GET", "/metrics")).text.splitlines():
        if not (m := _REQUESTS.match(line)):
            continue
        labels = dict(_LABEL.findall(m[1]))
        sub = labels.get("subresource")
        totals[f"{labels.get('verb')} {labels.get('resource')}{'/' + sub if sub else ''}"] += int(
            float(m[2])
        )
    return totals


def _median(values: list[float | None]) -> float | None:
    measured = [v for v in values if v is not None]
    return statistics.median(measured) if measured else None


STEADY_PASS = re.compile(r"pass \w+ ok in ([0-9.]+)s: no changes")
ANY_PASS = re.compile(r"pass \w+ ok in ([0-9.]+)s")


def steady_pass_seconds(log_text: str) -> float | None:
    """Median wall of the daemon's passes that changed nothing, from its log.
    When pods deleted by hand kept every pass busy (a short interval), the
    shortest pass: it errs towards a tighter bound, never a looser one."""
    walls = [float(m.group(1)) for m in STEADY_PASS.finditer(log_text)]
    if walls:
        return statistics.median(walls)
    every = [float(m.group(1)) for m in ANY_PASS.finditer(log_text)]
    return min(every) if every else None


def run_daemon(setup: Setup, n: int, interval: float) -> dict[str, Any]:
    argv = [sys.executable, "-m", "reconciler", "run", *target_args("{ns}", setup.kubeconfig)]
    argv += ["--interval", f"{interval:g}", "--jitter", "0"]
    role = f"run{interval:g}"
    # Past the passes that settle back to the interval after a change (1 + 2 +
    # 4 + 8 + 16 s at most, after the write that puts the pod back).
    quiet = 2 * interval
    env = setup.reconciler_env()
    result = run_operator(setup, n, role, argv, FINALIZER, env, spread=interval, quiet=quiet)
    result["interval"] = interval
    log_path = setup.log_dir / f"{result['namespace']}.{role}.log"
    result["steady_pass"] = steady_pass_seconds(log_path.read_text(errors="replace"))
    return result


def run_crpeer(setup: Setup, n: int, binary: Path) -> dict[str, Any]:
    argv = [str(binary), "--namespace", "{ns}", "--kubeconfig", str(setup.kubeconfig)]
    argv += ["--qps", str(setup.qps), "--burst", str(setup.burst)]
    env = {**os.environ, "KUBECONFIG": str(setup.kubeconfig)}
    return run_operator(setup, n, "crpeer", argv, CRPEER_FINALIZER, env, spread=5.0)


def run_kopf(setup: Setup, n: int) -> dict[str, Any]:
    peer = setup.code_dir / "bench" / "kopf_peer.py"
    argv = [sys.executable, "-m", "kopf", "run", str(peer), "--standalone", "--namespace", "{ns}"]
    env = {**os.environ, "KUBECONFIG": str(setup.kubeconfig)}
    return run_operator(setup, n, "kopf", argv, KOPF_FINALIZER, env, spread=5.0)


# ---------------------------------------------------------------- the run

# Each contender gets a cluster of its own, started fresh. On a shared
# cluster, a later contender met the objects of every earlier one: a bigger
# watch cache and a bigger heap for the apiserver's garbage collector (about a
# seventh of its CPU while a contender converges, in a pprof profile), so the
# order decided part of the ratio.
CONTENDERS = ("crpeer", "run30", "run5", "kopf")
TARGETS = {  # against controller-runtime, at the default interval (30 s)
    "time to the end state": ("wall", 1.0),
    "client CPU to the end state": ("cpu", 0.8),
    "RSS at the end state": ("rss_mb", 0.6),
}


def measure_size(
    fresh: Callable[[], Setup], n: int, binary: Path, with_kopf: bool
) -> dict[str, Any]:
    """Every contender at this N, each on a cluster that ``fresh`` starts anew."""
    row: dict[str, Any] = {"n": n}
    for name in CONTENDERS:
        if name == "kopf" and not with_kopf:
            continue
        log.info("N=%d: %s", n, name)
        setup = fresh()
        if name.startswith("run"):
            row[name] = run_daemon(setup, n, float(name[3:]))
        elif name == "crpeer":
            row[name] = run_crpeer(setup, n, binary)
        else:
            row[name] = run_kopf(setup, n)
        log.info("N=%d: %s reached the end state in %s s", n, name, row[name]["wall"])
    cr = row["crpeer"]
    row["verdicts"] = {}
    noise = max(_foreign_cores(row["run30"]), _foreign_cores(cr))
    for label, (key, target) in TARGETS.items():
        ratio = row["run30"][key] / cr[key] if row["run30"][key] and cr[key] else None
        row["verdicts"][label] = {
            "ratio": ratio,
            "target": target,
            "ok": ratio is not None and ratio <= target,
            "foreign_cores": noise,
        }
    for name in ("run30", "run5"):
        row["verdicts"][f"{name}: pod back, median s"] = comeback_verdict(row[name])
        row["verdicts"][f"{name}: pod back after a quiet interval, median s"] = comeback_verdict(
            row[name], "comeback_quiet_median"
        )
    return row


# Processes outside the bench, or the hypervisor (steal), that took more than
# this share of a core while either contender ran make that ratio a measure of
# the neighbour, not of the contenders: the table says so beside the verdict.
NOISY_CORES = 0.15


def _foreign_cores(result: dict[str, Any]) -> float:
    cpu = result.get("machine_cpu") or {}
    return float(cpu.get("foreign_cores") or 0.0) + float(cpu.get("steal_cores") or 0.0)


def comeback_verdict(result: dict[str, Any], key: str = "comeback_median") -> dict[str, Any]:
    """Polling's bound for a pod deleted by hand: half an interval on average
    before the next pass, plus that pass. Not a ratio: controller-runtime's
    figure is in the table beside it."""
    steady = result.get("steady_pass")
    bound = result["interval"] / 2 + steady if steady is not None else None
    median = result.get(key)
    return {
        "ratio": median,
        "target": None if bound is None else round(bound, 2),
        "ok": median is not None and bound is not None and median <= bound,
    }


def _f(value: Any, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| N | contender | end state s | client CPU s | RSS MB | pod back, median s (each) "
        "| after a quiet interval |"
    ]
    lines.append("|---|---|---|---|---|---|---|")
    for row in rows:
        for name in CONTENDERS:
            r = row.get(name)
            if r is None:
                continue
            each = ", ".join(_f(b) for b in r["comeback"])
            quiet = ", ".join(_f(b) for b in r.get("comeback_quiet", []))
            quiet = f"{_f(r.get('comeback_quiet_median'))} ({quiet})" if quiet else "-"
            lines.append(
                f"| {row['n']} | {name} | {_f(r['wall'])} | {_f(r['cpu'])} | {_f(r['rss_mb'], 0)} "
                f"| {_f(r['comeback_median'])} ({each}) | {quiet} |"
            )
    lines.append("")
    lines.append(
        "| N | contender | requests answered before the end state, by verb and resource "
        "(all clients, every response code) |"
    )
    lines.append("|---|---|---|")
    for row in rows:
        for name in CONTENDERS:
            if (r := row.get(name)) is not None and r.get("requests"):
                each = ", ".join(f"{k} {v}" for k, v in r["requests"].items())
                lines.append(f"| {row['n']} | {name} | {sum(r['requests'].values())}: {each} |")
    lines.append("")
    lines.append(
        "| N | reconciler run --interval 30 / controller-runtime (ratio), or pod back (s) "
        "| measured | target | verdict |"
    )
    lines.append("|---|---|---|---|---|")
    for row in rows:
        for label, v in row["verdicts"].items():
            verdict = "PASS" if v["ok"] else "FAIL"
            if v.get("foreign_cores", 0.0) > NOISY_CORES:
                verdict += f" (noisy: {v['foreign_cores']:.2f} cores of foreign load or steal)"
            lines.append(
                f"| {row['n']} | {label} | {_f(v['ratio'])} | <= {_f(v['target'])} | {verdict} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json

    from bench.run import STATE_DIR, freeze_code  # one bench cluster for both
    from hack.cluster import cluster as launcher

    p = argparse.ArgumentParser(
        prog="python -m bench.operators", description=__doc__.split("\n")[0]
    )
    p.add_argument("--sizes", default="200,1000")
    p.add_argument("--no-kopf", action="store_true")
    p.add_argument("--keep", action="store_true")
    p.add_argument("--qps", type=int, default=1000)
    p.add_argument("--burst", type=int, default=1000)
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per contender")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    binary = crpeer_binary()
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    code = freeze_code(STATE_DIR / "frozen" / stamp, True)

    def fresh() -> Setup:
        launcher.down(STATE_DIR)  # drops the etcd data too
        return Setup.for_cluster(
            launcher.up(STATE_DIR),
            STATE_DIR,
            STATE_DIR / "logs" / f"operators-{stamp}",
            Path(code["dir"]),
            qps=args.qps,
            burst=args.burst,
            settle_timeout=600.0,
            kopf_timeout=args.timeout,
        )

    rows = []
    try:
        for n in sorted(int(s) for s in args.sizes.split(",")):
            rows.append(measure_size(fresh, n, binary, not args.no_kopf))
    finally:
        if not args.keep:
            launcher.down(STATE_DIR)
    text = table(rows)
    out = ROOT / "bench" / "results" / f"operators-{stamp}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "command": "python -m bench.operators " + " ".join(argv or sys.argv[1:]),
        "code": code,
        "rows": rows,
        "table": text,
    }
    out.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    print(text)
    print(f"\nresults: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
