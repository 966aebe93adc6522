"""The steady pass as the daemon pays it: `reconciler run`, passes 2..K+1.

A one-shot `reconciler sync` pays for starting Python and importing its
modules on every pass; `reconciler run` pays that once. A polling reconciler
that runs forever costs what its daemon's passes cost, so the harness measures
those too: it starts the daemon on the converged namespace, waits for its
first pass (which pays the start-up), and then takes the CPU time of the
process (from /proc) and the daemon's own pass durations (from /metrics)
over the next ``passes`` passes.
"""

from __future__ import annotations

import re
import socket
import sys
import time
import urllib.request
from dataclasses import dataclass
from typing import Any

from bench import proc
from bench.cpu import CpuMeter, process_cpu

_SAMPLE = re.compile(r"^(\w+)(\{[^}]*\})? ([0-9.eE+-]+)$")


@dataclass(frozen=True)
class Reading:
    at: float
    cpu: float  # user + system seconds of the daemon process
    passes: float
    pass_seconds: float  # sum of the daemon's own pass durations
    requests: float
    rss_mb: float


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return float(line.split()[1]) / 1024.0
    return 0.0


def _metrics(port: int) -> dict[str, float]:
    """Sum each metric's samples over labels (enough for counters and _sum/_count)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    totals: dict[str, float] = {}
    for line in text.splitlines():
        if match := _SAMPLE.match(line):
            totals[match[1]] = totals.get(match[1], 0.0) + float(match[3])
    return totals


def _read(child: proc.Child, port: int) -> Reading | None:
    try:
        values = _metrics(port)
    except OSError:
        return None
    return Reading(
        at=time.monotonic(),
        cpu=process_cpu(child.pid),
        passes=values.get("reconciler_passes_total", 0.0),
        pass_seconds=values.get("reconciler_pass_duration_seconds_sum", 0.0),
        requests=values.get("reconciler_api_requests_total", 0.0),
        rss_mb=_rss_mb(child.pid),
    )


def _await_passes(child: proc.Child, port: int, count: float, timeout: float) -> Reading:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if child.exited():
            raise RuntimeError("reconciler run exited early")
        reading = _read(child, port)
        if reading is not None and reading.passes >= count:
            return reading
        time.sleep(0.5)  # each scrape costs the daemon CPU; keep them few
    raise RuntimeError(f"reconciler run: fewer than {count:.0f} passes in {timeout:.0f}s")


def measure(
    argv_tail: list[str],
    env: dict[str, str],
    log_path: Any,
    cwd: Any,
    passes: int = 5,
    interval: float = 2.0,
    timeout: float = 300.0,
    meter: CpuMeter | None = None,
) -> dict[str, Any]:
    """Run the daemon for 1 + ``passes`` passes; report the last ``passes``.

    With a ``meter``, also the cluster's CPU over exactly those passes
    ("machine_cpu"), so the server-side price excludes the start-up pass."""
    port = _free_port()
    argv = [sys.executable, "-m", "reconciler", "run", *argv_tail]
    argv += ["--interval", str(interval), "--jitter", "0"]
    argv += ["--metrics-address", f"127.0.0.1:{port}", "--log-format", "json"]
    child = proc.Child(argv, env, log_path, cwd)
    try:
        first = _await_passes(child, port, 1, timeout)
        before = meter.snapshot() if meter else None
        last = _await_passes(child, port, 1 + passes, timeout)
        window = meter.since(before, last.cpu - first.cpu) if meter and before else None
    finally:
        child.stop()
        usage = child.wait()
    if usage.returncode != 0:
        raise RuntimeError(f"reconciler run exited {usage.returncode}:\n{usage.stderr_tail}")
    done = last.passes - first.passes
    out: dict[str, Any] = {"machine_cpu": window} if window else {}
    return out | {
        "passes": done,
        "interval": interval,
        "wall": (last.pass_seconds - first.pass_seconds) / done,
        "cpu": (last.cpu - first.cpu) / done,  # includes the idle loop between passes
        "requests": (last.requests - first.requests) / done,
        "rss_mb": last.rss_mb,
        "max_rss_mb": usage.max_rss_mb,
        "total_cpu": usage.cpu,  # the whole process, start-up included
    }
