"""The steady pass at scale, against the code of commits 3af3b99 and 9a5a83a, in one run.

    python -m bench.scale [--sizes 1000,10000] [--namespaces 20] [--passes 5]

Starts the bench cluster (<repo>/.cluster-bench) and grows one population,
spread evenly over ``--namespaces`` namespaces, through each size in turn:
N Redis ({port: 6379, num: 3}, so 3N pods) and N Xca. At each size:

- convergence of the objects just added, with ``reconciler sync -A --wait``
  (wall, passes, client CPU, peak RSS, and the apiserver's and etcd's CPU),
  by the code of commit 9a5a83a: both baselines take its pods as current,
  while today's code stamps another template (issue 34) and so rolls them;
- the steady pass of each baseline, then today's ``sync -A --wait`` rolling
  every pod to its template (an upgrade, measured as the convergence is),
  then today's steady pass;
- the steady pass as the daemon pays it (``reconciler run -A``, start-up pass
  excluded), for today's code and for the baseline commit, one after the
  other on the same objects, and for commit 9a5a83a (the code before pods
  were judged as real clusters change them, issue 34): wall, client CPU,
  apiserver + etcd CPU net of the cluster's idle load, requests, bytes
  received (on the wire; commit 3af3b99 counted them inflated), RSS;
- at the largest size, a pyinstrument profile of one steady pass of each.

The baseline is frozen by commit (``git archive``), so a later run compares
against the same code. The growth exponent of the steady pass is the slope of
log(cost) over log(N) between the smallest and the largest size. Results go
to bench/results/scale-<UTC timestamp>.json. See docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import daemon, proc
from bench.contenders import Setup
from bench.kubeapi import (
    CORE_PATH,
    REDIS_PATH,
    XCA_PATH,
    Api,
    Request,
    parallel,
    redis_body,
    xca_body,
)
from bench.lists import served

log = logging.getLogger("bench.scale")
OUR_RESOURCES = ("pods", "redis", "xcas")

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "3af3b99"  # the code before issue 12's lighter passes
PREVIOUS = "9a5a83a"  # the code before issue 34 read more of each pod
CODES = ("baseline", "previous", "today")  # measured in this order, on the same objects
CONVERGER = "previous"  # converges new objects: its pods are current for both baselines
IDLE_SECONDS = 10.0  # the idle window that prices the cluster's own background load
QUIET_CORES = 0.1  # below this the cluster is at rest (its idle load is ~0.02 cores)
SETTLE_LIMIT = 300.0
TARGETS = {  # measure -> (bound, what it bounds; {baseline} and {previous} are the commits run)
    "client_cpu": (0.25, "steady pass client CPU, today / {baseline}"),
    "client_cpu_previous": (1.1, "steady pass client CPU, today / {previous}"),
    "server_cpu": (0.5, "steady pass apiserver + etcd CPU, today / {baseline}"),
    "growth_cpu": (1.05, "growth exponent of the steady pass client CPU"),
    "growth_wall": (1.05, "growth exponent of the steady pass wall"),
    "peak_rss_mb": (200.0, "peak RSS of today's code at the largest N, MB"),
}


def freeze_commit(commit: str, dest: Path) -> dict[str, str]:
    """reconciler/ and bench/ as they were at ``commit``, for children to run."""
    from bench.run import byte_compile

    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "archive", commit, "reconciler", "bench"], cwd=ROOT, capture_output=True
    )
    if archive.returncode != 0:
        raise SystemExit(f"git archive {commit} failed: {archive.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    byte_compile(dest)
    sha = subprocess.run(
        ["git", "rev-parse", commit], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return {"dir": str(dest), "source": sha.stdout.strip()}


def namespace_names(count: int) -> list[str]:
    return [f"scale-{i:02d}" for i in range(count)]


def grow(api: Api, namespaces: list[str], have: int, want: int) -> None:
    """Add objects ``have``..``want``-1 of each kind, round robin over the namespaces."""
    for ns in namespaces:
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
        api.call(Request("POST", f"{CORE_PATH}/namespaces", body), ok=(201, 409))
    requests = []
    for i in range(have, want):
        ns = namespaces[i % len(namespaces)]
        requests.append(
            Request("POST", f"{REDIS_PATH}/namespaces/{ns}/redis", redis_body(ns, f"r{i}"))
        )
        requests.append(Request("POST", f"{XCA_PATH}/namespaces/{ns}/xcas", xca_body(ns, f"x{i}")))
    parallel(lambda r: api.call(r, ok=(201,)), requests, workers=8)


def _cluster_args(setup: Setup) -> list[str]:
    return ["-A", "--kubeconfig", str(setup.kubeconfig)]


def converge(
    setup: Setup,
    code_dir: Path,
    label: str,
    timeout: float,
    flags: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """``sync -A --wait`` until the whole population is converged; ``flags``
    and ``env`` are added to the command's and to the bench's own."""
    argv = [sys.executable, "-m", "reconciler", "sync", *_cluster_args(setup)]
    argv += ["--wait", "--timeout", str(timeout), *flags]
    before = setup.meter.snapshot()
    env = {**setup.reconciler_env(), **(env or {})}
    res = proc.run(argv, env, setup.log_dir / f"{label}.log", code_dir)
    window = setup.meter.since(before, res.cpu)
    lines = res.stdout.strip().splitlines()
    if res.returncode != 0:
        raise RuntimeError(f"{label}: sync --wait exited {res.returncode}: {lines[-1:]}")
    return {
        "wall": res.wall,
        "cpu": res.cpu,
        "max_rss_mb": res.max_rss_mb,
        "server_cpu": window["apiserver"] + window["etcd"],
        "machine_cpu": window,
        "pass_lines": lines[:-1],
        "verdict": lines[-1] if lines else "",
    }


def idle_rate(
    setup: Setup, quiet: float = QUIET_CORES, seconds: float = IDLE_SECONDS
) -> dict[str, float]:
    """apiserver + etcd CPU per second with no contender (kwok's node leases, the
    controller manager, the scheduler), subtracted from each window.

    After a large convergence the cluster keeps working for a while (kwok and
    the scheduler catching up), so it waits, in windows of IDLE_SECONDS, until
    one is quiet (below QUIET_CORES) or SETTLE_LIMIT has passed."""
    started = time.monotonic()
    while True:
        before = setup.meter.snapshot()
        time.sleep(seconds)
        window = setup.meter.since(before, 0.0)
        rate = float(window["apiserver"] + window["etcd"]) / window["wall"]
        waited = time.monotonic() - started
        if rate < quiet or waited > SETTLE_LIMIT:
            return {"rate": rate, "settled_after": waited, "quiet": rate < quiet}


BUDGETS_PATH = "/apis/policy/v1/poddisruptionbudgets"
BUDGETS_LIMIT = 600.0  # the disruption controller forgets an eviction after 2 minutes


def budgets_settled(api: Api, limit: float = BUDGETS_LIMIT) -> dict[str, Any]:
    """Wait until no budget remembers an eviction. After a rollout, the
    disruption controller keeps each evicted pod in its budget's
    status.disruptedPods until it sees the pod gone or two minutes pass, then
    writes the budget again: measured before that, a steady pass would fetch
    budgets that changed because of the rollout, not because of the pass."""
    started = time.monotonic()
    while True:
        found = api.call(Request("GET", BUDGETS_PATH))["items"]
        holding = sum(1 for b in found if (b.get("status") or {}).get("disruptedPods"))
        waited = time.monotonic() - started
        if not holding or waited > limit:
            log.info("budgets: %d of %d hold evictions after %.0fs", holding, len(found), waited)
            return {"waited": waited, "holding": holding, "budgets": len(found)}
        time.sleep(10.0)


def one_shot(setup: Setup, code_dir: Path, label: str) -> dict[str, Any]:
    """One ``sync -A -o json`` over the converged population: requests and bytes."""
    argv = [sys.executable, "-m", "reconciler", "sync", *_cluster_args(setup), "-o", "json"]
    res = proc.run(argv, setup.reconciler_env(), setup.log_dir / f"{label}.log", code_dir)
    summary = json.loads(res.stdout)
    return {
        "wall": res.wall,
        "cpu": res.cpu,
        "max_rss_mb": res.max_rss_mb,
        "planned": summary.get("planned"),
        "requests": summary.get("api_requests"),
        "bytes_received": summary.get("bytes_received"),
        "in_process_seconds": summary.get("duration_seconds"),
    }


def settle(setup: Setup, code_dir: Path, label: str, limit: int = 5) -> list[int]:
    """One-shot passes of this code until one plans nothing, so that its daemon
    is measured on objects converged by its own rules: codes that stamp
    another template hash first put their own back on every pod (a write per
    pod, and a decode per pod in the daemon's next pass). Returns each pass's
    planned actions."""
    argv = [sys.executable, "-m", "reconciler", "sync", *_cluster_args(setup), "-o", "json"]
    planned: list[int] = []
    for i in range(limit):
        res = proc.run(argv, setup.reconciler_env(), setup.log_dir / f"{label}.{i}.log", code_dir)
        planned.append(int(json.loads(res.stdout).get("planned") or 0))
        if planned[-1] == 0:
            break
    return planned


def steady(setup: Setup, code_dir: Path, label: str, passes: int) -> dict[str, Any]:
    """The daemon's steady pass, net of the cluster's idle load, on objects
    that this code left converged."""
    settled = settle(setup, code_dir, f"{label}.settle")
    idle = idle_rate(setup)
    rate = idle["rate"]
    lists_before = served(setup.api, OUR_RESOURCES)
    run = daemon.measure(
        _cluster_args(setup),
        setup.reconciler_env(),
        setup.log_dir / f"{label}.daemon.log",
        code_dir,
        passes=passes,
        interval=1.0,
        timeout=900.0,
        meter=setup.meter,
    )
    lists_after = served(setup.api, OUR_RESOURCES)
    window = run["machine_cpu"]
    gross = window["apiserver"] + window["etcd"]
    net = max(0.0, gross - rate * window["wall"])
    return run | {
        "idle_server_cpu_per_s": rate,
        "idle": idle,
        "server_cpu": net / run["passes"],
        "server_cpu_gross": gross / run["passes"],
        # LISTs of pods, Redis and Xca while the daemon ran (other components
        # too, though they watch). The etcd count holds one revision read per
        # LIST; past that, pages came from etcd (bench/continuation.py).
        "lists_served": {k: lists_after[k] - lists_before[k] for k in lists_after},
        "settle_planned": settled,
        "one_shot": one_shot(setup, code_dir, label),
    }


def profile(setup: Setup, code_dir: Path, prefix: Path, *, steady: bool) -> str:
    """A profile of one pass; ``steady``: the second of two that share a State,
    as in the daemon (the baseline's bench.profile predates --steady, and its
    passes share nothing but the pod report)."""
    flag = ["--steady"] if steady else []
    argv = [sys.executable, "-m", "bench.profile", str(prefix), *flag, "--", "sync"]
    argv += [*_cluster_args(setup), "-o", "json"]
    subprocess.run(
        argv,
        env=setup.reconciler_env(),
        cwd=code_dir,
        capture_output=True,
        check=False,
    )
    return str(prefix) + ".*"


def exponent(small: float, large: float, n_small: int, n_large: int) -> float | None:
    if small <= 0 or large <= 0 or n_small == n_large:
        return None
    return math.log(large / small) / math.log(n_large / n_small)


def verdicts(
    sizes: list[dict[str, Any]], baseline: str = BASELINE, previous: str = PREVIOUS
) -> dict[str, dict[str, Any]]:
    """Each target's measured value against its bound, at the largest N."""
    first, last = sizes[0], sizes[-1]
    today, base = last["today"], last["baseline"]
    values = {
        "client_cpu": today["cpu"] / base["cpu"],
        "client_cpu_previous": today["cpu"] / last["previous"]["cpu"],
        "server_cpu": today["server_cpu"] / base["server_cpu"] if base["server_cpu"] else None,
        "growth_cpu": exponent(first["today"]["cpu"], today["cpu"], first["n"], last["n"]),
        "growth_wall": exponent(first["today"]["wall"], today["wall"], first["n"], last["n"]),
        "peak_rss_mb": max(
            last["upgrade"]["max_rss_mb"], today["max_rss_mb"], today["one_shot"]["max_rss_mb"]
        ),
    }
    out = {}
    for key, (bound, label) in TARGETS.items():
        value = values[key]
        out[key] = {
            "label": label.format(baseline=baseline, previous=previous),
            "value": value,
            "target": bound,
            "ok": None if value is None else value <= bound,
        }
    return out


def _f(value: Any, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def table(
    sizes: list[dict[str, Any]], verdict: dict[str, dict[str, Any]], previous: str = PREVIOUS
) -> str:
    lines = [
        "| N Redis (pods) + N Xca | code | pass wall s | client CPU s | apiserver+etcd CPU s "
        "| requests | MB received | RSS MB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in sizes:
        for code in CODES:
            r = row[code]
            lines.append(
                f"| {row['n']} ({row['n'] * 3}) + {row['n']} | {code} | {_f(r['wall'])} "
                f"| {_f(r['cpu'])} | {_f(r['server_cpu'])} | {_f(r['requests'], 0)} "
                f"| {_f((r['one_shot']['bytes_received'] or 0) / 1e6, 1)} "
                f"| {_f(r['max_rss_mb'], 0)} |"
            )
    lines += [
        "",
        "| N | convergence | wall s | client CPU s | apiserver+etcd CPU s | peak RSS MB |",
        "|---|---|---|---|---|---|",
    ]
    for row in sizes:
        for what, c in (
            (f"{row['added']} added, by {previous}", row["converge"]),
            ("every pod rolled to today's template", row["upgrade"]),
        ):
            lines.append(
                f"| {row['n']} | {what}, {len(c['pass_lines'])} passes | {_f(c['wall'])} "
                f"| {_f(c['cpu'])} | {_f(c['server_cpu'])} | {_f(c['max_rss_mb'], 0)} |"
            )
    lines += ["", "| target | value | bound | verdict |", "|---|---|---|---|"]
    for v in verdict.values():
        ok = "-" if v["ok"] is None else ("PASS" if v["ok"] else "FAIL")
        lines.append(f"| {v['label']} | {_f(v['value'])} | <= {v['target']} | {ok} |")
    return "\n".join(lines)


def measure_size(
    setup: Setup, codes: dict[str, Path], namespaces: list[str], have: int, n: int, passes: int
) -> dict[str, Any]:
    log.info("N=%d: creating %d Redis and %d Xca", n, n - have, n - have)
    started = time.monotonic()
    grow(setup.api, namespaces, have, n)
    log.info("N=%d: created in %.0fs; converging", n, time.monotonic() - started)
    row: dict[str, Any] = {"n": n, "added": n - have}
    row["converge"] = converge(setup, codes[CONVERGER], f"converge-{n}", timeout=3600.0)
    log.info("N=%d: converged in %.0fs", n, row["converge"]["wall"])
    for name in CODES:
        if name == "today":
            row["upgrade"] = converge(setup, codes[name], f"upgrade-{n}", timeout=3600.0)
            log.info("N=%d: today's code rolled the pods in %.0fs", n, row["upgrade"]["wall"])
            row["budgets_settled"] = budgets_settled(setup.api)
        row[name] = steady(setup, codes[name], f"steady-{n}-{name}", passes)
        log.info(
            "N=%d %s: steady pass %.2fs wall, %.2fs client CPU, %.2fs apiserver+etcd CPU;"
            " LISTs served by the watch cache %d, by etcd %d",
            n,
            name,
            row[name]["wall"],
            row[name]["cpu"],
            row[name]["server_cpu"],
            row[name]["lists_served"]["cache"],
            row[name]["lists_served"]["etcd"],
        )
    return row


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="1000,10000", help="ascending N (default %(default)s)")
    p.add_argument("--namespaces", type=int, default=20)
    p.add_argument(
        "--passes", type=int, default=5, help="steady daemon passes per code (%(default)s)"
    )
    p.add_argument("--baseline", default=BASELINE, help="commit to compare with")
    p.add_argument("--previous", default=PREVIOUS, help="second commit to compare with")
    p.add_argument("--qps", type=int, default=1000)
    p.add_argument("--burst", type=int, default=1000)
    p.add_argument("--no-profile", action="store_true")
    p.add_argument(
        "--worktree", action="store_true", help="measure the work tree (default: last commit)"
    )
    p.add_argument("--keep", action="store_true", help="leave the bench cluster running")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    from bench.run import STATE_DIR, freeze_code  # one bench cluster for all harnesses
    from hack.cluster import cluster as launcher

    args = _args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    sizes = sorted({int(s) for s in args.sizes.split(",") if s.strip()})
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    frozen = STATE_DIR / "frozen" / f"scale-{stamp}"
    code = {
        "today": freeze_code(frozen / "today", worktree=args.worktree),
        "baseline": freeze_commit(args.baseline, frozen / "baseline"),
        "previous": freeze_commit(args.previous, frozen / "previous"),
    }
    codes = {name: Path(c["dir"]) for name, c in code.items()}
    # A population from an earlier run would change what "N" means.
    launcher.down(STATE_DIR)
    cluster = launcher.up(STATE_DIR)
    rows: list[dict[str, Any]] = []
    doc: dict[str, Any] = {
        "command": "python -m bench.scale " + " ".join(argv or sys.argv[1:]),
        "started": stamp,
        "code": code,
        "settings": {"RECONCILER_QPS": args.qps, "RECONCILER_BURST": args.burst},
    }
    try:
        setup = Setup.for_cluster(
            cluster,
            STATE_DIR,
            STATE_DIR / "logs" / f"scale-{stamp}",
            frozen / "today",
            qps=args.qps,
            burst=args.burst,
            settle_timeout=3600.0,
            kopf_timeout=0.0,
        )
        namespaces = namespace_names(args.namespaces)
        have = 0
        for n in sizes:
            rows.append(measure_size(setup, codes, namespaces, have, n, args.passes))
            have = n
        if not args.no_profile:
            prefix = STATE_DIR / "profiles" / f"scale-{stamp}"
            prefix.mkdir(parents=True, exist_ok=True)
            doc["profiles"] = {
                name: profile(
                    setup, path, prefix / f"steady-{sizes[-1]}-{name}", steady=name == "today"
                )
                for name, path in codes.items()
            }
    finally:
        if not args.keep:
            launcher.down(STATE_DIR)
    doc["sizes"] = rows
    doc["verdicts"] = verdicts(rows, args.baseline, args.previous)
    doc["table"] = table(rows, doc["verdicts"], args.previous)
    out = ROOT / "bench" / "results" / f"scale-{stamp}.json"
    out.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    print(doc["table"])
    print(f"\nresults: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
