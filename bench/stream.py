"""Client CPU and memory of one LIST of metadata in one page: held whole and
then parsed, against parsed as it arrives (streams.VersionStream).

    python -m bench.stream [--pods 30000] [--rounds 5]

No cluster: a local HTTP server answers with a list of ``--pods`` items,
written as a PodList with protowire's own schema (a PartialObjectMetadataList
has the same field numbers for the list and each item's metadata), about 1.6 kB each (the
apiserver's are about 1.7 kB, mostly managedFields, which the reader skips as
it skips these labels), with and without gzip. Each round reads it once each
way through ``transport.Direct``, each in a fresh process, which reports its
CPU and how far its peak RSS rose above what it had before the request.
Writes ``bench/results/stream-<stamp>.json``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
WAYS = ("whole", "stream")


def page(pods: int) -> bytes:
    """A LIST of pods' metadata as the apiserver's envelope carries it."""
    from reconciler.client.protowire import MAGIC, MESSAGES

    wire = MESSAGES["PodList"]()
    for i in range(pods):
        meta = wire.items.add().metadata
        meta.namespace, meta.name = f"ns-{i % 20}", f"redis-{i // 3}-{i % 3}"
        meta.uid, meta.resource_version = f"{i:08d}-0000-4000-8000-{i:012d}", str(10**6 + i)
        for k in range(12):
            meta.labels[f"example.com/key-{k}"] = os.urandom(50).hex()
    return MAGIC + MESSAGES["Unknown"](raw=wire.SerializeToString()).SerializeToString()


def _serve(plain: bytes) -> ThreadingHTTPServer:
    zipped = gzip.compress(plain, 1)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            gz = "gzip" in (self.headers.get("Accept-Encoding") or "")
            body = zipped if gz else plain
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            if gz:
                self.send_header("Content-Encoding", "gzip")
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))


def one(way: str, url: str, gzipped: bool) -> dict[str, Any]:
    """One read, in this process: items, CPU seconds, peak RSS rise in MB."""
    from reconciler.client.protowire import version_page
    from reconciler.client.streams import VersionStream
    from reconciler.client.transport import Direct

    direct = Direct(url, None, timeout=60, compression=gzipped)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # the peak (VmHWM) starts again from now
    before = _status_kb("VmRSS")
    cpu = time.process_time()
    if way == "whole":
        items = version_page(direct.send("GET", "/", None, {}).body).items
    else:
        stream = VersionStream()
        direct.send("GET", "/", None, {}, stream.feed)
        items = stream.close().items
    cpu = time.process_time() - cpu
    peak = _status_kb("VmHWM")
    return {"items": len(items), "cpu_s": cpu, "peak_rise_mb": (peak - before) / 1024}


def main(argv: list[str] | None = None) -> int:
    doc = (__doc__ or "").split("\n")[0]
    p = argparse.ArgumentParser(prog="python -m bench.stream", description=doc)
    p.add_argument("--pods", type=int, default=30_000)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--one", nargs=3, metavar=("WAY", "URL", "GZIP"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.one:
        way, url, gz = args.one
        print(json.dumps(one(way, url, gz == "1")))
        return 0
    body = page(args.pods)
    server = _serve(body)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    runs: dict[str, list[dict[str, Any]]] = {}
    for _ in range(args.rounds):
        for gz in ("0", "1"):
            for way in WAYS:
                cmd = [sys.executable, "-m", "bench.stream", "--one", way, url, gz]
                out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True)
                runs.setdefault(f"{way}, gzip {'on' if gz == '1' else 'off'}", []).append(
                    json.loads(out.stdout)
                )
    server.shutdown()
    lines = [
        f"{args.pods} pods' metadata, {len(body) / 1e6:.1f} MB; medians of {args.rounds}",
        "| read | client CPU s | peak RSS rise MB |",
        "|---|---|---|",
    ]
    for label, rs in runs.items():
        assert all(r["items"] == args.pods for r in rs), label
        cpu = statistics.median(r["cpu_s"] for r in rs)
        rise = statistics.median(r["peak_rise_mb"] for r in rs)
        lines.append(f"| {label} | {cpu:.3f} | {rise:.1f} |")
    text = "\n".join(lines)
    print(text)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = ROOT / "bench" / "results" / f"stream-{stamp}.json"
    out.write_text(json.dumps({"argv": argv, "bytes": len(body), "runs": runs, "table": text}))
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
