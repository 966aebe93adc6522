"""hack/e2e.py: the two steps `make test` runs, their exit code, the slowest tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from hack import e2e

REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="tests.e2e.test_redis" name="test_a" time="12.5"/>
<testcase classname="tests.e2e.test_redis" name="test_b" time="3.25"/>
<testcase classname="tests.e2e.test_pass" name="test_c[x]" time="40.0"><failure/></testcase>
</testsuite></testsuites>
"""


def test_slowest_merges_the_reports_of_both_steps(tmp_path: Path) -> None:
    side, serial = tmp_path / "side.xml", tmp_path / "serial.xml"
    side.write_text(REPORT)
    serial.write_text(REPORT.replace("test_a", "test_d").replace("12.5", "20"))
    found = e2e.slowest([side, serial, tmp_path / "never-written.xml"], count=3)
    assert found == [
        e2e.Timing("tests.e2e.test_pass::test_c[x]", 40.0),
        e2e.Timing("tests.e2e.test_pass::test_c[x]", 40.0),
        e2e.Timing("tests.e2e.test_redis::test_d", 20.0),
    ]


@pytest.mark.parametrize(
    ("codes", "want"),
    [
        ([0, 0], 0),
        ([0, 5], 0),  # a selection with no serial test
        ([5, 0], 0),
        ([5, 5], 5),  # nothing selected at all
        ([1, 0], 1),
        ([0, 2], 2),
        ([5, 1], 1),
    ],
)
def test_a_failure_in_either_step_fails_the_run(codes: list[int], want: int) -> None:
    assert e2e.outcome(codes) == want


def test_one_worker_runs_the_first_step_without_xdist() -> None:
    side, serial = e2e.steps(1)
    assert side.xdist == () and serial.xdist == ()
    side, serial = e2e.steps(3)
    assert side.xdist == ("-n", "3", "--dist", "loadscope", "--no-loadscope-reorder")
    assert "not serial" in side.marker and serial.marker == "e2e and serial"


def test_module_seconds_sums_each_module_s_tests(tmp_path: Path) -> None:
    report = tmp_path / "side.xml"
    report.write_text(REPORT)
    assert e2e.module_seconds([report]) == {
        "tests/e2e/test_redis.py": 15.75,
        "tests/e2e/test_pass.py": 40.0,
    }


def test_workers_take_unknown_modules_then_the_longest_first() -> None:
    known = {"tests/e2e/test_a.py": 10.0, "tests/e2e/test_b.py": 300.0, "tests/e2e/test_c.py": 5.0}
    modules = [
        "tests/e2e/test_a.py",
        "tests/e2e/test_b.py",
        "tests/e2e/test_c.py",
        "tests/e2e/test_new.py",
    ]
    assert e2e.longest_first(modules, known) == [
        "tests/e2e/test_new.py",
        "tests/e2e/test_b.py",
        "tests/e2e/test_a.py",
        "tests/e2e/test_c.py",
    ]


def test_the_last_run_s_times_order_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(e2e, "DURATIONS", tmp_path / "cache" / "durations.json")
    assert e2e.remembered() == {}
    report = tmp_path / "side.xml"
    report.write_text(REPORT)
    e2e.remember([report])
    assert e2e.remembered()["tests/e2e/test_pass.py"] == 40.0
    order = e2e.targets([])  # every other module is unknown to this cache, so goes first
    assert order[-2:] == ["tests/e2e/test_pass.py", "tests/e2e/test_redis.py"]
    assert e2e.targets(["tests/e2e/test_x.py", "-x"]) == ["tests/e2e/test_x.py", "-x"]
