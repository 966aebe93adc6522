"""The three things measured per N, each in a fresh namespace of its own.

- the reconciler: cold convergence with back-to-back `reconciler sync`
  subprocesses, then one steady pass over the converged namespace;
- the write limit: the first pass's writes from a client with no logic;
- kopf: the peer operator, until the common end state.

Every contender is timed against the same end state, observed by watches
(bench.watch): all pods Ready, the finalizer on every Redis, status.replicas
written, every Xca active.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench import daemon, proc
from bench.cpu import CpuMeter
from bench.kubeapi import Api, populate
from bench.watch import Board, namespace_board, pods_settled
from bench.writes import fire, first_pass_requests
from reconciler.config import Config
from reconciler.kinds.redis.identity import FINALIZER

log = logging.getLogger(__name__)

PODS_PER_REDIS = 3
MAX_PASSES = 10
KOPF_FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"  # kopf's default finalizer


@dataclass(frozen=True)
class Setup:
    """What every contender needs to reach the cluster and where to put logs."""

    api: Api
    kubeconfig: Path
    log_dir: Path
    qps: int
    burst: int
    write_concurrency: int
    settle_timeout: float
    kopf_timeout: float
    meter: CpuMeter
    code_dir: Path  # frozen copy of reconciler/ and bench/; children run from it

    @classmethod
    def for_cluster(
        cls,
        cluster: Any,
        state_dir: Path,
        log_dir: Path,
        code_dir: Path,
        *,
        qps: int = 1000,
        burst: int = 1000,
        settle_timeout: float = 600.0,
        kopf_timeout: float = 0.0,
    ) -> Setup:
        """The Setup of a bench cluster, with the client limits every bench
        gives the contenders unless told otherwise. Creates the log directory."""
        log_dir.mkdir(parents=True, exist_ok=True)
        return cls(
            api=Api(cluster.server, cluster.token, cluster.ca_file),
            kubeconfig=Path(cluster.kubeconfig),
            log_dir=log_dir,
            qps=qps,
            burst=burst,
            write_concurrency=Config().write_concurrency,
            settle_timeout=settle_timeout,
            kopf_timeout=kopf_timeout,
            meter=CpuMeter(state_dir),
            code_dir=code_dir,
        )

    def reconciler_env(self) -> dict[str, str]:
        """The caller's environment minus any RECONCILER_* that would skew the run."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("RECONCILER_")}
        env.update(
            KUBECONFIG=str(self.kubeconfig),
            RECONCILER_QPS=str(self.qps),
            RECONCILER_BURST=str(self.burst),
            RECONCILER_WRITE_CONCURRENCY=str(self.write_concurrency),
        )
        return env


@dataclass
class PassRecord:
    """One `reconciler sync` subprocess: the child's own wall, CPU and peak RSS."""

    wall: float
    cpu: float
    max_rss_mb: float
    returncode: int
    summary: dict[str, Any]

    @property
    def planned(self) -> int:
        return int(self.summary.get("planned", -1))

    @property
    def requests(self) -> int:
        return int(self.summary.get("api_requests", 0))

    @property
    def writes(self) -> int:
        return int(self.summary.get("api_writes", 0))


def target_args(namespace: str, kubeconfig: Path) -> list[str]:
    """The namespace and cluster every reconciler command of the run points at."""
    return ["-n", namespace, "--kubeconfig", str(kubeconfig)]


def sync_argv(namespace: str, kubeconfig: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "reconciler",
        "sync",
        *target_args(namespace, kubeconfig),
        "-o",
        "json",
    ]


def reconciler_pass(setup: Setup, namespace: str, label: str) -> PassRecord:
    log_path = setup.log_dir / f"{namespace}.{label}.log"
    argv = sync_argv(namespace, setup.kubeconfig)
    res = proc.run(argv, setup.reconciler_env(), log_path, setup.code_dir)
    try:
        summary = json.loads(res.stdout)
    except ValueError:
        raise RuntimeError(
            f"sync -n {namespace} exited {res.returncode} without a summary:\n{res.stderr_tail}"
        ) from None
    if res.returncode not in (0, 1):
        raise RuntimeError(f"sync -n {namespace} exited {res.returncode}:\n{res.stderr_tail}")
    return PassRecord(res.wall, res.cpu, res.max_rss_mb, res.returncode, summary)


