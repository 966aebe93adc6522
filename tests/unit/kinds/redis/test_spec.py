"""Validation of a Redis spec, independent of the CRD schema."""

import pytest

from reconciler.kinds.redis.spec import validate_spec


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


def test_messages_in_full():
    _, errors = validate_redis_spec({"port": "1", "num": True, "image": 3}, "redis")
    assert [str(e) for e in errors] == [
        "spec.port: must be an integer, got '1'",
        "spec.num: must be an integer, got True",
        "spec.image: must be a string, got 3",
    ]
    _, errors = validate_redis_spec({"port": 1, "num": 101, "image": "A"}, "redis")
    assert [str(e) for e in errors] == [
        "spec.port: must be between 6370 and 6380, got 1",
        "spec.num: must be between 0 and 100, got 101",
        "spec.image: is not a valid image reference: 'A'",
    ]


@pytest.mark.parametrize(("num", "ok"), [(-1, False), (0, True), (100, True), (101, False)])
def test_num_bounds(num, ok):
    spec, _ = validate_redis_spec({"num": num}, "redis")
    assert (spec is not None) == ok
