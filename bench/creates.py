"""What the apiserver spends on the pods a first pass creates, as JSON and as
protobuf.

    python -m bench.creates [--pods 600] [--repeat 3] [--keep]

Each round creates ``--pods`` pods (the reconciler's own manifests, owned by
one real Redis so the garbage collector leaves them alone) through
``Kube.create_unread``, once with the ``protobuf`` setting off and once on,
in a fresh namespace each, 8 at a time as the executor writes. The pods are
scheduled and run meanwhile, as in a first pass, at the same cost for both.
Each round's namespace is deleted, and gone, before the next starts, and
the variants take turns going first. It reports the medians of apiserver,
etcd and client CPU over ``--repeat`` rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.cpu import CpuMeter
from bench.kubeapi import (
    CORE_PATH,
    REDIS_PATH,
    Api,
    Request,
    create_namespace,
    parallel,
    redis_body,
)
from bench.lists import STATE_DIR
from hack.cluster import cluster as launcher
from reconciler.config import Config
from reconciler.kinds.redis import from_api, pod_manifest, validate_spec
from reconciler.kube import Kube
from reconciler.model import PODS

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
VARIANTS = {"json": False, "protobuf": True}


def manifests(api: Api, namespace: str, pods: int) -> list[dict[str, Any]]:
    """The reconciler's manifests for ``pods`` pods of Redis objects of 3,
    all owned by one real Redis (the template is what matters, not the owner)."""
    create_namespace(api, namespace)
    path = f"{REDIS_PATH}/namespaces/{namespace}/redis"
    redis = from_api(api.call(Request("POST", path, redis_body(namespace, "owner"))))
    spec = validate_spec(redis.spec, Config().image).spec
    assert spec is not None
    out = []
    for i in range(pods):
        out.append(pod_manifest(replace(redis, name=f"r{i // 3}"), spec, i % 3))
    return out


def one_round(kube: Kube, api: Api, meter: CpuMeter, pods: int) -> dict[str, float]:
    namespace = f"creates-{uuid.uuid4().hex[:8]}"
    bodies = manifests(api, namespace, pods)
    time.sleep(1)  # let the namespace's own controllers settle
    client0, before = os.times(), meter.snapshot()
    parallel(lambda body: kube.create_unread(PODS, namespace, body), bodies)
    client1, window = os.times(), meter.since(before, 0.0)
    api.call(Request("DELETE", f"{CORE_PATH}/namespaces/{namespace}"))
    while api.send(Request("GET", f"{CORE_PATH}/namespaces/{namespace}")).status_code != 404:
        time.sleep(1)
    return {
        "wall": window["wall"],
        "apiserver": window["apiserver"],
        "etcd": window["etcd"],
        "client": (client1.user + client1.system) - (client0.user + client0.system),
        "foreign_cores": window["foreign_cores"] + window["steal_cores"],
    }


def table(rows: list[dict[str, Any]]) -> str:
    base = rows[0]
    out = [
        "| variant | apiserver CPU s | etcd CPU s | client CPU s | wall s |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(
            f"| {r['variant']} | {r['apiserver']:.2f} ({r['apiserver'] / base['apiserver']:.2f}x) "
            f"| {r['etcd']:.2f} | {r['client']:.2f} | {r['wall']:.2f} |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pods", type=int, default=600)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--keep", action="store_true", help="leave the bench cluster running")
    args = p.parse_args(argv)
    cluster = launcher.up(STATE_DIR)
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in VARIANTS}
    try:
        api = Api(cluster.server, cluster.token, cluster.ca_file)
        meter = CpuMeter(STATE_DIR)
        base = Config(kubeconfig=str(cluster.kubeconfig), qps=1000, burst=1000)
        for round_ in range(args.repeat):
            order = list(VARIANTS.items())
            for name, protobuf in order if round_ % 2 == 0 else order[::-1]:
                kube = Kube(replace(base, protobuf=protobuf))
                samples[name].append(one_round(kube, api, meter, args.pods))
                print(name, samples[name][-1], file=sys.stderr, flush=True)
    finally:
        if not args.keep:
            launcher.down(STATE_DIR)
    rows = [
        {"variant": name, **{k: statistics.median(s[k] for s in runs) for k in runs[0]}}
        for name, runs in samples.items()
    ]
    text = table(rows)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = RESULTS / f"creates-{stamp}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "command": "python -m bench.creates " + " ".join(argv or sys.argv[1:]),
        "pods": args.pods,
        "repeat": args.repeat,
        "samples": samples,
        "rows": rows,
        "table": text,
    }
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(text)
    print(f"\nresults: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
