"""What the pods of others cost a pass, in one run.

    python -m bench.foreign [--redis 300] [--foreign 10000] [--before 25aa625]

Starts the bench cluster (<repo>/.cluster-bench), creates ``--redis`` Redis
(3 pods each) and as many Xca over 5 namespaces and converges them. Then, for
today's code and for commit ``--before`` (the last that listed every pod in
scope), it measures on the same objects:

- a one-shot ``reconciler sync -A``: client CPU, apiserver + etcd CPU (net of
  the cluster's idle load), bytes received; the median of ``--runs``;
- the daemon, ``reconciler run -A --interval 3``: client CPU and apiserver +
  etcd CPU per steady pass, over ``--passes`` passes;

once as they are, and again after ``--foreign`` unrelated pods (nothing of
ours: another team's web servers) are added in 10 other namespaces and kwok
has made them Running. The verdict: with the unrelated pods, each figure of
today's code is at most 1.2 times what it is without them. Results go to
bench/results/foreign-<UTC timestamp>.json; see docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import daemon, proc
from bench.contenders import Setup
from bench.kubeapi import CORE_PATH, Api, Request, parallel
from bench.scale import converge, freeze_commit, grow, idle_rate, namespace_names, settle

log = logging.getLogger("bench.foreign")
ROOT = Path(__file__).resolve().parents[1]
BEFORE = "25aa625"  # the last commit whose pass listed every pod in scope
BOUND = 1.2
FOREIGN_NAMESPACES = 10
ROWS = {  # key -> what it measures
    "sync_cpu": "one-shot sync -A: client CPU s",
    "sync_server_cpu": "one-shot sync -A: apiserver + etcd CPU s",
    "sync_bytes": "one-shot sync -A: bytes received",
    "daemon_cpu": "daemon (run -A --interval 3), per pass: client CPU s",
    "daemon_server_cpu": "daemon, per pass: apiserver + etcd CPU s",
}


def web_pod(namespace: str, name: str) -> dict[str, Any]:
    """Another team's pod, about as large as a plain Deployment's."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/name": "web", "team": namespace},
        },
        "spec": {
            "containers": [
                {
                    "name": "web",
                    "image": "nginx:1.27",
                    "ports": [{"name": "http", "containerPort": 8080}],
                    "env": [{"name": "MODE", "value": "production"}],
                    "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}},
                }
            ]
        },
    }


def add_foreign(api: Api, count: int) -> None:
    namespaces = [f"others-{i:02d}" for i in range(FOREIGN_NAMESPACES)]
    for ns in namespaces:
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
        api.call(Request("POST", f"{CORE_PATH}/namespaces", body), ok=(201, 409))
    requests = [
        Request(
            "POST",
            f"{CORE_PATH}/namespaces/{namespaces[i % len(namespaces)]}/pods",
            web_pod(namespaces[i % len(namespaces)], f"web-{i}"),
        )
        for i in range(count)
    ]
    parallel(lambda r: api.call(r, ok=(201,)), requests, workers=8)


def running(api: Api) -> int:
    pods = api.call(Request("GET", f"{CORE_PATH}/pods?labelSelector=app.kubernetes.io/name=web"))
    return sum(1 for p in pods["items"] if p.get("status", {}).get("phase") == "Running")


def one_shot(setup: Setup, code_dir: Path, label: str, rate: float) -> dict[str, Any]:
    argv = [sys.executable, "-m", "reconciler", "sync", "-A", "--kubeconfig"]
    argv += [str(setup.kubeconfig), "-o", "json"]
    before = setup.meter.snapshot()
    res = proc.run(argv, setup.reconciler_env(), setup.log_dir / f"{label}.log", code_dir)
    window = setup.meter.since(before, res.cpu)
    summary = json.loads(res.stdout)
    gross = window["apiserver"] + window["etcd"]
    return {
        "cpu": res.cpu,
        "server_cpu": max(0.0, gross - rate * window["wall"]),
        "bytes": summary.get("bytes_received"),
        "requests": summary.get("api_requests"),
        "planned": summary.get("planned"),
        "wall": res.wall,
    }


def idle_after(setup: Setup, seconds: float = 20.0) -> float:
    """apiserver + etcd CPU per second over one window with nothing of ours running."""
    before = setup.meter.snapshot()
    time.sleep(seconds)
    window = setup.meter.since(before, 0.0)
    return float(window["apiserver"] + window["etcd"]) / window["wall"]


