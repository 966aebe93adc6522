"""What one pass's pod LIST costs, by the choices a client makes.

    python -m bench.lists [--pods 6000] [--namespaces 20] [--repeat 5] [--keep]

The steady pass is mostly one LIST of every pod. This fills a cluster with
owned, Running pods (the reconciler's own manifest) and then LISTs them every
way worth choosing between, in one run, each ``--repeat`` times (medians):

- the decoder: JSON into dicts then ``pod_from_api`` (the generic reader, for
  GETs and pages the typed structs refuse), against ``json_wire.pod_page``
  (msgspec typed structs);
- gzip asked for or not (``compression``);
- page size 500, 1000, 5000;
- cluster-wide against one LIST per namespace;
- JSON against protobuf (``protowire.pod_page_any``), with and without gzip;
- protobuf in pages of 500, against one page read as it arrives
  (``streams.PodStream``, page size 0);
- the LIST of metadata alone that the daemon's later passes make
  (``protowire.version_page``), in pages of 500, 2000 and 5000, with and
  without gzip, and in one page read as it arrives. For each page it serves,
  the watch cache walks every item left in the LIST, so the page size matters
  more as the pods grow.

For each it reports client CPU (this process), apiserver and etcd CPU (from
/proc), bytes received on the wire, and where the apiserver served the LISTs: from its
watch cache (``apiserver_cache_list_total``) or from etcd
(``apiserver_storage_list_total``).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bench.cpu import CpuMeter
from bench.kubeapi import CORE_PATH, Api, Request, create_namespace, parallel
from hack.cluster import cluster as launcher
from reconciler.client.json_wire import pod_page
from reconciler.client.kube import Kube
from reconciler.client.pod_dict import pod_from_api
from reconciler.client.protowire import ACCEPT, META_ACCEPT, pod_page_any, version_page
from reconciler.client.streams import PodStream, VersionStream
from reconciler.config import Config
from reconciler.kinds.redis.identity import from_api
from reconciler.kinds.redis.pods import pod_manifest
from reconciler.kinds.redis.settings import DEFAULTS
from reconciler.kinds.redis.spec import validate_spec
from reconciler.model import PODS, Incremental, Page

ROOT = Path(__file__).resolve().parent.parent
STATE_DIR = ROOT / ".cluster-bench"
RESULTS = ROOT / "bench" / "results"


def legacy_page(body: bytes) -> Page[Any]:
    """The decoding before the typed decoder: the whole JSON into dicts, then each pod."""
    doc = json.loads(body)
    token = (doc.get("metadata") or {}).get("continue") or ""
    return Page([pod_from_api(item) for item in doc.get("items") or ()], token)


@dataclass(frozen=True)
class Variant:
    name: str
    decode: Callable[[bytes], Page[Any]]
    compression: bool = False
    page_size: int = 500
    per_namespace: bool = False
    accept: str | None = None  # protobuf.ACCEPT asks for protobuf
    # Read as it arrives by this decoder instead (Kube.list_streamed).
    stream: Callable[[], Incremental[Any]] | None = None


VARIANTS = [
    Variant("json dicts + gzip (before)", legacy_page, compression=True),
    Variant("json dicts, no gzip", legacy_page),
    Variant("typed + gzip", pod_page, compression=True),
    Variant("typed, no gzip", pod_page),
    Variant("typed + gzip, page 1000", pod_page, compression=True, page_size=1000),
    Variant("typed + gzip, page 5000", pod_page, compression=True, page_size=5000),
    Variant("typed + gzip, per namespace", pod_page, compression=True, per_namespace=True),
    Variant("protobuf", pod_page_any, accept=ACCEPT),
    Variant("protobuf + gzip, page 500", pod_page_any, compression=True, accept=ACCEPT),
    Variant(
        "protobuf + gzip, one page as it arrives (now)",
        pod_page_any,
        compression=True,
        page_size=0,
        accept=ACCEPT,
        stream=lambda: PodStream({}),
    ),
    Variant(
        "protobuf, no gzip, one page as it arrives",
        pod_page_any,
        page_size=0,
        accept=ACCEPT,
        stream=lambda: PodStream({}),
    ),
    Variant("metadata + gzip, page 500", version_page, compression=True, accept=META_ACCEPT),
    Variant(
        "metadata + gzip, page 2000",
        version_page,
        compression=True,
        page_size=2000,
        accept=META_ACCEPT,
    ),
    Variant(
        "metadata + gzip, page 5000",
        version_page,
        compression=True,
        page_size=5000,
        accept=META_ACCEPT,
    ),
    Variant("metadata, no gzip, page 5000", version_page, page_size=5000, accept=META_ACCEPT),
    Variant(
        "metadata + gzip, one page as it arrives (now)",
        version_page,
        compression=True,
        page_size=0,
        accept=META_ACCEPT,
        stream=VersionStream,
    ),
]

_SAMPLE = re.compile(r"^(\w+)\{([^}]*)\} ([0-9.eE+-]+)$")


def served(api: Api, resources: tuple[str, ...] | None = None) -> dict[str, float]:
    """LISTs of ``resources`` (None: of every resource) the apiserver served so
    far: from its watch cache, and from etcd (a consistent LIST's revision read
    counts there too)."""
    totals = {"cache": 0.0, "etcd": 0.0}
    wanted = None if resources is None else {f'resource="{r}"' for r in resources}
    for line in api.send(Request("GET", "/metrics")).text.splitlines():
        m = _SAMPLE.match(line)
        if not m or (wanted is not None and not wanted & set(m[2].split(","))):
            continue
        if m[1] == "apiserver_cache_list_total":
            totals["cache"] += float(m[3])
        elif m[1] == "apiserver_storage_list_total":
            totals["etcd"] += float(m[3])
    return totals


def populate(api: Api, namespaces: list[str], pods: int) -> None:
    """Pods from the reconciler's own manifest, owned by one real Redis per
    namespace (so the garbage collector keeps them), spread over the namespaces."""
    check = validate_spec({"port": 6379, "num": 3}, DEFAULTS.image)
    assert check.spec is not None
    reqs = []
    for ns in namespaces:
        create_namespace(api, ns)
        body = {
            "apiVersion": "myapp.demo.kubebuilder.io/v1",
            "kind": "Redis",
            "metadata": {"name": "owner", "namespace": ns},
            "spec": {"port": 6379, "num": 3},
        }
        owner = from_api(
            api.call(
                Request("POST", f"/apis/myapp.demo.kubebuilder.io/v1/namespaces/{ns}/redis", body)
            )
        )
        per_ns = pods // len(namespaces)
        for i in range(per_ns):
            manifest = pod_manifest(owner, check.spec, i)
            reqs.append(Request("POST", f"{CORE_PATH}/namespaces/{ns}/pods", manifest))
    parallel(api.call, reqs)


def running(api: Api) -> int:
    """Pods Running (a field selector leaves out remainingItemCount: count them all)."""
    body = api.call(Request("GET", f"{CORE_PATH}/pods?fieldSelector=status.phase%3DRunning"))
    return len(body.get("items") or ())


@dataclass(frozen=True)
class Sample:
    client_cpu: float
    apiserver: float
    etcd: float
    bytes: int
    requests: int
    items: int


def one_list(kube: Kube, api: Api, v: Variant, namespaces: list[str], meter: CpuMeter) -> Sample:
    before_stats = kube.stats.snapshot()
    before = meter.snapshot()
    cpu0 = time.process_time()
    items = 0
    if v.stream is not None:
        items = len(kube.list_streamed(PODS, None, v.stream, v.accept or ACCEPT, v.page_size))
    elif v.per_namespace:
        for ns in namespaces:
            items += len(kube.list(PODS, ns, None, v.decode, v.accept))
    else:
        items = len(kube.list(PODS, None, None, v.decode, v.accept))
    client = time.process_time() - cpu0
    spent = meter.since(before, 0.0)
    used = kube.stats.snapshot() - before_stats
    return Sample(client, spent["apiserver"], spent["etcd"], used.bytes_received, used.total, items)


def measure(
    kube_for: Callable[[Variant], Kube],
    api: Api,
    namespaces: list[str],
    meter: CpuMeter,
    repeat: int,
) -> list[dict[str, Any]]:
    """Rounds alternate over the variants, so a burst of the apiserver's own
    work (its garbage collector) lands on any variant, not on one."""
    kubes = {v.name: kube_for(v) for v in VARIANTS}
    for v in VARIANTS:
        one_list(kubes[v.name], api, v, namespaces, meter)  # warm connections and caches
    runs: dict[str, list[Sample]] = {v.name: [] for v in VARIANTS}
    counted = {v.name: {"cache": 0.0, "etcd": 0.0} for v in VARIANTS}
    for _ in range(repeat):
        for v in VARIANTS:
            counters0 = served(api, ("pods",))
            runs[v.name].append(one_list(kubes[v.name], api, v, namespaces, meter))
            counters1 = served(api, ("pods",))
            for where in ("cache", "etcd"):
                counted[v.name][where] += counters1[where] - counters0[where]
    rows = []
    for v in VARIANTS:
        samples = runs[v.name]
        rows.append(
            {
                "variant": v.name,
                "client_cpu": statistics.median(s.client_cpu for s in samples),
                "apiserver_cpu": statistics.median(s.apiserver for s in samples),
                "etcd_cpu": statistics.median(s.etcd for s in samples),
                "mb": statistics.median(s.bytes for s in samples) / 1e6,
                "requests": samples[0].requests,
                "items": samples[0].items,
                "from_cache": counted[v.name]["cache"],
                "from_etcd": counted[v.name]["etcd"],
            }
        )
        print(rows[-1], file=sys.stderr, flush=True)
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    base = rows[0]
    out = [
        "| variant | client CPU s | apiserver CPU s | etcd CPU s | MB | requests "
        "| LISTs from cache / etcd |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        rel = f" ({r['client_cpu'] / base['client_cpu']:.2f}x)" if r["client_cpu"] else ""
        out.append(
            f"| {r['variant']} | {r['client_cpu']:.3f}{rel} | {r['apiserver_cpu']:.2f} "
            f"({r['apiserver_cpu'] / base['apiserver_cpu']:.2f}x) | {r['etcd_cpu']:.2f} | "
            f"{r['mb']:.1f} | {r['requests']} | {r['from_cache']:.0f} / {r['from_etcd']:.0f} |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pods", type=int, default=6000)
    p.add_argument("--namespaces", type=int, default=20)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--keep", action="store_true", help="leave the bench cluster running")
    args = p.parse_args(argv)
    cluster = launcher.up(STATE_DIR)
    try:
        api = Api(cluster.server, cluster.token, cluster.ca_file)
        namespaces = [f"lists-{i}" for i in range(args.namespaces)]
        if running(api) < args.pods:
            started = time.monotonic()
            populate(api, namespaces, args.pods)
            while running(api) < args.pods:
                time.sleep(2)
            print(
                f"populated {args.pods} pods in {time.monotonic() - started:.0f}s", file=sys.stderr
            )
        meter = CpuMeter(STATE_DIR)
        base = Config(kubeconfig=str(cluster.kubeconfig), qps=1000, burst=1000)

        def kube_for(v: Variant) -> Kube:
            return Kube(replace(base, compression=v.compression, page_size=v.page_size))

        rows = measure(kube_for, api, namespaces, meter, args.repeat)
    finally:
        if not args.keep:
            launcher.down(STATE_DIR)
    text = table(rows)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = RESULTS / f"lists-{stamp}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "command": "python -m bench.lists " + " ".join(argv or sys.argv[1:]),
        "pods": args.pods,
        "namespaces": args.namespaces,
        "repeat": args.repeat,
        "rows": rows,
        "table": text,
    }
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(text)
    print(f"\nresults: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
