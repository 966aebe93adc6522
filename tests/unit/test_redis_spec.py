"""Validation of a Redis spec, independent of the CRD schema."""

import pytest

from reconciler.kinds.redis import validate_spec


def validate_redis_spec(spec, default_image):
    check = validate_spec(spec, default_image)
    return check.spec, check.errors


@pytest.mark.parametrize(
    "image",
    [
        "redis:5-alpine",
        "redis",
        "docker.io/library/redis:7.2",
        "localhost:5000/team/redis:v1",
        "redis@sha256:" + "a" * 64,
    ],
)
def test_valid_images(image):
    spec, errors = validate_redis_spec({"image": image}, "redis:5-alpine")
    assert errors == () and spec.image == image


@pytest.mark.parametrize("image", ["Redis", "redis:", "a b", "-redis", "redis:tag with space"])
def test_invalid_images(image):
    spec, errors = validate_redis_spec({"image": image}, "redis:5-alpine")
    assert spec is None and errors[0].path == "spec.image"


def test_defaults():
    spec, _ = validate_redis_spec({}, "redis:5-alpine")
    assert (spec.port, spec.num, spec.image) == (6379, 0, "redis:5-alpine")


@pytest.mark.parametrize(
    ("value", "ok"), [(6369, False), (6370, True), (6380, True), (6381, False), (True, False)]
)
def test_port_bounds(value, ok):
    spec, errors = validate_redis_spec({"port": value}, "redis")
    assert (spec is not None) == ok
    if not ok:
        assert "spec.port" in str(errors[0])


def test_all_errors_reported_at_once():
    _, errors = validate_redis_spec({"port": 1, "num": -1, "image": 3}, "redis")
    assert [e.path for e in errors] == ["spec.port", "spec.num", "spec.image"]
