"""The cluster checks' pure parts: versions, spans, the tested version."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.checks import cluster

ROOT = Path(__file__).resolve().parents[3]


def test_the_tested_version_is_the_one_the_suite_builds():
    env = dict(
        line.split("=", 1)
        for line in (ROOT / "hack" / "cluster" / "versions.env").read_text().splitlines()
        if "=" in line and not line.startswith("#")
    )
    assert env["K8S_VERSION"] == cluster.TESTED
    assert int(cluster.TESTED.split(".")[1]) >= cluster.MIN_MINOR


@pytest.mark.parametrize(
    ("minor", "expected"), [("34", 34), ("29+", 29), ("", None), ("x", None), (None, None)]
)
def test_a_minor_as_managed_clusters_say_it(minor: object, expected: int | None):
    assert cluster._minor({"minor": minor}) == expected


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(59, "0m"), (60, "1m"), (7199, "119m"), (7200, "2h"), (47 * 3600, "47h"), (48 * 3600, "2d")],
)
def test_a_span_in_the_unit_a_person_reads(seconds: float, shown: str):
    assert cluster._span(seconds) == shown
