"""What storage costs the steady pass: N Redis without it, then the same N with it, in one run.

    python -m bench.storage [--n 10000] [--namespaces 20] [--passes 5]

Starts the bench cluster (<repo>/.cluster-bench, with the local cluster's
provisioner) and creates N Redis ({port: 6379, num: 3}) and N Xca, spread
over ``--namespaces`` namespaces. Today's code converges them and its daemon's
steady pass is measured (`bench.scale.steady`: wall, client CPU, apiserver +
etcd CPU net of the cluster's idle load). Then every Redis gains
``spec.storage`` ({size: 1Gi}): today's code converges again (a claim per pod,
bound by the provisioner; every pod rolled once to mount it), and the steady
pass is measured again, on the same objects and cluster. The target: the
steady pass with storage costs at most 1.15x the client CPU without it (the
claims and the storage classes are listed and read each pass). Results go to
bench/results/storage-<UTC timestamp>.json.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.contenders import Setup
from bench.kubeapi import REDIS_PATH, Request, parallel
from bench.scale import converge, grow, namespace_names, steady

log = logging.getLogger("bench.storage")
ROOT = Path(__file__).resolve().parents[1]
TARGET = 1.15  # steady pass client CPU, with storage / without
SIZE = "1Gi"


def add_storage(setup: Setup, namespaces: list[str], n: int) -> None:
    """spec.storage on every Redis, by a merge patch each."""
    patch = {"spec": {"storage": {"size": SIZE}}}
    requests = [
        Request(
            "PATCH",
            f"{REDIS_PATH}/namespaces/{namespaces[i % len(namespaces)]}/redis/r{i}",
            patch,
            content_type="application/merge-patch+json",
        )
        for i in range(n)
    ]
    parallel(lambda r: setup.api.call(r, ok=(200,)), requests, workers=8)


def _row(label: str, run: dict[str, Any]) -> str:
    return (
        f"| {label} | {run['wall']:.2f} | {run['cpu']:.2f} | {run['server_cpu']:.2f} "
        f"| {run.get('max_rss_mb', 0):.0f} |"
    )


def table(doc: dict[str, Any]) -> str:
    plain, stored = doc["plain"], doc["storage"]
    lines = [
        f"Steady pass at {doc['n']} Redis (3 pods each) and {doc['n']} Xca, one run",
        "",
        "| | wall s | client CPU s | apiserver+etcd CPU s | peak RSS MB |",
        "|---|---:|---:|---:|---:|",
        _row("without storage", plain),
        _row(f"with storage ({3 * doc['n']} claims)", stored),
        "",
        f"client CPU with / without: {doc['ratio']:.3f} (target <= {TARGET}): "
        + ("met" if doc["ratio"] <= TARGET else "MISSED"),
    ]
    return "\n".join(lines)


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.storage", description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=10000, help="Redis (and Xca) (%(default)s)")
    p.add_argument("--namespaces", type=int, default=20)
    p.add_argument("--passes", type=int, default=5, help="steady daemon passes (%(default)s)")
    p.add_argument("--qps", type=int, default=1000)
    p.add_argument("--burst", type=int, default=1000)
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
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    frozen = STATE_DIR / "frozen" / f"storage-{stamp}"
    code = freeze_code(frozen / "today", worktree=args.worktree)
    today = Path(code["dir"])
    launcher.down(STATE_DIR)  # a population from an earlier run would change N
    cluster = launcher.up(STATE_DIR)
    doc: dict[str, Any] = {
        "command": "python -m bench.storage " + " ".join(argv or sys.argv[1:]),
        "started": stamp,
        "code": code,
        "n": args.n,
        "settings": {"RECONCILER_QPS": args.qps, "RECONCILER_BURST": args.burst},
    }
    try:
        setup = Setup.for_cluster(
            cluster,
            STATE_DIR,
            STATE_DIR / "logs" / f"storage-{stamp}",
            frozen / "today",
            qps=args.qps,
            burst=args.burst,
            settle_timeout=3600.0,
            kopf_timeout=0.0,
        )
        namespaces = namespace_names(args.namespaces)
        started = time.monotonic()
        grow(setup.api, namespaces, 0, args.n)
        log.info("created %d Redis and Xca in %.0fs", args.n, time.monotonic() - started)
        doc["converge_plain"] = converge(setup, today, "converge-plain", timeout=3600.0)
        doc["plain"] = steady(setup, today, "steady-plain", args.passes)
        log.info("without storage: %.2fs client CPU a pass", doc["plain"]["cpu"])
        add_storage(setup, namespaces, args.n)
        doc["converge_storage"] = converge(setup, today, "converge-storage", timeout=3600.0)
        log.info("storage added and converged in %.0fs", doc["converge_storage"]["wall"])
        doc["storage"] = steady(setup, today, "steady-storage", args.passes)
        log.info("with storage: %.2fs client CPU a pass", doc["storage"]["cpu"])
    finally:
        if not args.keep:
            launcher.down(STATE_DIR)
    doc["ratio"] = doc["storage"]["cpu"] / doc["plain"]["cpu"]
    doc["table"] = table(doc)
    out = ROOT / "bench" / "results" / f"storage-{stamp}.json"
    out.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    print(doc["table"])
    print(f"\nresults: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