def _fresh(setup: Setup, role: str, n: int) -> str:
    namespace = f"bench-{n}-{role}-{os.urandom(3).hex()}"
    populate(setup.api, namespace, n)
    return namespace


# ---------------------------------------------------------------- reconciler


@dataclass
class ReconcilerResult:
    namespace: str
    cold_wall: float  # first pass start to the end of the pass that planned nothing
    end_state_wall: float | None  # first pass start to the common end state
    passes: list[PassRecord] = field(default_factory=list)
    steady: PassRecord | None = None
    steady_only_lists: bool = False
    first_pass_cpu: dict[str, Any] = field(default_factory=dict)  # CpuMeter window
    cold_cpu: dict[str, Any] = field(default_factory=dict)
    steady_cpu: dict[str, Any] = field(default_factory=dict)
    daemon: dict[str, Any] = field(default_factory=dict)  # steady passes of `reconciler run`

    @property
    def first(self) -> PassRecord:
        return self.passes[0]

    def to_json(self) -> dict[str, Any]:
        passes = self.passes
        return {
            "namespace": self.namespace,
            "cold": {
                "wall": self.cold_wall,
                "end_state_wall": self.end_state_wall,
                "passes": len(passes),
                "requests": sum(p.requests for p in passes),
                "writes": sum(p.writes for p in passes),
                "cpu": sum(p.cpu for p in passes),
                "pass_walls": [p.wall for p in passes],
                "wait_wall": self.cold_wall - sum(p.wall for p in passes),
            },
            "first_pass": _pass_json(self.first),
            "first_pass_machine_cpu": self.first_pass_cpu,
            "cold_machine_cpu": self.cold_cpu,
            "steady": _pass_json(self.steady) if self.steady else None,
            "steady_machine_cpu": self.steady_cpu,
            "steady_only_lists": self.steady_only_lists,
            "daemon_steady": self.daemon,
            "peak_rss_mb": max(
                [p.max_rss_mb for p in [*passes, *filter(None, [self.steady])]]
                + [self.daemon.get("max_rss_mb", 0.0)]
            ),
            "pass_summaries": [p.summary for p in passes],
        }


def _pass_json(rec: PassRecord) -> dict[str, Any]:
    out = asdict(rec)
    summary = out.pop("summary")
    out.update(
        requests=rec.requests,
        writes=rec.writes,
        planned=rec.planned,
        in_process_seconds=summary.get("duration_seconds"),
        bytes_received=summary.get("bytes_received"),
        by_code=summary.get("api_requests_by_code"),
        actions=summary.get("actions"),
        errors=len(summary.get("errors") or ()),
    )
    return out


def run_reconciler(setup: Setup, n: int) -> ReconcilerResult:
    """Passes back to back until one plans nothing, waiting for Ready pods between."""
    namespace = _fresh(setup, "reconciler", n)
    board = namespace_board(setup.api, namespace, n, FINALIZER)
    settled = pods_settled(n * PODS_PER_REDIS)
    passes: list[PassRecord] = []
    first_cpu: dict[str, Any] = {}
    before = setup.meter.snapshot()
    try:
        for index in range(MAX_PASSES):
            passes.append(reconciler_pass(setup, namespace, f"pass{index + 1}"))
            if index == 0:
                first_cpu = setup.meter.since(before, passes[0].cpu)
            if passes[-1].planned == 0:
                break
            if not board.wait(settled, setup.settle_timeout):
                log.warning("%s: pods not all Ready after %.0fs", namespace, setup.settle_timeout)
        cold_cpu = setup.meter.since(before, sum(p.cpu for p in passes))
    finally:
        board.stop()
    reached = board.reached_at - before.at if board.reached_at is not None else None
    result = ReconcilerResult(
        namespace, cold_cpu["wall"], reached, passes, first_pass_cpu=first_cpu, cold_cpu=cold_cpu
    )
    if passes[-1].planned != 0:
        raise RuntimeError(f"{namespace}: no convergence in {MAX_PASSES} passes")
    before = setup.meter.snapshot()
    result.steady = reconciler_pass(setup, namespace, "steady")
    result.steady_cpu = setup.meter.since(before, result.steady.cpu)
    codes = result.steady.summary.get("api_requests_by_code") or {}
    result.steady_only_lists = result.steady.writes == 0 and all(
        code.startswith("LIST ") for code in codes
    )
    before = setup.meter.snapshot()
    result.daemon = daemon.measure(
        target_args(namespace, setup.kubeconfig),
        setup.reconciler_env(),
        setup.log_dir / f"{namespace}.daemon.log",
        setup.code_dir,
    )
    result.daemon["machine_cpu"] = setup.meter.since(before, result.daemon["total_cpu"])
    return result


