"""Pods as Kubernetes protobuf: the few fields a pass reads, and nothing else.

Core kinds can be served as protobuf (CRDs cannot). For a LIST of pods that
halves the apiserver's encoding work and the bytes on the wire against JSON
(docs/performance.md), which at tens of thousands of pods is most of what a
steady pass costs the server.

The schema below is ours and small: protobuf decodes by field number, so
messages that declare only the fields the planner reads, numbered as in
k8s.io/api's and k8s.io/apimachinery's ``generated.proto``, decode the
apiserver's messages and skip every other field in C. No generated code and
no protoc: the descriptors are built from the table at import.

A body is protobuf only if it starts with the Kubernetes envelope's magic;
anything else (an apiserver or proxy that answered JSON) goes to the JSON
decoder, so asking for protobuf never changes what a pass sees.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import msgspec
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

from reconciler.client.errors import NotAList
from reconciler.client.json_wire import pod_page, version_page_json
from reconciler.client.pod_fields import (
    BOOL,
    BYTES,
    INT32,
    INT64,
    MAP,
    STRING,
    TIME,
    Field,
    pod_of,
)
from reconciler.client.pod_fields import SCHEMA as POD_SCHEMA
from reconciler.model import LABEL_BUCKET, Known, Page, Pod, T, Version, version_key

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
# JSON stays acceptable: the server picks protobuf when it can serve it.
ACCEPT = f"{MEDIA_TYPE}, application/json"
# The metadata of each object only, for any kind (CRDs too), as protobuf.
METADATA_LIST = "PartialObjectMetadataList"
_AS_META = f"as={METADATA_LIST};g=meta.k8s.io;v=v1"
META_ACCEPT_JSON = f"application/json;{_AS_META}, application/json"
META_ACCEPT = f"{MEDIA_TYPE};{_AS_META}, {META_ACCEPT_JSON}"
MAGIC = b"k8s\x00"  # the envelope's prefix, before a runtime.Unknown message
# What decoding an answer that is not the list asked for raises, as protobuf or JSON.
UNREADABLE: tuple[type[Exception], ...] = (DecodeError, msgspec.DecodeError, NotAList)

_F = descriptor_pb2.FieldDescriptorProto

# ObjectMeta's fields that name an object and its version.
_IDENTITY = [
    Field("name", 1, STRING),
    Field("namespace", 3, STRING),
    Field("uid", 5, STRING),
    Field("resource_version", 6, STRING),
]

# message -> its fields (name, number as in generated.proto, scalar type or
# message name or MAP, repeated or not). Names are ours; only the numbers are
# the wire. A pod's messages are `pod_fields.SCHEMA`, shared with json_wire.
_SCHEMA: dict[str, list[Field]] = {
    "Unknown": [Field("raw", 2, BYTES)],  # runtime.Unknown
    "TypeMeta": [Field("kind", 2, STRING)],  # runtime.Unknown's field 1
    "Status": [Field("message", 3, STRING), Field("reason", 4, STRING), Field("code", 6, INT32)],
    "ListMeta": [Field("continue_token", 3, STRING)],
    TIME: [Field("seconds", 1, INT64)],
    **POD_SCHEMA,
    "PodList": [Field("metadata", 1, "ListMeta"), Field("items", 2, "Pod", many=True)],
    # What a LIST of metadata is read for: every other field (labels,
    # managedFields...) is skipped unparsed.
    "Identity": _IDENTITY,
    "PartialObjectMetadata": [Field("metadata", 1, "Identity")],
    "PartialObjectMetadataList": [
        Field("metadata", 1, "ListMeta"),
        Field("items", 2, "PartialObjectMetadata", many=True),
    ],
    # The same, with what tells a sharded replica whose an object is: its
    # labels and owners (model.Version). Parsing the labels more than
    # doubles the cost, so only a sharded replica asks for it.
    "OwnedIdentity": [
        *_IDENTITY,
        Field("labels", 11, MAP),
        Field("owner_references", 13, "Owner", many=True),
    ],
    "Owner": [Field("uid", 4, STRING), Field("controller", 6, BOOL)],
    "OwnedMetadata": [Field("metadata", 1, "OwnedIdentity")],
    "OwnedMetadataList": [
        Field("metadata", 1, "ListMeta"),
        Field("items", 2, "OwnedMetadata", many=True),
    ],
}
_PACKAGE = "reconciler.client.protowire"


def _field(
    message: descriptor_pb2.DescriptorProto, name: str, number: int, kind: Any, many: bool
) -> None:
    field = message.field.add(name=name, number=number)
    field.label = _F.LABEL_REPEATED if many or kind == MAP else _F.LABEL_OPTIONAL
    if kind == MAP:
        entry = message.nested_type.add(name=f"{name.title().replace('_', '')}Entry")
        entry.options.map_entry = True
        entry.field.add(name="key", number=1, type=STRING, label=_F.LABEL_OPTIONAL)
        entry.field.add(name="value", number=2, type=STRING, label=_F.LABEL_OPTIONAL)
        field.type = _F.TYPE_MESSAGE
        field.type_name = f".{_PACKAGE}.{message.name}.{entry.name}"
    elif isinstance(kind, str):
        field.type = _F.TYPE_MESSAGE
        field.type_name = f".{_PACKAGE}.{kind}"
    else:
        field.type = kind


def _messages() -> dict[str, Any]:
    """Build the schema's message classes in a pool of their own."""
    proto = descriptor_pb2.FileDescriptorProto(
        name="reconciler/protowire.proto", package=_PACKAGE, syntax="proto2"
    )
    for name, fields in _SCHEMA.items():
        message = proto.message_type.add(name=name)
        for f in fields:
            _field(message, f.name, f.number, f.kind, f.many)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{name}"))
        for name in _SCHEMA
    }


