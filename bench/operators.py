"""Long-running contenders, each on a cluster of its own, started fresh, with
a namespace of N Redis and N Xca: `reconciler run` at a given interval, the
controller-runtime peer (bench/peers/crpeer), and the kopf peer. For each, in
one run:

- time from start to the common end state (bench.watch): every pod Ready,
  each Redis's finalizer, status, Service and disruption budget, every Xca
  active (the kopf peer makes no Service or budget, and is not held to them);
- the process's CPU and RSS at that moment (from /proc);
- how long a pod deleted by hand takes to come back: DELETE, then poll for
  a pod of that name with a new uid. Deletions come at random moments, so a
  polling contender's figure shows where in its interval they fell. Each
  comes a random pause after the pod before it was back, while a daemon may
  still be settling from that change; for `reconciler run`, a few more come
  only after two quiet intervals more, when it polls at its interval.

The time to the end state varies by a fifth from one fresh cluster to the
next, more than the margins the targets judge. The two contenders the
verdicts compare (`reconciler run` at its default interval, and
controller-runtime) therefore reach the end state in more rounds, each on a
fresh cluster, in alternating order, and the verdicts take the median.
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
from reconciler.kinds.redis.identity import FINALIZER

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
    with_comebacks: bool = True,
    children: bool = True,
) -> dict[str, Any]:
    """Start one contender on a fresh namespace; time it to the end state, then
    (``with_comebacks``) time pods deleted by hand coming back. The end state
    has each Redis's Service and budget, but for a peer that makes none
    (``children``: the kopf peer)."""
    namespace = _fresh(setup, role, n)
    board = namespace_board(setup.api, namespace, n, finalizer, children=children)
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
        if reached and with_comebacks:
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


def run_daemon(
    setup: Setup, n: int, interval: float, with_comebacks: bool = True
) -> dict[str, Any]:
    argv = [sys.executable, "-m", "reconciler", "run", *target_args("{ns}", setup.kubeconfig)]
    argv += ["--interval", f"{interval:g}", "--jitter", "0"]
    role = f"run{interval:g}"
    # Past the passes that settle back to the interval after a change (1 + 2 +
    # 4 + 8 + 16 s at most, after the write that puts the pod back).
    quiet = 2 * interval
    env = setup.reconciler_env()
    result = run_operator(
        setup, n, role, argv, FINALIZER, env, interval, quiet, with_comebacks=with_comebacks
    )
    result["interval"] = interval
    log_path = setup.log_dir / f"{result['namespace']}.{role}.log"
    result["steady_pass"] = steady_pass_seconds(log_path.read_text(errors="replace"))
    return result


def run_crpeer(setup: Setup, n: int, binary: Path, with_comebacks: bool = True) -> dict[str, Any]:
    argv = [str(binary), "--namespace", "{ns}", "--kubeconfig", str(setup.kubeconfig)]
    argv += ["--qps", str(setup.qps), "--burst", str(setup.burst)]
    env = {**os.environ, "KUBECONFIG": str(setup.kubeconfig)}
    return run_operator(
        setup, n, "crpeer", argv, CRPEER_FINALIZER, env, 5.0, with_comebacks=with_comebacks
    )


def run_kopf(setup: Setup, n: int) -> dict[str, Any]:
    peer = setup.code_dir / "bench" / "kopf_peer.py"
    argv = [sys.executable, "-m", "kopf", "run", str(peer), "--standalone", "--namespace", "{ns}"]
    env = {**os.environ, "KUBECONFIG": str(setup.kubeconfig)}
    return run_operator(setup, n, "kopf", argv, KOPF_FINALIZER, env, spread=5.0, children=False)


# ---------------------------------------------------------------- the run

# Each contender gets a cluster of its own, started fresh. On a shared
# cluster, a later contender met the objects of every earlier one: a bigger
# watch cache and a bigger heap for the apiserver's garbage collector (about a
# seventh of its CPU while a contender converges, in a pprof profile), so the
# order decided part of the ratio.
CONTENDERS = ("crpeer", "run30", "run5", "kopf")
TARGETS = {  # against controller-runtime, at the default interval (30 s)
    "time to the end state": ("wall", 0.9),
    "client CPU to the end state": ("cpu", 0.8),
    "RSS at the end state": ("rss_mb", 0.6),
}


JUDGED = ("run30", "crpeer")  # the pair each TARGETS ratio compares
ROUNDS = 3  # end states per judged contender and N; the verdicts take the median
ROUND_KEYS = ("wall", "cpu", "rss_mb")
DIGITS = (2, 2, 0)  # how each is shown


def _contend(
    name: str, setup: Setup, n: int, binary: Path, with_comebacks: bool = True
) -> dict[str, Any]:
    if name.startswith("run"):
        return run_daemon(setup, n, float(name[3:]), with_comebacks)
    if name == "crpeer":
        return run_crpeer(setup, n, binary, with_comebacks)
    return run_kopf(setup, n)


def _round(result: dict[str, Any]) -> dict[str, Any]:
    """What one end state adds to the median, and how noisy the machine was."""
    return {key: result[key] for key in ROUND_KEYS} | {"foreign_cores": _foreign_cores(result)}


def round_median(result: dict[str, Any], key: str) -> float | None:
    """The median of ``key`` over a contender's rounds; None if any round
    never reached the end state (a failure is not averaged away)."""
    values = [r[key] for r in result.get("rounds") or [result]]
    if not values or any(v is None for v in values):
        return None
    return float(statistics.median(values))


def measure_size(
    fresh: Callable[[], Setup], n: int, binary: Path, with_kopf: bool, rounds: int = ROUNDS
) -> dict[str, Any]:
    """Every contender at this N, each on a cluster that ``fresh`` starts anew;
    then the judged pair again, ``rounds`` end states each in all, in
    alternating order, without the pods deleted by hand."""
    row: dict[str, Any] = {"n": n}
    for name in CONTENDERS:
        if name == "kopf" and not with_kopf:
            continue
        log.info("N=%d: %s", n, name)
        row[name] = _contend(name, fresh(), n, binary)
        row[name]["rounds"] = [_round(row[name])]
        log.info("N=%d: %s reached the end state in %s s", n, name, row[name]["wall"])
    for i in range(1, rounds):
        for name in JUDGED if i % 2 else JUDGED[::-1]:
            log.info("N=%d: %s, round %d of %d", n, name, i + 1, rounds)
            result = _contend(name, fresh(), n, binary, with_comebacks=False)
            row[name]["rounds"].append(_round(result))
            log.info("N=%d: %s reached the end state in %s s", n, name, result["wall"])
    row["verdicts"] = verdicts(row)
    return row


def verdicts(row: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each target's ratio of the judged pair's medians, then polling's bound
    for a pod deleted by hand."""
    ours, theirs = (row[name] for name in JUDGED)
    noise = max(r["foreign_cores"] for r in ours["rounds"] + theirs["rounds"])
    out: dict[str, dict[str, Any]] = {}
    for label, (key, target) in TARGETS.items():
        a, b = round_median(ours, key), round_median(theirs, key)
        ratio = a / b if a and b else None
        out[label] = {
            "ratio": ratio,
            "target": target,
            "ok": ratio is not None and ratio <= target,
            "foreign_cores": noise,
            "rounds": len(ours["rounds"]),
        }
    for name in ("run30", "run5"):
        if name in row:
            out[f"{name}: pod back, median s"] = comeback_verdict(row[name])
            out[f"{name}: pod back after a quiet interval, median s"] = comeback_verdict(
                row[name], "comeback_quiet_median"
            )
    return out


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


