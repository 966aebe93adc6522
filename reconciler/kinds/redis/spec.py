"""The spec and its validation: every field the rules rely on is checked again
here, apart from the CRD schema (objects can bypass it), so that a bad
object gets a message naming its field rather than pods the apiserver
would refuse.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from reconciler.constants import LABEL_INSTANCE
from reconciler.kinds.redis import network, placement, server, storage
from reconciler.kinds.redis.identity import Redis
from reconciler.kinds.redis.placement import quoted

PORT_MIN = 6370


PORT_MAX = 6380


PORT_DEFAULT = 6379


NUM_MAX = 100


NAME_MAX = 63  # the name is each pod's app.kubernetes.io/instance label value


# A conservative image reference: [registry[:port]/]path[:tag][@digest]. The
# CRD's pattern (crds/, checked equal by the manifest tests), where the
# apiserver's RE2 matches it in linear time. Python's backtracking engine takes
# quadratic time on it (6 s for 16 KB), so `image_ok` below matches the same
# language in linear time; a property test holds the two equal.
IMAGE_PATTERN = (
    r"^[a-z0-9]([a-z0-9._/-]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9._-]+)*"
    r"(:[A-Za-z0-9_][A-Za-z0-9._-]{0,127})?(@sha256:[a-f0-9]{64})?$"
)


IMAGE_MAX = 255  # the CRD's maxLength, checked before any pattern


# The parts of IMAGE_PATTERN, each free of the ambiguity that backtracks.
_LEAD = re.compile(r"[a-z0-9](?:[a-z0-9._/-]*[a-z0-9])?")  # before a port
_PATHLIKE = re.compile(r"[a-z0-9][a-z0-9._/-]*")
_PORT_PATH = re.compile(r"[0-9]+(?:/[a-z0-9._-]+)*")
_SEGMENTS = re.compile(r"(?:/[a-z0-9._-]+)+")
_SPLIT = re.compile(r"[a-z0-9]/")
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")
_DIGEST = re.compile(r"sha256:[a-f0-9]{64}")


@dataclass(frozen=True)
class RedisSpec:
    port: int
    num: int
    image: str
    paused: bool = False  # spec.paused: its pods are left as they are
    placement: placement.Placement = placement.NONE
    storage: storage.Storage | None = None  # spec.storage: a claim per pod
    grace: int | None = None  # the pods' grace period, when not their default
    server: server.Server = server.NONE  # password, directives, restart, exporter
    access: network.Access | None = None  # spec.networkPolicy: who may connect


@dataclass(frozen=True)
class FieldError:
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass(frozen=True)
class SpecCheck:
    """The typed spec, or the errors naming each bad field (then ``spec`` is None)."""

    spec: RedisSpec | None
    errors: tuple[FieldError, ...]


def is_int(value: object) -> TypeGuard[int]:
    """A JSON integer: Python's bool is an int, JSON's true is not."""
    return isinstance(value, int) and not isinstance(value, bool)


def _port_error(port: Any) -> FieldError | None:
    if not is_int(port):
        return FieldError("spec.port", f"must be an integer, got {quoted(port)}")
    if not PORT_MIN <= port <= PORT_MAX:
        return FieldError("spec.port", f"must be between {PORT_MIN} and {PORT_MAX}, got {port}")
    return None


def num_error(num: Any) -> FieldError | None:
    if not is_int(num):
        return FieldError("spec.num", f"must be an integer, got {quoted(num)}")
    if not 0 <= num <= NUM_MAX:
        return FieldError("spec.num", f"must be between 0 and {NUM_MAX}, got {num}")
    return None


def _path(text: str) -> bool:
    """Matches ``[a-z0-9]([a-z0-9._/-]*[a-z0-9])?(/[a-z0-9._-]+)*``: where
    the first part ends is taken as the last letter or digit before a slash
    (a later end only shortens what must follow), so nothing backtracks."""
    if not _PATHLIKE.fullmatch(text):
        return False
    if _LEAD.fullmatch(text):
        return True
    ends = [m.end() - 1 for m in _SPLIT.finditer(text)]
    return bool(ends) and _SEGMENTS.fullmatch(text, ends[-1]) is not None


def image_ok(image: str) -> bool:
    """IMAGE_PATTERN, in linear time. Colons separate only a port and a tag,
    and ``@`` only the digest, so splitting on them leaves each part one
    unambiguous pattern."""
    name, at, digest = image.partition("@")
    if at and not _DIGEST.fullmatch(digest):
        return False
    parts = name.split(":")
    if len(parts) == 1:
        return _path(name)
    if len(parts) == 2:
        first, second = parts
        with_port = _LEAD.fullmatch(first) is not None and _PORT_PATH.fullmatch(second)
        return bool(with_port) or (_path(first) and _TAG.fullmatch(second) is not None)
    if len(parts) == 3:
        first, port, tag = parts
        return all((_LEAD.fullmatch(first), _PORT_PATH.fullmatch(port), _TAG.fullmatch(tag)))
    return False


def _image_error(image: Any) -> FieldError | None:
    if not isinstance(image, str):
        return FieldError("spec.image", f"must be a string, got {quoted(image)}")
    if len(image) > IMAGE_MAX:
        return FieldError("spec.image", f"must be at most {IMAGE_MAX} characters, got {len(image)}")
    if not image_ok(image):
        return FieldError("spec.image", f"is not a valid image reference: {quoted(image)}")
    return None


def _paused_error(paused: Any) -> FieldError | None:
    if isinstance(paused, bool):
        return None
    return FieldError("spec.paused", f"must be true or false, got {quoted(paused)}")


def _name_error(name: str) -> FieldError | None:
    if len(name) <= NAME_MAX:
        return None
    return FieldError(
        "metadata.name",
        f"must be at most {NAME_MAX} characters, got {len(name)}: it is the "
        f"{LABEL_INSTANCE} label value of each pod",
    )


def validate(redis: Redis, default_image: str) -> SpecCheck:
    """The spec's check, and the name's: the CRD refuses a name too long for a
    label value, but an object created before that rule can still exist."""
    check = validate_spec(redis.spec, default_image)
    name_error = _name_error(redis.name)
    if name_error is None:
        return check
    return SpecCheck(None, (name_error, *check.errors))


def validate_spec(spec: Mapping[str, Any], default_image: str) -> SpecCheck:
    """Re-check every field the rules rely on, independent of the CRD schema,
    so a bad object gets a message naming its field instead of pods the
    apiserver would reject."""
    port = spec.get("port", PORT_DEFAULT)
    num = spec.get("num", 0)
    image = spec.get("image") or default_image
    paused = spec.get("paused", False)
    found = (_port_error(port), num_error(num), _image_error(image), _paused_error(paused))
    errors = tuple(e for e in found if e is not None) + tuple(
        FieldError(path, message)
        for path, message in (
            *placement.field_errors(spec),
            *storage.field_errors(spec),
            *server.field_errors(spec, image_ok),
            *network.field_errors(spec),
        )
    )
    if errors:
        return SpecCheck(None, errors)
    fields = placement.placement_of(spec)
    data, grace = storage.storage_of(spec), storage.grace_of(spec)
    run, access = server.server_of(spec), network.access_of(spec)
    return SpecCheck(RedisSpec(port, num, image, paused, fields, data, grace, run, access), ())
