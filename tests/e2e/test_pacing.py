"""The daemon's adaptive pace on the real apiserver: with a 30 s interval, a
new Redis is Ready within seconds, because the passes after a write come
early; once converged, the daemon goes back to its interval."""

from __future__ import annotations

import re
import signal
import time
import urllib.request

from .conftest import Kubectl, Reconciler, free_port, probe, wait_for
from .test_redis import redis_yaml


def ready_replicas(kubectl: Kubectl, ns: str) -> int:
    redis = kubectl.json("get", "redis", "redis-sample", "-n", ns)
    return int(redis.get("status", {}).get("readyReplicas", 0))


def test_a_new_redis_is_ready_long_before_the_interval(
    reconciler: Reconciler, kubectl: Kubectl, ns: str
) -> None:
    port = free_port()
    proc = reconciler.daemon(
        ns, "--interval", "30", "--min-interval", "1", "--metrics-address", f"127.0.0.1:{port}"
    )
    try:
        # The first pass (at start) finds nothing; the Redis arrives after it.
        wait_for(lambda: probe(port, "/readyz") == 200, what="the first pass")
        kubectl.apply(redis_yaml(ns, num=3))
        # The next regular pass creates the pods (up to 30 s away); early ones follow.
        wait_for(
            lambda: kubectl.json("get", "pods", "-n", ns)["items"], what="the pods", timeout=45
        )
        pods_at = time.monotonic()
        wait_for(lambda: ready_replicas(kubectl, ns) == 3, what="readyReplicas 3", timeout=15)
        ready_after = time.monotonic() - pods_at
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as resp:
            metrics = resp.read().decode()
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out[-3000:]
    # Polling's bound would be a whole interval after the pods were created.
    assert ready_after < 10, f"Ready {ready_after:.1f}s after the pods were created"
    assert re.search(r"next pass in 1s: wrote \(\d+ writes\)", out), out[-3000:]
    early = re.search(r'reconciler_early_passes_total\{reason="wrote"\} (\S+)', metrics)
    assert early and float(early.group(1)) >= 1, metrics