def _rounds(result: dict[str, Any], key: str, digits: int) -> str:
    """One figure, or the median of several rounds with each in brackets."""
    rounds = result.get("rounds") or [result]
    if len(rounds) == 1:
        return _f(rounds[0][key], digits)
    each = ", ".join(_f(r[key], digits) for r in rounds)
    return f"{_f(round_median(result, key), digits)} ({each})"


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| N | contender | end state s | client CPU s | RSS MB (median of rounds, each) "
        "| pod back, median s (each) "
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
            wall, cpu, rss = (_rounds(r, key, d) for key, d in zip(ROUND_KEYS, DIGITS, strict=True))
            lines.append(
                f"| {row['n']} | {name} | {wall} | {cpu} | {rss} "
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
        "| N | reconciler run --interval 30 / controller-runtime (ratio of medians), "
        "or pod back (s) "
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

    from bench.run import STATE_DIR, freeze_code, publish  # one bench cluster for both
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
    p.add_argument(
        "--rounds",
        type=int,
        default=ROUNDS,
        help=f"end states of {' and '.join(JUDGED)} per N, for the median ({ROUNDS})",
    )
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
            rows.append(measure_size(fresh, n, binary, not args.no_kopf, max(1, args.rounds)))
    finally:
        if not args.keep:
            launcher.down(STATE_DIR)
    publish("operators", stamp, argv, {"code": code, "rows": rows, "table": table(rows)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
