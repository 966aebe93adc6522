"""A pod decoded from the dict the apiserver's JSON makes (a GET, a page of
JSON decoded in full, a page the typed structs refuse), read through
`pod_fields.SCHEMA` as the typed decoders read their messages, and made a
`Pod` by the same `pod_of`.

Every field is optional and every value may be of the wrong type (objects can
bypass the schema a typed decoder holds them to): each reads as protobuf's
default then, and a field marked ``present`` counts as sent only when it has
its type.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from reconciler.client.pod_fields import (
    BOOL,
    INT32,
    INT64,
    MAP,
    SCHEMA,
    STRING,
    TIME,
    Field,
    pod_of,
)
from reconciler.model import Pod


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _string(value: Any) -> str:
    if isinstance(value, str):
        return value
    return str(value) if value else ""


def _integer(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _strings(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, Mapping) else {}


_EMPTY: Mapping[str, Any] = {}


def _reader(field: Field) -> Callable[[Any], Any]:
    """How one value of ``field`` is read: protobuf's default for one absent
    or of the wrong type."""
    kind = field.kind
    if kind in (INT64, INT32):
        return lambda value: _integer(value) or 0
    if kind == BOOL:
        return lambda value: value is True
    if kind == MAP:
        return _strings
    if kind in (STRING, TIME):
        return _string
    return lambda value: _Message(value if isinstance(value, Mapping) else _EMPTY, kind)


def _repeated(field: Field) -> Callable[[Any], Any]:
    one = _reader(field)
    if field.kind in SCHEMA:
        return lambda value: [one(v) for v in _items(value) if isinstance(v, Mapping)]
    return lambda value: [one(v) for v in _items(value)]


def _items(value: Any) -> list[Any] | tuple[()]:
    return value if isinstance(value, list) else ()


def _sent(field: Field) -> Callable[[Any], bool]:
    """Whether a field marked ``present`` was sent, with its type."""
    if field.kind in (INT64, INT32):
        return lambda value: _integer(value) is not None
    if field.kind == TIME:
        return lambda value: value is not None
    return lambda value: isinstance(value, Mapping)


class _Read(NamedTuple):
    key: str  # its JSON name
    read: Callable[[Any], Any]
    sent: Callable[[Any], bool]


_FIELDS = {
    message: {
        f.name: _Read(_camel(f.name), _repeated(f) if f.many else _reader(f), _sent(f))
        for f in fields
    }
    for message, fields in SCHEMA.items()
}


class _Message:
    """A dict read as the message ``name`` of `SCHEMA`."""

    __slots__ = ("_fields", "_obj")

    def __init__(self, obj: Mapping[str, Any], name: str) -> None:
        self._obj = obj
        self._fields = _FIELDS[name]

    def __getattr__(self, name: str) -> Any:
        field = self._fields[name]
        return field.read(self._obj.get(field.key))

    def HasField(self, name: str) -> bool:
        field = self._fields[name]
        return field.sent(self._obj.get(field.key))


def pod_from_api(obj: Mapping[str, Any]) -> Pod:
    """Decode a pod; an absent or partial status is normal (a pod not yet
    scheduled has no conditions), so every field has a fallback."""
    return pod_of(_Message(obj, "Pod"))
