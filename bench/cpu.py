"""Where the machine's CPU went during one measured phase.

The 2-core machine is shared (other engineers' clusters and test runs), and a
contender's wall time depends on how much CPU the apiserver got. So every
phase records, from /proc: the CPU used by each component of the bench
cluster (the server-side price of the contender's requests, which contention
barely changes), by the harness itself, and by everything else on the
machine ("foreign" load, to tell a slow contender from a busy neighbour).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TICK = os.sysconf("SC_CLK_TCK")
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")


@dataclass(frozen=True)
class MachineTimes:
    busy: float  # CPU seconds this machine's kernel ran something (all cores)
    steal: float  # CPU seconds the hypervisor gave to other guests instead


def machine_times() -> MachineTimes:
    """From /proc/stat. Steal is kept apart: on a shared host it is CPU this
    machine wanted and did not get, not work anyone here did."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    steal = fields[7] if len(fields) > 7 else 0
    return MachineTimes((sum(fields[:7]) - idle) / TICK, steal / TICK)


def machine_busy() -> float:
    """CPU seconds the whole machine has been busy (all cores), steal excluded."""
    return machine_times().busy


def process_cpu(pid: int) -> float:
    """user + system CPU seconds of one live process (0 if it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def cluster_pids(state_dir: Path) -> dict[str, int]:
    """The bench cluster's component pids, from the launcher's pid files."""
    pids = {}
    for name in COMPONENTS:
        try:
            pids[name] = int((state_dir / "pids" / f"{name}.pid").read_text())
        except (OSError, ValueError):
            continue
    return pids


@dataclass(frozen=True)
class Snapshot:
    at: float
    busy: float
    steal: float
    components: dict[str, float]
    harness: float


class CpuMeter:
    def __init__(self, state_dir: Path) -> None:
        self.pids = cluster_pids(state_dir)

    def snapshot(self) -> Snapshot:
        times = os.times()
        machine = machine_times()
        return Snapshot(
            at=time.monotonic(),
            busy=machine.busy,
            steal=machine.steal,
            components={name: process_cpu(pid) for name, pid in self.pids.items()},
            harness=times.user + times.system,
        )

    def since(self, before: Snapshot, contender: float) -> dict[str, Any]:
        """CPU seconds per consumer since ``before``; ``contender`` is the measured
        child's own CPU (from wait4), or 0 when the contender runs in the harness."""
        now = self.snapshot()
        components = {k: now.components[k] - before.components.get(k, 0.0) for k in self.pids}
        cluster = sum(components.values())
        harness = now.harness - before.harness
        busy = now.busy - before.busy
        wall = now.at - before.at
        foreign = max(0.0, busy - cluster - harness - contender)
        return {
            "wall": wall,
            "machine_busy": busy,
            "cluster": cluster,
            "apiserver": components.get("kube-apiserver", 0.0),
            "etcd": components.get("etcd", 0.0),
            "components": components,
            "harness": harness,
            "contender": contender,
            "foreign": foreign,
            "foreign_cores": foreign / wall if wall else 0.0,
            "steal": now.steal - before.steal,
            "steal_cores": (now.steal - before.steal) / wall if wall else 0.0,
        }
