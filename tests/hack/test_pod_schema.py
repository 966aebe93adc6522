"""hack/pod_schema: the Pod's OpenAPI schema made structural for the Redis CRD."""

from __future__ import annotations

import re

import yaml

from hack import pod_schema

B, E, INDENT = pod_schema.BEGIN, pod_schema.END, pod_schema.INDENT

SCHEMAS = {
    "io.k8s.api.core.v1.Toleration": {
        "description": "dropped",
        "type": "object",
        "properties": {
            "operator": {"description": "x", "type": "string", "enum": ["Equal", "Exists"]},
            "tolerationSeconds": {"type": "integer", "format": "int64"},
        },
    },
    "io.k8s.apimachinery.pkg.api.resource.Quantity": {"type": "string"},
    "io.k8s.api.core.v1.ResourceRequirements": {
        "type": "object",
        "properties": {
            "limits": {
                "type": "object",
                "additionalProperties": {
                    "allOf": [{"$ref": f"#/c/s/{pod_schema.QUANTITY}"}],
                    "default": {},
                },
            }
        },
    },
}


def test_references_are_inlined_and_what_a_crd_may_not_hold_is_dropped():
    node = {
        "type": "array",
        "x-kubernetes-list-type": "atomic",
        "items": {"default": {}, "allOf": [{"$ref": "#/c/s/io.k8s.api.core.v1.Toleration"}]},
    }
    assert pod_schema.structural(node, SCHEMAS) == {
        "type": "array",
        "x-kubernetes-list-type": "atomic",
        "items": {
            "type": "object",
            "properties": {
                "operator": {"type": "string", "enum": ["Equal", "Exists"]},
                "tolerationSeconds": {"type": "integer", "format": "int64"},
            },
        },
    }


def test_a_quantity_is_an_int_or_a_string_of_its_grammar():
    node = {"$ref": "#/c/s/io.k8s.api.core.v1.ResourceRequirements"}
    limits = pod_schema.structural(node, SCHEMAS)["properties"]["limits"]
    quantity = limits["additionalProperties"]
    assert quantity["x-kubernetes-int-or-string"] is True
    assert quantity["anyOf"] == [{"type": "integer"}, {"type": "string"}]
    pattern = re.compile(quantity["pattern"])
    assert all(pattern.match(q) for q in ("100m", "1", "1.5Gi", "64Mi", "1e3", "+2k"))
    assert not any(pattern.match(q) for q in ("lots", "1 Gi", "1GB", ""))


def test_the_block_is_written_between_the_markers_only():
    crd = f"a:\n{INDENT}{B}\nold\n{INDENT}{E}\nz\n"
    assert pod_schema.rewritten(crd, "new\n") == f"a:\n{INDENT}{B}\nnew\n{INDENT}{E}\nz\n"


def test_both_crds_hold_the_same_fields_and_parse():
    texts = [path.read_text() for path in pod_schema.CRDS]
    assert texts[0].split(pod_schema.BEGIN)[1] == texts[1].split(pod_schema.BEGIN)[1]
    crd = yaml.safe_load(texts[0])
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert set(pod_schema.FIELDS) <= set(spec["properties"])
