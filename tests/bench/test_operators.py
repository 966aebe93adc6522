"""The operators bench judges the median of several end states, so one slow
or fast cluster start cannot decide a verdict (bench/ is not part of
`make test`; this keeps its arithmetic honest)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench import operators


def _result(walls: list[float | None], cpu: float = 1.0, rss: float = 40.0) -> dict[str, Any]:
    rounds = [{"wall": w, "cpu": cpu, "rss_mb": rss, "foreign_cores": 0.0} for w in walls]
    first = rounds[0]
    return first | {
        "rounds": rounds,
        "comeback": [],
        "comeback_median": None,
        "comeback_quiet_median": None,
        "interval": 30.0,
        "steady_pass": 0.1,
    }


def test_the_median_of_the_rounds_decides_not_the_first_round():
    row = {"n": 200, "run30": _result([9.0, 5.0, 5.0]), "crpeer": _result([5.0, 6.0, 5.8])}
    time = operators.verdicts(row)["time to the end state"]
    assert time["ratio"] == 5.0 / 5.8
    assert time["ok"] and time["rounds"] == 3


def test_a_round_that_never_reached_the_end_state_fails_the_verdict():
    row = {"n": 200, "run30": _result([5.0, None, 5.0]), "crpeer": _result([6.0, 6.0, 6.0])}
    assert operators.round_median(row["run30"], "wall") is None
    assert not operators.verdicts(row)["time to the end state"]["ok"]


def test_the_table_shows_the_median_and_each_round():
    row = {"n": 200, "run30": _result([9.0, 5.0, 5.5]), "crpeer": _result([5.0])}
    row["verdicts"] = operators.verdicts(row)
    text = operators.table([row])
    assert "| 200 | run30 | 5.50 (9.00, 5.00, 5.50) |" in text
    assert "| 200 | crpeer | 5.00 |" in text


def test_the_judged_pair_runs_again_in_alternating_order_without_comebacks(monkeypatch):
    calls: list[tuple[str, bool]] = []

    def contend(name: str, setup: Any, n: int, binary: Path, with_comebacks: bool = True):
        calls.append((name, with_comebacks))
        return _result([5.0])

    monkeypatch.setattr(operators, "_contend", contend)
    row = operators.measure_size(lambda: None, 200, Path("crpeer"), False, rounds=3)  # type: ignore[arg-type,return-value]
    assert calls == [
        ("crpeer", True),
        ("run30", True),
        ("run5", True),
        ("run30", False),
        ("crpeer", False),
        ("crpeer", False),
        ("run30", False),
    ]
    assert [len(row[name]["rounds"]) for name in ("run30", "crpeer", "run5")] == [3, 3, 1]
