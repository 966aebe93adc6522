"""The Redis CRD's placement fields, written from the apiserver's own Pod schema.

`spec.resources`, `spec.nodeSelector`, `spec.tolerations`, `spec.affinity`
and `spec.priorityClassName` are passed to the pods as they are, so the CRD
checks them as the Pod's schema does: a bad toleration operator is refused
when the Redis is applied, not when its first pod is created. The OpenAPI v3
document of core/v1 is turned into a structural schema (references inlined,
defaults and descriptions of the inner fields dropped, quantities as
int-or-string) and written between the markers of each Redis CRD.

    kubectl get --raw /openapi/v3/api/v1 > v1.json
    python -m hack.pod_schema v1.json          # rewrite the CRDs
    python -m hack.pod_schema v1.json --check  # exit 1 if they differ
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
CRDS = (
    ROOT / "crds" / "myapp.demo.kubebuilder.io_redis.yaml",
    ROOT / "dist" / "chart" / "crds" / "myapp.demo.kubebuilder.io_redis.yaml",
)
BEGIN = "# begin: the Pod's own schema, written by hack/pod_schema.py; do not edit"
END = "# end: the Pod's own schema"
INDENT = " " * 16  # the depth of spec.properties in the CRD files

POD_SPEC = "io.k8s.api.core.v1.PodSpec"
CONTAINER = "io.k8s.api.core.v1.Container"
# spec field -> (schema it comes from, its property there, our description)
FIELDS = {
    "resources": (
        CONTAINER,
        "resources",
        "Requests and limits of the redis container, as in a Pod. A change rolls the pods.",
    ),
    "nodeSelector": (
        POD_SPEC,
        "nodeSelector",
        "Node labels each pod requires, as in a Pod. A change rolls the pods.",
    ),
    "tolerations": (
        POD_SPEC,
        "tolerations",
        "Taints each pod tolerates, as in a Pod. A change rolls the pods.",
    ),
    "affinity": (
        POD_SPEC,
        "affinity",
        "Scheduling constraints of each pod, as in a Pod. Unset, the pods of one Redis "
        "prefer different nodes (a preferred pod anti-affinity on kubernetes.io/hostname). "
        "A change rolls the pods.",
    ),
    "priorityClassName": (
        POD_SPEC,
        "priorityClassName",
        "The PriorityClass of each pod, as in a Pod. A change rolls the pods.",
    ),
}
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
# What a structural schema may say, of what the OpenAPI document says.
KEPT = (
    "type",
    "format",
    "enum",
    "required",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
)
# A quantity: a number, or a string of the grammar in the Quantity schema's
# description (a signed decimal, then a binary or decimal suffix or an exponent).
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
INT_OR_STRING = {
    "anyOf": [{"type": "integer"}, {"type": "string"}],
    "pattern": QUANTITY_PATTERN,
    "x-kubernetes-int-or-string": True,
}


def _ref_name(node: Mapping[str, Any]) -> str | None:
    """The schema a node stands for: a $ref, or an allOf of one $ref."""
    if "$ref" in node:
        return str(node["$ref"]).rsplit("/", 1)[-1]
    all_of = node.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and "$ref" in all_of[0]:
        return str(all_of[0]["$ref"]).rsplit("/", 1)[-1]
    return None


def structural(node: Mapping[str, Any], schemas: Mapping[str, Any]) -> dict[str, Any]:
    """The node as a CRD may hold it."""
    name = _ref_name(node)
    if name == QUANTITY:
        return copy.deepcopy(INT_OR_STRING)
    if name is not None:
        return structural(schemas[name], schemas)
    out: dict[str, Any] = {k: node[k] for k in KEPT if k in node}
    if "properties" in node:
        out["properties"] = {
            k: structural(v, schemas) for k, v in sorted(node["properties"].items())
        }
    if "items" in node:
        out["items"] = structural(node["items"], schemas)
    if isinstance(node.get("additionalProperties"), Mapping):
        out["additionalProperties"] = structural(node["additionalProperties"], schemas)
    return out


def fields(openapi: Mapping[str, Any]) -> dict[str, Any]:
    schemas = openapi["components"]["schemas"]
    out = {}
    for name, (source, prop, description) in FIELDS.items():
        schema = structural(schemas[source]["properties"][prop], schemas)
        out[name] = {"description": description, **schema}
    return out


class _Plain(yaml.SafeDumper):
    """Spells every node out: a CRD read by people has no YAML anchors."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def block(openapi: Mapping[str, Any]) -> str:
    """The lines between the markers, indented for spec.properties."""
    text = yaml.dump(fields(openapi), Dumper=_Plain, sort_keys=False, width=88)
    return "".join(INDENT + line + "\n" if line else "\n" for line in text.splitlines())


def rewritten(crd: str, generated: str) -> str:
    head, rest = crd.split(INDENT + BEGIN + "\n", 1)
    _, tail = rest.split(INDENT + END + "\n", 1)
    return f"{head}{INDENT}{BEGIN}\n{generated}{INDENT}{END}\n{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("openapi", type=Path, help="the apiserver's /openapi/v3/api/v1")
    parser.add_argument("--check", action="store_true", help="exit 1 if a CRD differs")
    args = parser.parse_args(argv)
    generated = block(json.loads(args.openapi.read_text()))
    stale = []
    for path in CRDS:
        text = path.read_text()
        new = rewritten(text, generated)
        if new == text:
            continue
        stale.append(path)
        if not args.check:
            path.write_text(new)
    for path in stale:
        verb = "differs from" if args.check else "rewritten from"
        print(f"{path.relative_to(ROOT)}: {verb} the Pod's schema", file=sys.stderr)
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
