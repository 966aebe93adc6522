"""The cluster checks' pure parts: versions, spans, the tested version."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.checks import cluster
from reconciler.client.errors import ApiError
from reconciler.client.presented import Presented

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


class _Shows:
    """A client that shows one credential, as `Kube.presented` does."""

    def __init__(self, shown: Presented) -> None:
        self.shown = shown

    def presented(self) -> Presented:
        return self.shown


DAY = 86400.0


@pytest.mark.parametrize(
    ("kind", "left", "mark"),
    [
        ("bearer token", 29 * DAY, "✓"),
        ("bearer token", 6 * DAY, "!"),  # the step-5 token, a day before a week is left
        ("client certificate /etc/x.crt", 2 * DAY, "!"),
        ("bearer token", -60.0, "✗"),
        ("exec plugin aws (token)", 600.0, "✓"),  # renewed by running the plugin again
        ("token file /var/run/secrets/token", 3600.0, "✓"),  # the kubelet renews it
    ],
)
def test_a_credential_nobody_renews_is_warned_of_a_week_before_it_expires(
    kind: str, left: float, mark: str
):
    now = 1_800_000_000.0
    check = cluster.credential(_Shows(Presented(kind, now + left)), now)  # type: ignore[arg-type]
    shown = "!" if check.warning else "✓" if check.ok else "✗"
    assert shown == mark, check
    if mark != "✓":
        assert check.fix


class _Refuses:
    """A client that may not read CRDs."""

    def get(self, *_: object) -> dict[str, object]:
        raise ApiError(403, "Forbidden", "customresourcedefinitions is forbidden")


def test_a_crd_that_cannot_be_read_has_the_grant_as_its_fix():
    checks = cluster.crds(_Refuses(), "the grant")  # type: ignore[arg-type]
    assert checks and all(not c.ok and c.fix == "the grant" for c in checks)
    assert "cannot be read" in checks[0].detail