MESSAGES = _messages()


class _Varint(NamedTuple):
    value: int
    end: int  # the offset just past it


def _varint_or_none(buf: memoryview | bytearray, at: int) -> _Varint | None:
    """The number at ``at``, or None if ``buf`` ends before it does."""
    value = shift = 0
    while at < len(buf):
        if shift >= 64:
            raise DecodeError("a number longer than ten bytes")
        byte = buf[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return _Varint(value, at)
        shift += 7
    return None


class _Field(NamedTuple):
    number: int
    wire: int
    start: int  # where its value starts (after its key and length)
    end: int  # the offset just past it


def field_at(buf: memoryview | bytearray, at: int) -> _Field | None:
    """The field whose key is at ``at``, or None if ``buf`` ends before it does."""
    if (key := _varint_or_none(buf, at)) is None:
        return None
    number, wire = key.value >> 3, key.value & 7
    if wire == 0:
        value = _varint_or_none(buf, key.end)
        end = None if value is None else value.end
    elif wire in _FIXED:
        end = key.end + _FIXED[wire]
    elif wire == 2:
        if (size := _varint_or_none(buf, key.end)) is None:
            return None
        return _Field(number, wire, size.end, size.end + size.value)
    else:
        raise DecodeError(f"wire type {wire}: not a field we read")
    return None if end is None else _Field(number, wire, key.end, end)


RAW_FIELD = 2  # runtime.Unknown's field that holds the object
TYPE_FIELD = 1  # runtime.Unknown's field that names the object's kind


def kind_of(type_meta: memoryview | bytes | bytearray) -> str:
    """The kind named by a runtime.Unknown's TypeMeta field."""
    return str(MESSAGES["TypeMeta"].FromString(type_meta).kind)


_FIXED = {1: 8, 5: 4}  # wire type -> width


class _Unwrapped(NamedTuple):
    wire: memoryview  # the object
    kind: str  # as the envelope names it ("" if it does not)


def _unwrap(body: bytes | bytearray) -> memoryview:
    return _envelope(body).wire


def _envelope(body: bytes | bytearray) -> _Unwrapped:
    """The object inside the envelope (MAGIC + runtime.Unknown), as a view of
    ``body``, and its kind. Read by hand rather than parsed: parsing the
    envelope copied the object twice more (the protobuf runtime still copies
    it once when it parses the object), and a page of thousands of objects is
    megabytes. Groups and repeated ``raw`` fields, which no apiserver sends,
    are not read as the runtime would: a group is an error, and the first
    ``raw`` wins."""
    buf = memoryview(body)[len(MAGIC) :]
    at, kind = 0, ""
    while at < len(buf):
        field = field_at(buf, at)
        if field is None or field.end > len(buf):
            raise DecodeError("a field of the envelope runs past its end")
        if field.number == TYPE_FIELD and field.wire == 2:
            kind = kind_of(buf[field.start : field.end])
        if field.number == RAW_FIELD and field.wire == 2:
            return _Unwrapped(buf[field.start : field.end], kind)
        at = field.end
    return _Unwrapped(buf[len(buf) :], kind)  # no object: an empty message


def pod_page_any(body: bytes) -> Page[Pod]:
    """A page of pods as protobuf or JSON, decoded to what pod_from_api makes of it."""
    return pod_page_reusing({})(body)


def pod_page_reusing(known: Known[Pod]) -> Callable[[bytes | bytearray], Page[Pod]]:
    """pod_page_any, except that a pod in ``known`` at the same uid and
    resourceVersion is taken from there: its fields are not read at all."""

    def decode(body: bytes | bytearray) -> Page[Pod]:
        if not body.startswith(MAGIC):
            return pod_page(body)
        wire, kind = _envelope(body)
        return _named(pods_in(wire, known), kind)

    return decode


def pods_in(wire: memoryview | bytes, known: Known[Pod]) -> Page[Pod]:
    page = MESSAGES["PodList"].FromString(wire)
    items = []
    for item in page.items:
        meta = item.metadata
        found = known.get(version_key(meta.uid, meta.resource_version)) if known else None
        items.append(pod_of(item) if found is None else found)
    return Page(items, page.metadata.continue_token)


def version_page(body: bytes | bytearray, owned: bool = False) -> Page[Version]:
    """Each object's identity and resourceVersion, from a LIST asked for with
    META_ACCEPT (JSON, and full objects, decode too); ``owned``: its
    controller and bucket label too."""
    if not body.startswith(MAGIC):
        return version_page_json(body, owned)
    wire, kind = _envelope(body)
    return _named(versions_in(wire, owned), kind)


def _named(page: Page[T], kind: str) -> Page[T]:
    return Page(page.items, page.continue_token, kind)


def versions_in(wire: memoryview | bytes, owned: bool = False) -> Page[Version]:
    if not owned:
        page = MESSAGES["PartialObjectMetadataList"].FromString(wire)
        return Page(
            [
                Version(m.namespace, m.name, m.uid, m.resource_version)
                for m in (item.metadata for item in page.items)
            ],
            page.metadata.continue_token,
        )
    owned_page = MESSAGES["OwnedMetadataList"].FromString(wire)
    items = [_owned_version(item.metadata) for item in owned_page.items]
    return Page(items, owned_page.metadata.continue_token)


def _owned_version(meta: Any) -> Version:
    controller = next((r.uid for r in meta.owner_references if r.controller), "")
    label = meta.labels.get(LABEL_BUCKET, "")
    return Version(meta.namespace, meta.name, meta.uid, meta.resource_version, controller, label)


@dataclass(frozen=True)
class ErrorStatus:
    reason: str
    message: str


def error_status_of(body: bytes) -> ErrorStatus | None:
    """The reason and message of an error Status sent as protobuf, else None:
    a request that asked for protobuf gets its errors as protobuf too."""
    if not body.startswith(MAGIC):
        return None
    try:
        status = MESSAGES["Status"].FromString(_unwrap(body))
    except DecodeError:
        return None
    return ErrorStatus(status.reason, status.message)
