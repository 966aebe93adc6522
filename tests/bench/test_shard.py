"""bench.shard's verdict arithmetic and its steady-window wait (bench/ is not
type-checked, and `make bench-shard` is not part of `make test`)."""

from __future__ import annotations

from typing import Any

import pytest

from bench import shard


def _run(
    gross: float, window: float, passes: list[float], interval: float = 20.0
) -> dict[str, Any]:
    return {
        "per_replica": [
            {"passes": p, "cpu": 1.0, "peak_rss_mb": 100.0, "wall": 1.0} for p in passes
        ],
        "window_seconds": window,
        "intervals": window / interval,
        "server_cpu_gross": gross,
        "server_cpu_gross_per_interval": gross / (window / interval),
        "passes_each": sum(passes) / len(passes),
    }


def test_per_round_takes_the_idle_load_off_and_divides_by_each_replicas_passes():
    # 40 s of CPU in 200 s, 0.05 cores idle (10 s), 12 passes: 2.5 s a pass.
    assert shard.net_per_round(_run(40.0, 200.0, [12.0]), 0.05) == pytest.approx(2.5)
    # Three replicas of 10, 11 and 12 passes: rounds are their mean, 11.
    assert shard.net_per_round(_run(43.0, 200.0, [10.0, 11.0, 12.0]), 0.05) == pytest.approx(3.0)


def test_the_verdict_compares_rounds_not_intervals():
    """One replica with early follow-up passes (12 in 10 intervals) looks
    dearer per interval than it is per pass: per interval three replicas
    would pass at 1.05x; per round of passes they cost 1.26x and fail."""
    one = _run(40.0, 200.0, [12.0])
    three = _run(42.0, 200.0, [10.0, 10.0, 10.0])
    doc = {"interval": 20.0, "one": one, "three": three, "takeover": {"seconds": 30.0}}
    for run in (one, three):
        run["server_cpu_per_round"] = shard.net_per_round(run, 0.0)
    verdict = shard.verdicts(doc)["server_cpu"]
    assert verdict["value"] == pytest.approx(4.2 / (40.0 / 12.0))
    assert verdict["verdict"] == "FAIL"


class _Replica:
    """Passes at the given monotonic times (a fake clock advances per read)."""

    def __init__(self, starts: list[float], clock: list[float]) -> None:
        self.starts, self.clock = starts, clock

    def read(self) -> Any:
        done = sum(1 for t in self.starts if t <= self.clock[0])
        return type("Reading", (), {"passes": float(done)})()


def test_steady_waits_until_passes_are_an_interval_apart(monkeypatch: pytest.MonkeyPatch):
    clock = [0.0]
    monkeypatch.setattr(shard.time, "monotonic", lambda: clock[0])

    def sleep(seconds: float) -> None:
        clock[0] += seconds

    monkeypatch.setattr(shard.time, "sleep", sleep)
    # Follow-ups 6 s and 16 s apart, then the interval.
    replica = _Replica([0.0, 6.0, 22.0, 42.0, 62.0], clock)
    shard._steady([replica], 20.0)  # type: ignore[list-item]
    assert 42.0 <= clock[0] < 43.0


def test_steady_gives_up_when_passes_never_slow_down(monkeypatch: pytest.MonkeyPatch):
    clock = [0.0]
    monkeypatch.setattr(shard.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(shard.time, "sleep", lambda s: clock.__setitem__(0, clock[0] + s))
    replica = _Replica([float(t) for t in range(0, 1000, 5)], clock)
    with pytest.raises(RuntimeError, match="not a whole interval apart"):
        shard._steady([replica], 20.0, timeout=100.0)  # type: ignore[list-item]


def test_client_cpu_sums_the_costliest_replica_of_each_round():
    """Round 1 alone would fail (0.47 / 1.13 = 0.42); both rounds: 0.38."""
    doc: dict[str, Any] = {"interval": 20.0, "takeover": {"seconds": 30.0}}
    for key, cpus in (
        ("one", [1.13]),
        ("three", [0.47, 0.45, 0.46]),
        ("one-2", [1.30]),
        ("three-2", [0.42, 0.45, 0.41]),
    ):
        run = _run(40.0, 200.0, [10.0] * len(cpus))
        for replica, cpu in zip(run["per_replica"], cpus, strict=True):
            replica["cpu"] = cpu
        run["server_cpu_per_round"] = 2.0
        doc[key] = run
    verdict = shard.verdicts(doc)["client_cpu"]
    assert verdict["value"] == pytest.approx((0.47 + 0.45) / (1.13 + 1.30))
    assert verdict["verdict"] == "PASS"