# ---------------------------------------------------------------- write limit


def run_write_limit(setup: Setup, n: int) -> dict[str, Any]:
    """The first pass's writes with no logic, then the wait for kwok to make pods Ready."""
    namespace = f"bench-{n}-writelimit-{os.urandom(3).hex()}"
    redis, xcas = populate(setup.api, namespace, n)
    groups = first_pass_requests(redis, xcas)
    board = namespace_board(setup.api, namespace, n, None, with_objects=False)
    try:
        before = setup.meter.snapshot()
        result = fire(setup.api, groups, setup.write_concurrency)
        writes_cpu = setup.meter.since(before, 0.0)
        ready = board.wait(pods_settled(n * PODS_PER_REDIS), setup.settle_timeout)
        ready_cpu = setup.meter.since(before, 0.0)
    finally:
        board.stop()
    return {
        "namespace": namespace,
        "wall": result.wall,
        "requests": result.requests,
        "failures": result.failures,
        "by_kind": result.by_kind,
        "ready_wall": ready_cpu["wall"] if ready else None,
        "client_cpu": writes_cpu["harness"],  # the no-logic client (and one pod watch)
        "writes_machine_cpu": writes_cpu,
        "ready_machine_cpu": ready_cpu,
    }


def _mean(values: list[float | None]) -> float | None:
    real = [v for v in values if v is not None]
    return sum(real) / len(real) if len(real) == len(values) and real else None


def bracket(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The write limit as the mean of runs taken before and after the others,
    which cancels a load that drifts steadily during the size's measurements."""
    out = {key: _mean([r[key] for r in runs]) for key in ("wall", "ready_wall", "client_cpu")}
    for window in ("writes_machine_cpu", "ready_machine_cpu"):
        out[window] = {
            key: _mean([r[window][key] for r in runs])
            for key in ("wall", "cluster", "apiserver", "etcd", "harness", "foreign_cores")
        }
        # Runs recorded before steal was counted apart have no steal_cores.
        out[window]["steal_cores"] = _mean([r[window].get("steal_cores") for r in runs])
    walls = [r["wall"] for r in runs]
    out.update(
        requests=runs[0]["requests"],
        by_kind=runs[0]["by_kind"],
        failures=sum(r["failures"] for r in runs),
        runs=walls,
        spread=(max(walls) - min(walls)) / out["wall"] if out["wall"] else None,
    )
    return out


# ---------------------------------------------------------------- kopf


def _await_end_state(board: Board, child: proc.Child, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not child.exited():
        if board.wait(lambda b: b.reached_at is not None, timeout=1.0):
            return


def run_kopf(setup: Setup, n: int) -> dict[str, Any]:
    """Start the kopf peer on a namespace of new objects; time it to the end state."""
    namespace = _fresh(setup, "kopf", n)
    board = namespace_board(setup.api, namespace, n, KOPF_FINALIZER)
    peer = setup.code_dir / "bench" / "kopf_peer.py"
    argv = [sys.executable, "-m", "kopf", "run", str(peer), "--standalone"]
    argv += ["--namespace", namespace]
    env = {**os.environ, "KUBECONFIG": str(setup.kubeconfig)}
    before = setup.meter.snapshot()
    child = proc.Child(argv, env, setup.log_dir / f"{namespace}.kopf.log", setup.code_dir)
    try:
        _await_end_state(board, child, setup.kopf_timeout)
    finally:
        child.stop()
        usage = child.wait()
        board.stop()
    window = setup.meter.since(before, usage.cpu)  # includes kopf's shutdown
    reached = board.reached_at - before.at if board.reached_at is not None else None
    return {
        "namespace": namespace,
        "finished": reached is not None,
        "wall": reached,
        "timeout": setup.kopf_timeout,
        "cpu": usage.cpu,
        "max_rss_mb": usage.max_rss_mb,
        "returncode": usage.returncode,
        "machine_cpu": window,
        "progress_at_stop": {
            name: {"good": t.good_count, "total": t.total} for name, t in board.trackers.items()
        },
    }
