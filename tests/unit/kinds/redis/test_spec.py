"""Validation of a Redis spec, independent of the CRD schema."""

import re
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.kinds.redis.spec import IMAGE_MAX, IMAGE_PATTERN, image_ok, validate_spec


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


# --- the image pattern: the CRD's language, in linear time ---------------------------


_CRD_RE = re.compile(IMAGE_PATTERN)
_PIECES = ["a", "z", "0", "9", "B", "_", ".", "-", "/", ":", "5000", "@", "@sha256:" + "a" * 64]


@settings(max_examples=3000)
@given(st.lists(st.sampled_from(_PIECES), max_size=14).map("".join))
def test_the_linear_check_accepts_exactly_what_the_crds_pattern_accepts(image):
    assert image_ok(image) == bool(_CRD_RE.match(image))


@pytest.mark.parametrize(
    "image", ["a/-", "a/b-", "a/-/b-", "a//b", "a//b:5000/c:v1", "a/b:5000/c", "a:v:1", "a-/b-"]
)
def test_the_linear_check_agrees_on_the_hard_cases(image):
    assert image_ok(image) == bool(_CRD_RE.match(image))


def test_an_image_past_the_crds_length_is_refused_by_its_length_before_any_pattern():
    _, errors = validate_redis_spec({"image": "a/" * 500_000 + "!"}, "redis")
    assert str(errors[0]) == f"spec.image: must be at most {IMAGE_MAX} characters, got 1000001"


def test_the_pattern_takes_no_quadratic_time_on_a_long_image():
    # The CRD's pattern, run by Python's backtracking engine, took 2 s for
    # 8,000 characters of this, and four times as long for each doubling: the
    # strings below would take a minute each. No clock is read here: a
    # quadratic check shows as a slow unit suite, not as a failure.
    assert not image_ok("a/" * 20_000 + "/")
    assert image_ok("a/" * 20_000 + "b:v1")


def test_the_crd_holds_the_same_pattern_and_length():
    crd = yaml.safe_load(
        (Path(__file__).parents[4] / "crds/myapp.demo.kubebuilder.io_redis.yaml").read_text()
    )
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    image = spec["properties"]["image"]
    assert (image["pattern"], image["maxLength"]) == (IMAGE_PATTERN, IMAGE_MAX)


def test_a_value_quoted_in_a_message_is_cut_short():
    _, errors = validate_redis_spec({"port": "9" * 10_000}, "redis")
    assert len(str(errors[0])) < 200 and "(10002 characters)" in str(errors[0])
