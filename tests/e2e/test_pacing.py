"""The daemon's adaptive pace on the real apiserver: with a 30 s interval, a
new Redis is Ready within seconds, because the passes after a write come
early; once converged, the daemon goes back to its interval, by doubling
delays, so a pod deleted by hand right after is back in seconds too."""

from __future__ import annotations

import re
import signal
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

from .conftest import Kubectl, Reconciler, free_port, probe, wait_for
from .test_redis import redis_yaml


def ready_replicas(kubectl: Kubectl, ns: str) -> int:
    redis = kubectl.json("get", "redis", "redis-sample", "-n", ns)
    return int(redis.get("status", {}).get("readyReplicas", 0))


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as resp:
        return str(resp.read().decode())


def early_passes(metrics: str, reason: str) -> float:
    found = re.search(rf'reconciler_early_passes_total\{{reason="{reason}"\}} (\S+)', metrics)
    return float(found.group(1)) if found else 0.0


def pod_uid(kubectl: Kubectl, ns: str) -> str | None:
    pods = kubectl.json("get", "pods", "-n", ns, "--field-selector", "metadata.name=redis-sample-0")
    items = pods["items"]
    return str(items[0]["metadata"]["uid"]) if items else None


def paced_early(out: str, why: str, within: float) -> bool:
    """Whether the log shows an early pass for ``why`` set ``within`` seconds
    by --min-interval, or set later by the budget and saying so (a loaded
    machine makes passes dear)."""
    lines = re.finditer(rf"next pass in ([\d.]+)s: {why} \(.*", out)
    return any(
        float(line.group(1)) <= within or "; paced by the budget: " in line.group(0)
        for line in lines
    )


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
        first_uid = pod_uid(kubectl, ns)
        ready_after = time.monotonic() - pods_at
        # Deleted by hand once the daemon found the cluster still: one of the
        # passes that settle back to the interval puts it back.
        wait_for(
            lambda: early_passes(scrape(port), "settling") >= 1, what="a settling pass", timeout=15
        )
        deleted_at = time.monotonic()
        kubectl.run("delete", "pod", "redis-sample-0", "-n", ns, "--wait=false")
        wait_for(lambda: pod_uid(kubectl, ns) not in (None, first_uid), what="the pod back")
        back_after = time.monotonic() - deleted_at
        metrics = scrape(port)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out[-3000:]
    # Polling's bound would be a whole interval after the pods were created.
    assert ready_after < 10, f"Ready {ready_after:.1f}s after the pods were created"
    # One --min-interval after the pass that wrote, less the time that pass took
    # (a pass that also makes the Service and the budget logs 0.9s).
    assert paced_early(out, "wrote", within=1.0), out[-3000:]
    # The regular pass would have been up to 30 s away.
    assert back_after < 10, f"the pod deleted by hand was back after {back_after:.1f}s"
    # Settling doubles the last early delay (two --min-interval on an idle
    # machine; twice the budget's delay when passes were dear, which
    # tests/unit/run/test_pacing.py pins): well before the interval either way.
    assert paced_early(out, "settling", within=15.0), out[-3000:]
    assert early_passes(metrics, "wrote") >= 1, metrics


PENDING_REDIS = """
apiVersion: myapp.demo.kubebuilder.io/v1
kind: Redis
metadata: {{name: pending, namespace: {ns}}}
spec: {{port: 6379, num: 2, nodeSelector: {{no-such-node: "true"}}}}
"""


def budget_paced(metrics: str) -> float:
    found = re.search(r"^reconciler_budget_paced_passes_total (\S+)$", metrics, re.M)
    return float(found.group(1)) if found else 0.0


@dataclass(frozen=True)
class Run:
    out: str
    metrics: str
    seconds: float  # the window the passes were counted in


