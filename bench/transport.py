"""Client CPU per request, by the HTTP path `Kube.send` takes.

    python -m bench.transport [--requests 1000] [--rounds 3] [--keep]

The same small GET, sent in turn through:

- ``direct``: `reconciler.client.transport.Direct` (HTTP/1.1 on a kept-alive
  socket per thread), the path for static credentials;
- ``session``: pykube's requests session, the path for exec plugins, auth
  providers and proxies (and every request before `Direct`);
- ``bare``: the standard library's http.client with nothing of ours
  around it: what ``direct`` used before.

Rounds alternate the three, so a noisy machine weighs on each alike. Prints
the median CPU microseconds per request and each path's ratio to ``session``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import ssl
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from bench.run import STATE_DIR
from hack.cluster import cluster as launcher
from reconciler.client import kube, pykube_session, transport
from reconciler.config import Config

PATH = "/api/v1/namespaces/default"


def _bare(server: str, token: str, ca_file: str) -> Callable[[], None]:
    url = urlsplit(server)
    ctx = ssl.create_default_context(cafile=ca_file)
    conn = http.client.HTTPSConnection(url.hostname or "", url.port, context=ctx, timeout=10)
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}

    def send() -> None:
        conn.request("GET", PATH, headers=headers)
        conn.getresponse().read()

    return send


def _cpu_per_request(send: Callable[[], None], n: int) -> float:
    send()  # connect outside the measurement
    start = time.process_time()
    for _ in range(n):
        send()
    return (time.process_time() - start) / n * 1e6


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.transport", description=__doc__.split("\n")[0]
    )
    p.add_argument("--requests", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--keep", action="store_true", help="leave the bench cluster running")
    args = p.parse_args(argv)
    cluster = launcher.up(STATE_DIR)
    try:
        opts = Config(kubeconfig=str(cluster.kubeconfig), qps=1e6, burst=1_000_000)
        direct = kube.Kube(opts)
        assert isinstance(direct.transport, transport.Direct), (
            "the bench cluster's credentials are static"
        )
        session = kube.Kube(opts)
        session.transport = pykube_session.PykubeSession(session.kube_config, opts, None)
        paths: dict[str, Callable[[], None]] = {
            "direct": lambda: direct.send("GET", PATH) and None,
            "session": lambda: session.send("GET", PATH) and None,
            "bare": _bare(cluster.server, cluster.token, str(cluster.ca_file)),
        }
        samples: dict[str, list[float]] = {name: [] for name in paths}
        for _ in range(args.rounds):
            for name, send in paths.items():
                samples[name].append(_cpu_per_request(send, args.requests))
    finally:
        if not args.keep:
            launcher.down(STATE_DIR)
    medians = {name: statistics.median(v) for name, v in samples.items()}
    lines = ["| path | client CPU per GET, µs (median of rounds) | each round | / session |"]
    lines.append("|---|---|---|---|")
    for name, med in medians.items():
        each = ", ".join(f"{v:.0f}" for v in samples[name])
        lines.append(f"| {name} | {med:.0f} | {each} | {med / medians['session']:.2f}x |")
    text = "\n".join(lines)
    print(text)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = Path(__file__).resolve().parent / "results" / f"transport-{stamp}.json"
    out.write_text(json.dumps({"argv": argv, "samples": samples, "table": text}, indent=1))
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