def measure(setup: Setup, code_dir: Path, label: str, runs: int, passes: int) -> dict[str, Any]:
    """The cluster's idle load is read before (once quiet) and after, and their
    mean is taken off: with 10,000 pods the background (the scheduler, the
    controller manager, kwok) moves by as much as a steady pass costs."""
    planned = settle(setup, code_dir, f"{label}.settle")
    rate = idle_rate(setup)["rate"]
    shots = [one_shot(setup, code_dir, f"{label}.sync{i}", rate) for i in range(runs)]
    run = daemon.measure(
        ["-A", "--kubeconfig", str(setup.kubeconfig)],
        setup.reconciler_env(),
        setup.log_dir / f"{label}.daemon.log",
        code_dir,
        passes=passes,
        interval=3.0,
        timeout=600.0,
        meter=setup.meter,
    )
    after = idle_after(setup)
    rate = (rate + after) / 2
    window = run["machine_cpu"]
    gross = window["apiserver"] + window["etcd"]
    return {
        "settle_planned": planned,
        "idle_server_cpu_per_s": rate,
        "idle_after_per_s": after,
        "daemon_server_cpu_gross": gross / run["passes"],
        "one_shots": shots,
        "sync_cpu": statistics.median(s["cpu"] for s in shots),
        "sync_server_cpu": statistics.median(s["server_cpu"] for s in shots),
        "sync_bytes": statistics.median(s["bytes"] for s in shots),
        "daemon_cpu": run["cpu"],
        "daemon_server_cpu": max(0.0, gross - rate * window["wall"]) / run["passes"],
        "daemon": run,
    }


def table(doc: dict[str, Any]) -> str:
    lines = [
        "| steady pass | code | without | with unrelated pods | ratio | bound | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, what in ROWS.items():
        for code in ("before", "today"):
            without, with_ = doc["without"][code][key], doc["with"][code][key]
            ratio = with_ / without if without else float("inf")
            verdict = ("PASS" if ratio <= BOUND else "FAIL") if code == "today" else ""
            bound = f"<= {BOUND}x" if code == "today" else ""
            fmt = "{:.0f}" if key == "sync_bytes" else "{:.3f}"
            lines.append(
                f"| {what} | {code} | {fmt.format(without)} | {fmt.format(with_)} "
                f"| {ratio:.2f}x | {bound} | {verdict} |"
            )
    return "\n".join(lines)


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.foreign", description=__doc__.split("\n")[0])
    p.add_argument("--redis", type=int, default=300)
    p.add_argument("--foreign", type=int, default=10000)
    p.add_argument("--before", default=BEFORE, help="commit to compare with")
    p.add_argument("--runs", type=int, default=3, help="one-shot passes per code and phase")
    p.add_argument("--passes", type=int, default=20, help="daemon passes per code and phase")
    p.add_argument("--worktree", action="store_true", help="measure the work tree")
    p.add_argument("--keep", action="store_true", help="leave the bench cluster running")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    from bench.run import STATE_DIR, freeze_code
    from hack.cluster import cluster as launcher

    args = _args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    frozen = STATE_DIR / "frozen" / f"foreign-{stamp}"
    code = {
        "today": freeze_code(frozen / "today", worktree=args.worktree),
        "before": freeze_commit(args.before, frozen / "before"),
    }
    codes = {name: Path(c["dir"]) for name, c in code.items()}
    launcher.down(STATE_DIR)
    cluster = launcher.up(STATE_DIR)
    doc: dict[str, Any] = {
        "command": "python -m bench.foreign " + " ".join(argv or sys.argv[1:]),
        "started": stamp,
        "code": code,
        "redis": args.redis,
        "foreign": args.foreign,
    }
    try:
        setup = Setup.for_cluster(
            cluster,
            STATE_DIR,
            STATE_DIR / "logs" / f"foreign-{stamp}",
            frozen / "today",
            settle_timeout=1800.0,
        )
        grow(setup.api, namespace_names(5), 0, args.redis)
        doc["converge"] = converge(setup, codes["today"], "converge", timeout=1800.0)
        for phase in ("without", "with"):
            if phase == "with":
                started = time.monotonic()
                add_foreign(setup.api, args.foreign)
                deadline = time.monotonic() + 1800
                while running(setup.api) < args.foreign and time.monotonic() < deadline:
                    time.sleep(10)
                doc["foreign_ready_seconds"] = time.monotonic() - started
                log.info("%d unrelated pods Running", running(setup.api))
            doc[phase] = {
                name: measure(setup, codes[name], f"{phase}-{name}", args.runs, args.passes)
                for name in ("before", "today")
            }
            for name in ("before", "today"):
                log.info("%s %s: %s", phase, name, {k: doc[phase][name][k] for k in ROWS})
    finally:
        if not args.keep:
            launcher.down(STATE_DIR)
    doc["table"] = table(doc)
    out = ROOT / "bench" / "results" / f"foreign-{stamp}.json"
    out.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    print(doc["table"])
    print(f"\n{out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