def run_while_pending(
    reconciler: Reconciler,
    ns: str,
    budget: str,
    seconds: float,
    until: Callable[[str], bool] = lambda _metrics: True,
) -> Run:
    """The daemon's output and metrics over a window of at least ``seconds``
    (passes are counted in it), extended (up to a minute) until ``until``
    holds of the metrics, of a Redis whose pods no node can take:
    progressing, never Ready, so every pass is early."""
    port = free_port()
    proc = reconciler.daemon(
        ns,
        "--interval",
        "30",
        "--min-interval",
        "0.2",
        "--pace-budget",
        budget,
        "--metrics-address",
        f"127.0.0.1:{port}",
    )
    try:
        wait_for(lambda: probe(port, "/readyz") == 200, what="the first pass")
        started = time.monotonic()
        time.sleep(seconds)

        def held() -> str | None:
            metrics = scrape(port)
            return metrics if until(metrics) else None

        metrics = wait_for(held, timeout=60, what="the window's passes")
        window = time.monotonic() - started
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out[-3000:]
    return Run(out, metrics, window)


LOOKED = re.compile(
    r"next pass in ([0-9.]+)s: (?:wrote \(\d+ writes?\)|progressing \(1 object progressing\));"
    r" paced by the budget: a pass looks for ([0-9.]+)s, 2% of the time"
)


# The same at a budget of 1.
LOOSE = re.compile(r"paced by the budget: a pass looks for ([0-9.]+)s, 100% of the time")


PASS_LINE = re.compile(r"pass \w+ ok in ([0-9.]+)s")


def honoured(out: str, budget: float) -> list[float]:
    """The waits the budget set, each checked against the pass before it: the
    pass's own time plus the wait is at least what it looked for over the
    budget (less the rounding of the logged figures)."""
    took, waits = None, []
    for line in out.splitlines():
        if (ran := PASS_LINE.search(line)) is not None:
            took = float(ran.group(1))
        elif (paced := LOOKED.search(line)) is not None and took is not None:
            wait, looked = float(paced.group(1)), float(paced.group(2))
            assert took + wait >= (looked - 0.005) / budget - 0.1, line
            waits.append(wait)
    return waits


def test_while_objects_progress_the_budget_spaces_the_passes_by_what_they_cost(
    reconciler: Reconciler, kubectl: Kubectl, ns: str
) -> None:
    """At a budget of 2%, a pass that looks for tens of milliseconds waits
    past the 0.2 s --min-interval, and the log and the metric say so; at a
    budget of 1 the same passes come every --min-interval, unpaced."""
    kubectl.apply(PENDING_REDIS.format(ns=ns))
    # The passes that write, then those that wait for the pods, are paced
    # until nothing new for a few seconds lets the backoff space them more
    # than the budget does: the slower the passes (the busier the machine),
    # the fewer of them wait for the pods, so both kinds are counted.
    # A pass that looks for 0.14 s on a loaded machine waits 7 s: the window
    # lasts until two passes were paced, however slow they are.
    tight = run_while_pending(
        reconciler, ns, "0.02", 6, until=lambda metrics: budget_paced(metrics) >= 2
    )
    loose = run_while_pending(reconciler, ns, "1", 3)
    paced = honoured(tight.out, budget=0.02)
    assert len(paced) >= 2, tight.out[-3000:]
    assert budget_paced(tight.metrics) >= len(paced), tight.metrics
    # At 100% the budget waits only as long as a pass looked, and so paces
    # only a pass that itself looked past --min-interval (one on a loaded
    # machine): never one that looked less.
    looks = [float(m.group(1)) for m in LOOSE.finditer(loose.out)]
    assert loose.out.count("paced by the budget") == len(looks), loose.out[-3000:]
    assert all(look >= 0.2 - 0.005 for look in looks), loose.out[-3000:]
    assert budget_paced(loose.metrics) <= len(looks)
    # Unpaced, the same passes come several times as often.
    passes = len(re.findall(r"pass \w+ ok in", tight.out)) / tight.seconds
    unpaced = len(re.findall(r"pass \w+ ok in", loose.out)) / loose.seconds
    assert unpaced > 2 * passes, (passes, unpaced)
