"""What the CRD refuses at admission, the planner refuses too (an object
stored before a rule, or past the schema, still gets its field named), for
spec.storage.size and the exporter's image and resources: the CRD's patterns
and bounds are held equal to the planner's constants here; the apiserver's
own answers are in tests/e2e/test_server.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from reconciler.kinds.redis import quantity, server
from reconciler.kinds.redis.spec import IMAGE_MAX, IMAGE_PATTERN, validate_spec

ROOT = Path(__file__).resolve().parents[4]


def crd_fields() -> dict:
    crd = yaml.safe_load((ROOT / "crds/myapp.demo.kubebuilder.io_redis.yaml").read_text())
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "properties"
    ]


def errors(**fields) -> list[str]:
    return [str(e) for e in validate_spec({"num": 1, **fields}, "redis:7").errors]


def test_the_crd_holds_the_planners_quantity_pattern_and_bounds():
    fields = crd_fields()
    size = fields["storage"]["properties"]["size"]
    assert size["pattern"] == quantity.QUANTITY_PATTERN
    rules = [r["rule"] for r in size["x-kubernetes-validations"]]
    assert f"!quantity(string(self)).isGreaterThan(quantity('{quantity.SIZE_MAX}'))" in rules
    for key in ("requests", "limits"):
        found = fields["exporter"]["properties"]["resources"]["properties"][key]
        assert found["maxProperties"] == server.RESOURCES_MAX
        assert found["additionalProperties"]["pattern"] == quantity.RESOURCE_PATTERN
        assert found["additionalProperties"]["x-kubernetes-int-or-string"] is True


def test_the_crd_holds_the_exporter_image_to_spec_images_pattern():
    image = crd_fields()["exporter"]["properties"]["image"]
    assert (image["pattern"], image["maxLength"]) == (IMAGE_PATTERN, IMAGE_MAX)
    assert server.EXPORTER_IMAGE_MAX == IMAGE_MAX


@pytest.mark.parametrize(
    "size", [" 1Gi", "1Gi ", "1Gi\n", "1e1.5", "1e31", "2e30", "1 Gi", "0x10", "1GB", "-1Gi"]
)
def test_a_size_the_crd_refuses_is_refused(size):
    (found,) = errors(storage={"size": size})
    assert found.startswith("spec.storage.size: must be")


@pytest.mark.parametrize("size", ["1Gi", 1073741824, "1e30", "0.5", "+1Mi", "1000000000000Ei"])
def test_a_size_the_crd_takes_is_taken_or_said_too_big(size):
    found = errors(storage={"size": size})
    if quantity.to_bytes(str(size)) > 10**30:
        assert found == [f"spec.storage.size: must be at most 1e30 bytes, got {size!r}"]
    else:
        assert found == []


@pytest.mark.parametrize(
    "image",
    ["", "Redis_Exporter", "oliver006/redis_exporter:v1.62.0 --web.listen-address=:80", "a" * 256],
)
def test_an_exporter_image_the_crd_refuses_is_refused(image):
    (found,) = errors(exporter={"image": image})
    assert found.startswith("spec.exporter.image: must be an image reference, got ")
    assert len(image) > IMAGE_MAX or not re.fullmatch(IMAGE_PATTERN, image)


@pytest.mark.parametrize(
    "image", ["oliver006/redis_exporter:v1.62.0", "reg:5000/x/y:1@sha256:" + "a" * 64]
)
def test_an_exporter_image_of_spec_images_form_is_taken(image):
    assert errors(exporter={"image": image}) == []


@pytest.mark.parametrize(
    "resources",
    [
        {"limits": {"memory": "64 Mi"}},
        {"limits": {"memory": "-64Mi"}},
        {"requests": {"cpu": -1}},  # an integer: refused here only (see docs/pass.md)
        {"requests": {"cpu": "-0"}},
        {"requests": {"cpu": "1e1.5"}},
        {"requests": {"cpu": True}},
        {"requests": {f"r{i}": "1" for i in range(17)}},
    ],
)
def test_exporter_resources_the_crd_refuses_are_refused(resources):
    (found,) = errors(exporter={"resources": resources})
    assert found.startswith("spec.exporter.resources: must be requests and limits")


def test_exporter_resources_of_quantities_are_taken():
    resources = {"requests": {"cpu": "50m", "memory": 64 * 2**20}, "limits": {"memory": "64Mi"}}
    assert errors(exporter={"resources": resources}) == []
