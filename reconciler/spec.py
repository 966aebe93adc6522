"""Validation of a Redis spec, independent of the CRD schema.

Objects can bypass the schema (created before validation existed, or under a
CRD without it), so the planner re-checks every field it relies on and names
the offending field instead of producing a pod the apiserver would reject.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.constants import NUM_MAX, PORT_DEFAULT, PORT_MAX, PORT_MIN

# A conservative image reference: [registry[:port]/]path[:tag][@digest].
IMAGE_PATTERN = (
    r"^[a-z0-9]([a-z0-9._/-]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9._-]+)*"
    r"(:[A-Za-z0-9_][A-Za-z0-9._-]{0,127})?(@sha256:[a-f0-9]{64})?$"
)
_IMAGE_RE = re.compile(IMAGE_PATTERN)


@dataclass(frozen=True)
class RedisSpec:
    port: int
    num: int
    image: str


@dataclass(frozen=True)
class FieldError:
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def validate_redis_spec(
    spec: Mapping[str, Any], default_image: str
) -> tuple[RedisSpec | None, tuple[FieldError, ...]]:
    """Return the typed spec, or the errors naming each bad field."""
    errors: list[FieldError] = []

    port = spec.get("port", PORT_DEFAULT)
    if not _is_int(port):
        errors.append(FieldError("spec.port", f"must be an integer, got {port!r}"))
    elif not PORT_MIN <= port <= PORT_MAX:
        errors.append(
            FieldError("spec.port", f"must be between {PORT_MIN} and {PORT_MAX}, got {port}")
        )

    num = spec.get("num", 0)
    if not _is_int(num):
        errors.append(FieldError("spec.num", f"must be an integer, got {num!r}"))
    elif not 0 <= num <= NUM_MAX:
        errors.append(FieldError("spec.num", f"must be between 0 and {NUM_MAX}, got {num}"))

    image = spec.get("image") or default_image
    if not isinstance(image, str):
        errors.append(FieldError("spec.image", f"must be a string, got {image!r}"))
    elif not _IMAGE_RE.match(image):
        errors.append(FieldError("spec.image", f"is not a valid image reference: {image!r}"))

    if errors:
        return None, tuple(errors)
    return RedisSpec(port=port, num=num, image=image), ()
