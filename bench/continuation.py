"""Where the pages of a LIST of metadata are served, and what that costs.

    python -m bench.scale --keep        # leaves 10,000 Redis, 30,000 pods, 10,000 Xca
    python -m bench.continuation [--repeat 5] [--no-wait] [--keep]

The apiserver serves a consistent LIST's first page from its watch cache. A
later page (a ``continue`` token) is served from the cache only while the
cache holds a snapshot at or below the LIST's resourceVersion; each etcd
compaction (every 5 minutes by default) drops the snapshots older than it.
In a cluster where a kind has not been written since the last compaction,
every page after the first is therefore read from etcd and decoded again.

On the objects already in the bench cluster, this LISTs the metadata of pods,
Redis and Xca three ways (in pages of 2000, the default before one page,
in one page, and one LIST per namespace), first with no write to them since a compaction
(it waits for one unless ``--no-wait``), then again just after one object of
each kind is annotated. For each it reports the apiserver and etcd CPU and
how many requests the watch cache and etcd served.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.cpu import CpuMeter
from bench.kubeapi import CORE_PATH, MERGE_PATCH, Api, Request
from bench.lists import served
from hack.cluster import cluster as launcher
from reconciler.client.kube import Kube
from reconciler.client.protowire import META_ACCEPT, version_page
from reconciler.config import Config
from reconciler.kinds.registry import KINDS
from reconciler.model import PODS, ResourceType

ROOT = Path(__file__).resolve().parent.parent
STATE_DIR = ROOT / ".cluster-bench"
RESULTS = ROOT / "bench" / "results"
PAGED = 2000  # the metadata page size before the default became 0 (one page)
WAIT_MAX = 630.0  # s: etcd is compacted every 300 s to the revision of the tick before;
# the cache reads the compaction every 15 s


@dataclass(frozen=True)
class Variant:
    name: str
    page_size: int  # 0: no limit, one page
    per_namespace: bool = False


VARIANTS = (
    Variant(f"pages of {PAGED}", PAGED),
    Variant("one page", 0),
    Variant(f"one LIST per namespace, pages of {PAGED}", PAGED, per_namespace=True),
)


def _resources() -> dict[str, ResourceType]:
    found: dict[str, ResourceType] = {"pods": PODS}
    found.update({kind.name: kind.resource for kind in KINDS})
    return found


def one_list(kube: Kube, res: ResourceType, v: Variant, namespaces: list[str]) -> int:
    """Items of one LIST of metadata (or one per namespace), asked as the daemon
    asks; each page is held whole here, which costs the server nothing more."""
    scopes: list[str | None] = list(namespaces) if v.per_namespace else [None]
    return sum(
        len(kube.list(res, ns, None, version_page, META_ACCEPT, page_size=v.page_size))
        for ns in scopes
    )


def measure(
    kube: Kube, api: Api, meter: CpuMeter, namespaces: list[str], repeat: int
) -> list[dict[str, Any]]:
    """Rounds alternate over kinds and variants, so noise spreads over all."""
    samples: dict[tuple[str, str], list[dict[str, float]]] = {}
    for _ in range(repeat):
        for name, res in _resources().items():
            for v in VARIANTS:
                before, cpu = served(api, (res.plural,)), meter.snapshot()
                items = one_list(kube, res, v, namespaces)
                spent, after = meter.since(cpu, 0.0), served(api, (res.plural,))
                samples.setdefault((name, v.name), []).append(
                    {
                        "server_cpu": spent["apiserver"] + spent["etcd"],
                        "items": items,
                        "from_cache": after["cache"] - before["cache"],
                        "from_etcd": after["etcd"] - before["etcd"],
                    }
                )
    return [
        {
            "kind": kind,
            "variant": variant,
            "items": got[0]["items"],
            "server_cpu_median": statistics.median(s["server_cpu"] for s in got),
            "server_cpu_lowest": min(s["server_cpu"] for s in got),
            "from_cache": [s["from_cache"] for s in got],
            "from_etcd": [s["from_etcd"] for s in got],
            "each": [round(s["server_cpu"], 3) for s in got],
        }
        for (kind, variant), got in samples.items()
    ]


def wait_for_compaction(kube: Kube, api: Api) -> float | None:
    """Seconds until a paged LIST of Redis is read from etcd past its first
    page, i.e. a compaction has passed since the last write; None if not seen."""
    res, started = _resources()["Redis"], time.monotonic()
    while time.monotonic() - started < WAIT_MAX:
        before = served(api, (res.plural,))
        one_list(kube, res, VARIANTS[0], [])
        if served(api, (res.plural,))["etcd"] - before["etcd"] > 1:  # past the revision read
            return time.monotonic() - started
        time.sleep(15)
    return None


def touch(api: Api, namespace: str) -> None:
    """Annotate one object of each kind: the watch cache takes a new snapshot."""
    for res in _resources().values():
        base = f"{res.path_prefix}/namespaces/{namespace}/{res.plural}"
        listed = api.call(Request("GET", f"{base}?limit=1"))
        name = listed["items"][0]["metadata"]["name"]
        patch = {"metadata": {"annotations": {"bench/touched": str(time.time())}}}
        api.call(
            Request(
                "PATCH",
                f"{base}/{name}",
                patch,
                MERGE_PATCH,
            )
        )


def table(rows: list[dict[str, Any]]) -> str:
    """Markdown; the served counts are per round, since a compaction may fall
    between two rounds."""
    lines = [
        "| state | kind | variant | items | apiserver + etcd CPU s, median (lowest) "
        "| LISTs served by watch cache / etcd, each round |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        rounds = zip(r["from_cache"], r["from_etcd"], strict=True)
        each = " ".join(f"{c:.0f}/{e:.0f}" for c, e in rounds)
        lines.append(
            f"| {r['state']} | {r['kind']} | {r['variant']} | {r['items']} "
            f"| {r['server_cpu_median']:.2f} ({r['server_cpu_lowest']:.2f}) "
            f"| {each} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--no-wait", action="store_true", help="do not wait for a compaction first")
    p.add_argument("--keep", action="store_true", help="leave the bench cluster running")
    args = p.parse_args(argv)
    cluster = launcher.up(STATE_DIR)
    try:
        api = Api(cluster.server, cluster.token, cluster.ca_file)
        kube = Kube(Config(kubeconfig=str(cluster.kubeconfig), qps=1000, burst=1000))
        meter = CpuMeter(STATE_DIR)
        names = api.call(Request("GET", f"{CORE_PATH}/namespaces"))["items"]
        namespaces = [n["metadata"]["name"] for n in names]
        redis = _resources()["Redis"]
        one = api.call(Request("GET", f"{redis.path_prefix}/{redis.plural}?limit=1"))["items"]
        if not one:
            print("no Redis in the bench cluster: run python -m bench.scale --keep first")
            return 2
        waited = None if args.no_wait else wait_for_compaction(kube, api)
        state = "as found" if waited is None else "after a Redis LIST read pages from etcd"
        rows = [{"state": state, **r} for r in measure(kube, api, meter, namespaces, args.repeat)]
        touch(api, one[0]["metadata"]["namespace"])
        rows += [
            {"state": "just after a write", **r}
            for r in measure(kube, api, meter, namespaces, args.repeat)
        ]
    finally:
        if not args.keep:
            launcher.down(STATE_DIR)
    text = table(rows)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = RESULTS / f"continuation-{stamp}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "command": "python -m bench.continuation " + " ".join(argv or sys.argv[1:]),
        "waited_for_compaction_s": waited,
        "namespaces": len(namespaces),
        "rows": rows,
        "table": text,
    }
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(text)
    print(f"\nresults: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
