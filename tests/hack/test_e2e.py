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
    assert side.xdist == ("-n", "3", "--dist", "loadscope")
    assert "not serial" in side.marker and serial.marker == "e2e and serial"
