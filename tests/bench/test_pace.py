"""The pace bench: what each contender's rollout is run with, and how the
rollouts are summed up and judged (bench/ is not type-checked, and
`make bench-pace` is not part of `make test`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench import pace


def _rollout(wall: float, passes: int, cpu: float, server: float) -> dict[str, Any]:
    return {
        "wall": wall,
        "passes": passes,
        "cpu": cpu,
        "server_cpu": server,
        "refused": passes * 10,
        "requests": passes * 100,
    }


def test_the_code_before_is_run_without_the_budget_setting_it_does_not_know(monkeypatch):
    seen: list[tuple[str, dict[str, str]]] = []

    def converge(setup, code_dir, label, timeout, flags=(), env=None):
        seen.append((label, dict(env or {})))
        return {
            "pass_lines": [
                "pass a ok in 2s: Pod/evict/ok=3, Pod/evict/refused=12; 0 errors; 31 API requests",
                "pass b ok in 0.3s: no changes; 0 errors; 5 API requests",
            ]
        }

    monkeypatch.setattr(pace, "converge", converge)
    before = pace.rollout(None, Path("/before"), "before", "redis:bench-0-0")
    ours = pace.rollout(None, Path("/today"), "budget 0.25", "redis:bench-0-1")
    assert seen == [
        ("rollout-bench-0-0", {"RECONCILER_IMAGE": "redis:bench-0-0"}),
        (
            "rollout-bench-0-1",
            {"RECONCILER_IMAGE": "redis:bench-0-1", "RECONCILER_PACE_BUDGET": "0.25"},
        ),
    ]
    assert before["passes"] == ours["passes"] == 2
    assert (ours["refused"], ours["requests"]) == (12, 36)


def test_the_default_budget_is_judged_against_the_code_before_on_medians():
    results = {
        "before": [_rollout(100, 30, 10.0, 50.0), _rollout(90, 28, 12.0, 40.0)],
        "budget 0.5": [_rollout(80, 20, 9.0, 48.0), _rollout(85, 22, 13.0, 47.0)],
    }
    medians = pace.summary(results)
    assert medians["before"] == {
        "wall": 95,
        "passes": 29,
        "cpu": 11.0,
        "server_cpu": 45.0,
        "refused": 290,
        "requests": 2900,
    }
    verdict = pace.verdicts(medians)
    assert verdict["cpu"]["ratio"] == pytest.approx(11.0 / 11.0)
    assert verdict["cpu"]["ok"]
    assert verdict["server_cpu"]["ratio"] == pytest.approx(47.5 / 45.0)
    assert not verdict["server_cpu"]["ok"]
    text = pace.table(1000, results, verdict)
    assert "| before | 95.0 (100.0, 90.0) | 29 (30, 28) | 11.0 (10.0, 12.0) |" in text
    assert "| server_cpu per rollout | 1.06 | <= 1.00 | FAIL |" in text


def test_the_contenders_are_the_code_before_then_each_budget():
    assert pace.contenders([0.25, 0.5, 1.0]) == ["before", "budget 0.25", "budget 0.5", "budget 1"]


def test_each_rollout_starts_from_budgets_its_own_code_wrote_and_counted(monkeypatch):
    """The untimed pass runs with the pods' current image (none: the
    default), so it rolls nothing; then every budget must be counted."""
    seen: list[tuple[str, dict[str, str]]] = []

    def converge(setup, code_dir, label, timeout, flags=(), env=None):
        seen.append((label, dict(env or {})))
        return {"pass_lines": ["pass a ok in 1s: PodDisruptionBudget/patch/ok=2"], "wall": 1.0}

    listed = [
        [{"metadata": {"generation": 2}, "status": {"observedGeneration": 1}}],
        [{"metadata": {"generation": 2}, "status": {"observedGeneration": 2}}],
    ]
    calls = []

    class Api:
        def call(self, req):
            assert req.path == pace.BUDGETS_PATH
            calls.append(req)
            return {"items": listed[min(len(calls), len(listed)) - 1]}

    class Setup:
        api = Api()

    monkeypatch.setattr(pace, "converge", converge)
    monkeypatch.setattr(pace.time, "sleep", lambda _s: None)
    first = pace.own_budgets(Setup(), Path("/today"), "bench-0-0", None)
    later = pace.own_budgets(Setup(), Path("/today"), "bench-0-1", "redis:bench-0-0")
    assert seen == [
        ("bench-0-0-own-budgets", {}),
        ("bench-0-1-own-budgets", {"RECONCILER_IMAGE": "redis:bench-0-0"}),
    ]
    assert first["passes"] == later["passes"] == 1
    assert len(calls) == 3  # listed until counted, then once for the second
    assert not pace.counted({"metadata": {"generation": 1}, "status": {}})
