"""Where a Redis's pods run and what they may use: the fields a Redis passes
to its pods as they are (resources, node selector, tolerations, affinity,
priority class), and the preferred spread across nodes that it asks for
when it sets no affinity of its own.

These fields are never compared on a running pod: admission changes them
(LimitRanger fills in resources, the DefaultTolerationSeconds plugin adds
tolerations, a priority class sets ``priority``), and what admission made of
a create is what we asked for. A pod records instead the hash of the fields
it was made with (`redis.FIELDS_HASH_ANNOTATION`), and a pod whose hash
differs is stale, like one whose container differs.

Kept apart from `redis`, which imports it and hands it what it needs of the
rest of the kind (the labels that pick one Redis's pods).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

HOSTNAME_TOPOLOGY = "kubernetes.io/hostname"
SPREAD_WEIGHT = 100  # the preferred anti-affinity's weight, the most a term may have

# spec field -> (where it goes: the pod's spec or our container's, the JSON
# type it must have). One table for the check, the manifest and the hash.
POD = "pod"
CONTAINER = "container"


@dataclass(frozen=True)
class FieldRule:
    name: str
    goes_to: str
    kind: type


RULES = (
    FieldRule("resources", CONTAINER, dict),
    FieldRule("nodeSelector", POD, dict),
    FieldRule("tolerations", POD, list),
    FieldRule("affinity", POD, dict),
    FieldRule("priorityClassName", POD, str),
)
NAMES = tuple(r.name for r in RULES)
_TYPE_WORDS: dict[type, str] = {dict: "an object", list: "a list", str: "a string"}


@dataclass(frozen=True)
class Placement:
    """The fields as the spec sets them, as canonical JSON: hashable, so the
    spec that holds it can key a cache, and equal whenever the fields are."""

    fields: str = "{}"

    @property
    def values(self) -> dict[str, Any]:
        return _decoded(self.fields)

    @property
    def spreads(self) -> bool:
        """No affinity of its own: its pods prefer different nodes."""
        return "affinity" not in self.values


NONE = Placement()


@lru_cache(maxsize=256)
def _decoded(fields: str) -> dict[str, Any]:
    """Shared, never mutated: asked for by every manifest of a Redis."""
    decoded: dict[str, Any] = json.loads(fields)
    return decoded


def quoted(value: Any, most: int = 80) -> str:
    """A value for a message, cut short: the status, its events and the log
    carry it, and an object without our schema can hold megabytes."""
    text = repr(value)
    return text if len(text) <= most else f"{text[:most]}... ({len(text)} characters)"


def field_errors(spec: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(``spec.<field>``, what is wrong) for each field of the wrong JSON type.

    The CRD checks each field as the Pod's schema does; this catches objects
    stored before that schema (or past it), whose pods the apiserver would
    refuse with a message naming the pod rather than the Redis's field."""
    errors = []
    for rule in RULES:
        value = spec.get(rule.name)
        if value is not None and not isinstance(value, rule.kind):
            errors.append(
                (f"spec.{rule.name}", f"must be {_TYPE_WORDS[rule.kind]}, got {quoted(value)}")
            )
    node_selector = spec.get("nodeSelector")
    if isinstance(node_selector, dict) and not all(
        isinstance(v, str) for v in node_selector.values()
    ):
        errors.append(("spec.nodeSelector", "every value must be a string"))
    return errors


def placement_of(spec: Mapping[str, Any]) -> Placement:
    """The fields the spec sets (an empty one counts as unset)."""
    chosen = {name: spec[name] for name in NAMES if spec.get(name) not in (None, "", {}, [])}
    if not chosen:
        return NONE
    return Placement(json.dumps(chosen, sort_keys=True, separators=(",", ":")))


def spread(pod_labels: Mapping[str, str]) -> dict[str, Any]:
    """The default: each pod of one Redis prefers a node without another.
    Preferred, not required, so that a Redis of more pods than nodes still
    runs."""
    term = {
        "topologyKey": HOSTNAME_TOPOLOGY,
        "labelSelector": {"matchLabels": dict(pod_labels)},
    }
    preferred = [{"weight": SPREAD_WEIGHT, "podAffinityTerm": term}]
    return {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}}


def pod_fields(placement: Placement, pod_labels: Mapping[str, str]) -> dict[str, Any]:
    """What goes into the pod's spec, the default spread included (over the
    pods that carry ``pod_labels``)."""
    values = placement.values
    out = {r.name: values[r.name] for r in RULES if r.goes_to == POD and r.name in values}
    if placement.spreads:
        out["affinity"] = spread(pod_labels)
    return out


def container_fields(placement: Placement) -> dict[str, Any]:
    values = placement.values
    return {r.name: values[r.name] for r in RULES if r.goes_to == CONTAINER and r.name in values}


@lru_cache(maxsize=256)
def fields_hash(placement: Placement) -> str:
    """The hash a pod made with these fields records. The default spread, and
    the hostname and subdomain that give each pod a stable name, are named
    rather than spelt out: they differ per Redis only by its name, which
    never changes."""
    doc = {"fields": placement.values, "spread": placement.spreads, "stable_names": True}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:10]
