"""Whose CRDs are installed: `check` fails on an older release's (it prunes
this release's fields) and warns of a newer one's; `plan` and the daemon say
the same in one line, with the same step."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler import __version__
from reconciler.checks import cluster
from reconciler.checks.grants import AS_ADMIN
from reconciler.engine.crd_release import APPLY_CRDS, lagging, newer, release_of
from tests.unit.fakes import FakeKube

REDIS = "redis.myapp.demo.kubebuilder.io"
XCA = "xcas.apps.xca.k8s.kb.cx"


def crd(release: str | None) -> dict[str, Any]:
    labels = {} if release is None else {"app.kubernetes.io/version": release}
    return {"metadata": {"name": REDIS, "labels": labels}}


def later(release: str) -> str:
    major, minor, patch = map(int, release.split("."))
    return f"{major}.{minor + 1}.{patch}"


def test_this_releases_crd_passes():
    check = cluster.crd_of_release(REDIS, __version__)
    assert (check.ok, check.warning, check.fix) == (True, False, "")
    assert check.detail == f"{REDIS} of release {__version__}"


@pytest.mark.parametrize(
    ("release", "shipped"), [("0.1.0", "release 0.1.0's"), (None, "unlabelled")]
)
def test_an_older_or_unlabelled_crd_fails_with_the_step_that_applies_this_releases(
    release: str | None, shipped: str
):
    check = cluster.crd_of_release(REDIS, release)
    assert not check.ok and not check.fatal
    assert check.detail == (
        f"{REDIS} is {shipped}; this is {__version__}: the fields it does not know are pruned"
    )
    # check's fix line and plan's words name the one command, from any directory.
    assert check.fix == cluster.CRD_FIX == f"{APPLY_CRDS}{AS_ADMIN}"


def test_a_newer_crd_warns_and_names_the_binary_to_run():
    ahead = later(__version__)
    check = cluster.crd_of_release(REDIS, ahead)
    assert check.ok and check.warning
    assert check.detail == f"{REDIS} is release {ahead}'s, newer than this {__version__}"
    assert check.fix == f"run reconciler {ahead}, which knows the fields this one ignores"


@pytest.mark.parametrize(
    ("release", "is_newer"),
    [
        ("0.0.9", False),
        ("0.1.0", False),
        (__version__, False),
        (later(__version__), True),
        ("10.0.0", True),
        ("0.10.0", True),  # numbers, not text: 0.10 is after 0.2
        ("v9.0.0", False),  # unreadable: taken as older, so the CRDs are what to apply
        ("", False),
        (None, False),
    ],
)
def test_newer_compares_release_numbers(release: str | None, is_newer: bool):
    assert newer(release) is is_newer


@pytest.mark.parametrize(
    ("obj", "release"),
    [
        (crd("0.1.0"), "0.1.0"),
        (crd(None), None),
        ({"metadata": {}}, None),
        ({}, None),
        ({"metadata": {"labels": None}}, None),
        ({"metadata": "x"}, None),
    ],
)
def test_release_of_reads_the_label_whatever_the_shape(obj: dict[str, Any], release: str | None):
    assert release_of(obj) == release


def test_plan_and_the_daemon_name_older_and_newer_crds_each_with_its_step():
    kube = FakeKube()
    ahead = later(__version__)
    kube.objects[("CustomResourceDefinition", "", REDIS)] = crd("0.1.0")
    kube.objects[("CustomResourceDefinition", "", XCA)] = {
        "metadata": {"labels": {"app.kubernetes.io/version": ahead}}
    }
    assert lagging(kube) == [
        f"the installed CRD {REDIS} is release 0.1.0's; this is {__version__}: "
        f"apply the CRDs of this release ({APPLY_CRDS})",
        f"the installed CRD {XCA} is release {ahead}'s, newer than this {__version__}: "
        f"run reconciler {ahead}, which knows the fields this one ignores",
    ]
    kube.objects[("CustomResourceDefinition", "", REDIS)] = crd(__version__)
    kube.objects[("CustomResourceDefinition", "", XCA)] = crd(__version__)
    assert lagging(kube) == []
