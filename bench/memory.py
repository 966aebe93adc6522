"""Peak RSS of `reconciler sync --wait` converging N new Redis and N Xca, for
two versions of the code in one run.

    python -m bench.memory [--n 2000] [--against COMMIT] [--keep]

Each version converges its own fresh namespace of N Redis (3 pods each) and
N Xca with `sync --wait`; the RSS of the process is sampled every 0.2 s from
/proc and read against the pass boundaries in its log. Prints, for each
version, the peak and the RSS at the end, and writes the samples and the
pass boundaries to ``bench/results/memory-<stamp>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench.kubeapi import Api, populate
from bench.run import STATE_DIR, freeze_code
from bench.scale import freeze_commit
from hack.cluster import cluster as launcher

ROOT = Path(__file__).resolve().parent.parent
PLANNED = re.compile(r"pass \w+: (\d+) actions? planned")


def _rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def converge(cluster: Any, code_dir: Path, n: int, log_path: Path) -> dict[str, Any]:
    """One version on a fresh namespace: RSS samples (s since start, MB) and
    the seconds at which each pass was planned."""
    api = Api(cluster.server, cluster.token, cluster.ca_file)
    namespace = f"memory-{n}-{os.urandom(3).hex()}"
    populate(api, namespace, n)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECONCILER_")}
    env.update(KUBECONFIG=str(cluster.kubeconfig), RECONCILER_QPS="1000", RECONCILER_BURST="1000")
    argv = [sys.executable, "-m", "reconciler", "sync", "--wait", "--timeout", "1800"]
    argv += ["-n", namespace, "--kubeconfig", str(cluster.kubeconfig)]
    started = time.monotonic()
    with log_path.open("w") as log:
        child = subprocess.Popen(
            argv, env=env, cwd=code_dir, stdout=subprocess.DEVNULL, stderr=log, text=True
        )
        samples: list[tuple[float, float]] = []
        planned: list[tuple[float, int]] = []
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                rss = _rss_mb(child.pid)
                if rss is not None:
                    samples.append((time.monotonic() - started, rss))
                time.sleep(0.2)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        with log_path.open() as reader:
            while child.poll() is None:
                for line in reader:
                    if m := PLANNED.search(line):
                        planned.append((time.monotonic() - started, int(m.group(1))))
                time.sleep(0.1)
        done.set()
        sampler.join()
    return {
        "namespace": namespace,
        "returncode": child.returncode,
        "seconds": time.monotonic() - started,
        "peak_rss_mb": max(r for _, r in samples),
        "end_rss_mb": samples[-1][1],
        "samples": samples,
        "planned": planned,
    }


def main(argv: list[str] | None = None) -> int:
    doc = (__doc__ or "").split("\n")[0]
    p = argparse.ArgumentParser(prog="python -m bench.memory", description=doc)
    p.add_argument("--n", type=int, default=2000)
    p.add_argument("--against", default="HEAD~1", help="the other version: a commit")
    p.add_argument("--keep", action="store_true", help="leave the bench cluster running")
    args = p.parse_args(argv)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    frozen = STATE_DIR / "frozen" / f"memory-{stamp}"
    versions = {
        "today": freeze_code(frozen / "today", False),
        args.against: freeze_commit(args.against, frozen / "against"),
    }
    log_dir = STATE_DIR / "logs" / f"memory-{stamp}"
    log_dir.mkdir(parents=True, exist_ok=True)
    cluster = launcher.up(STATE_DIR)
    runs: dict[str, Any] = {}
    try:
        for label in (args.against, "today"):
            code = Path(versions[label]["dir"])
            runs[label] = converge(
                cluster, code, args.n, log_dir / f"{label}.log".replace("/", "_")
            )
    finally:
        if not args.keep:
            launcher.down(STATE_DIR)
    lines = ["| code | N | passes | seconds | peak RSS MB | RSS at the end MB | exit |"]
    lines.append("|---|---|---|---|---|---|---|")
    for label, r in runs.items():
        lines.append(
            f"| {label} | {args.n} | {len(r['planned'])} | {r['seconds']:.0f} "
            f"| {r['peak_rss_mb']:.0f} | {r['end_rss_mb']:.0f} | {r['returncode']} |"
        )
    text = "\n".join(lines)
    print(text)
    out = ROOT / "bench" / "results" / f"memory-{stamp}.json"
    out.write_text(json.dumps({"argv": argv, "versions": versions, "runs": runs, "table": text}))
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
