"""spec.storage and the grace period, checked as the CRD checks them, and
sizes read as the apiserver reads quantities."""

from __future__ import annotations

import pytest

from reconciler.kinds.redis.pods import pod_fields_hash
from reconciler.kinds.redis.quantity import to_bytes
from reconciler.kinds.redis.spec import validate_spec
from reconciler.kinds.redis.storage import DELETE, RETAIN, Storage


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("1Gi", 1 << 30),
        ("1024Mi", 1 << 30),
        ("500M", 500_000_000),
        ("1e9", 1_000_000_000),
        ("1.5Gi", 3 << 29),
        (".5Ki", 512),
        ("1500m", 2),  # a fraction of a byte rounds up
        ("12", 12),
        ("1Gb", None),
        ("", None),
        ("1e31", None),
    ],
)
def test_quantities_in_bytes(text, size):
    assert to_bytes(text) == size


def errors(spec):
    return [str(e) for e in validate_spec({"num": 1, **spec}, "redis:5-alpine").errors]


@pytest.mark.parametrize(
    ("storage", "says"),
    [
        ({}, "spec.storage.size: is required within spec.storage"),
        ({"size": "0"}, "spec.storage.size: must be a quantity above zero such as 1Gi, got '0'"),
        (
            {"size": "lots"},
            "spec.storage.size: must be a quantity above zero such as 1Gi, got 'lots'",
        ),
        ({"size": True}, "spec.storage.size: must be a quantity such as 1Gi, got True"),
        (
            {"size": "1Gi", "storageClassName": ""},
            "spec.storage.storageClassName: must be a name, got ''",
        ),
        (
            {"size": "1Gi", "persistentVolumeClaimRetentionPolicy": {"whenScaled": "Keep"}},
            "spec.storage.persistentVolumeClaimRetentionPolicy.whenScaled: must be Retain or "
            "Delete, got 'Keep'",
        ),
        ("1Gi", "spec.storage: must be an object, got '1Gi'"),
    ],
)
def test_a_bad_storage_is_named_by_its_field(storage, says):
    assert errors({"storage": storage}) == [says]


def test_a_bad_grace_period_is_named():
    assert errors({"terminationGracePeriodSeconds": -1}) == [
        "spec.terminationGracePeriodSeconds: must be a whole number of seconds, got -1"
    ]


def test_a_good_storage_is_read_with_statefulsets_defaults():
    spec = validate_spec({"num": 1, "storage": {"size": "2Gi"}}, "redis:5-alpine").spec
    assert spec.storage == Storage("2Gi", 2 << 30, None, RETAIN, RETAIN)
    policy = {"whenDeleted": DELETE, "whenScaled": DELETE}
    found = {"size": 10, "storageClassName": "fast", "persistentVolumeClaimRetentionPolicy": policy}
    spec = validate_spec({"num": 1, "storage": found}, "redis:5-alpine").spec
    assert spec.storage == Storage("10", 10, "fast", DELETE, DELETE)


@pytest.mark.parametrize("size", ["1", 1, "1k"])
def test_the_smallest_sizes_above_zero_are_taken(size):
    assert validate_spec({"num": 1, "storage": {"size": size}}, "redis:5-alpine").errors == ()


@pytest.mark.parametrize(
    ("storage", "pinned"),
    [
        ({"size": "1Gi"}, "2d38cf4a80"),
        ({"size": "5Gi"}, "2d38cf4a80"),  # a claim grows in place: no new pod
        ({"size": "1Gi", "storageClassName": "fast"}, "5398153f61"),
    ],
)
def test_the_fields_hash_of_pods_with_storage_is_pinned(storage, pinned):
    """Pods with a claim carry this hash; a new value would roll every such
    pod on upgrade."""
    check = validate_spec({"num": 1, "port": 6379, "storage": storage}, "redis:5-alpine")
    assert check.spec is not None
    assert pod_fields_hash(check.spec) == pinned
