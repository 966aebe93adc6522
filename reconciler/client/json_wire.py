"""LIST pages off the wire as JSON, decoded by msgspec into typed structs of
the fields a pass reads: every other field (managedFields, most of spec and
status) is skipped without being built. An item decoded in an earlier pass
(same uid and resourceVersion) is taken from there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, cast

import msgspec

from reconciler.client.errors import NotAList
from reconciler.client.pod_dict import pod_from_api
from reconciler.client.pod_fields import BOOL, INT32, INT64, MAP, STRING, TIME, Field, pod_of
from reconciler.client.pod_fields import SCHEMA as POD_SCHEMA
from reconciler.model import LABEL_BUCKET, Known, Page, Pod, T, Version, version_key


class _ListMeta(msgspec.Struct):
    continue_: str | None = msgspec.field(default=None, name="continue")


# `items` is UNSET when the answer has none: not a list at all (`{}`, a
# Status from a proxy), where `items: null` is an empty one, as client-go reads it.
class _RawList(msgspec.Struct):
    kind: str = ""
    metadata: _ListMeta | None = None
    items: list[msgspec.Raw] | msgspec.UnsetType | None = msgspec.UNSET


class _IdentMeta(msgspec.Struct):
    uid: str = ""
    resourceVersion: str = ""
    namespace: str = ""
    name: str = ""


class _Ident(msgspec.Struct):
    metadata: _IdentMeta | None = None


class _OwnerRef(msgspec.Struct):
    uid: str = ""
    controller: bool | None = None


class _VersionMeta(_IdentMeta):
    labels: dict[str, str] | None = None
    ownerReferences: list[_OwnerRef] | None = None


class _VersionItem(msgspec.Struct):
    metadata: _VersionMeta | None = None


_raw_list = msgspec.json.Decoder(_RawList)


_ident = msgspec.json.Decoder(_Ident)


_item = msgspec.json.Decoder(dict[str, Any])


class _IdentList(msgspec.Struct):
    kind: str = ""
    metadata: _ListMeta | None = None
    items: list[_Ident] | msgspec.UnsetType | None = msgspec.UNSET


class _OwnedList(msgspec.Struct):
    kind: str = ""
    metadata: _ListMeta | None = None
    items: list[_VersionItem] | msgspec.UnsetType | None = msgspec.UNSET


_ident_list = msgspec.json.Decoder(_IdentList)


_owned_list = msgspec.json.Decoder(_OwnedList)


def _version(m: _VersionMeta) -> Version:
    controller = next((o.uid for o in m.ownerReferences or () if o.controller), "")
    label = (m.labels or {}).get(LABEL_BUCKET, "")
    return Version(m.namespace, m.name, m.uid, m.resourceVersion, controller, label)


def items_of(items: list[T] | msgspec.UnsetType | None, kind: str) -> list[T]:
    """A list's items; an answer without the field is no list at all."""
    if items is msgspec.UNSET:
        raise NotAList(f"kind {kind!r} with no items" if kind else "no kind and no items")
    return items or []


def version_page_json(body: bytes | bytearray, owned: bool = False) -> Page[Version]:
    """protowire.version_page, for an answer in JSON."""
    if owned:
        page = _owned_list.decode(body)
        metas = (item.metadata or _VersionMeta() for item in items_of(page.items, page.kind))
        versions = [_version(m) for m in metas]
        return Page(versions, (page.metadata or _ListMeta()).continue_ or "", page.kind)
    plain = _ident_list.decode(body)
    idents = (item.metadata or _IdentMeta() for item in items_of(plain.items, plain.kind))
    versions = [Version(m.namespace, m.name, m.uid, m.resourceVersion) for m in idents]
    return Page(versions, (plain.metadata or _ListMeta()).continue_ or "", plain.kind)


def _known_item(raw: msgspec.Raw, known: Known[T]) -> T | None:
    try:
        meta = _ident.decode(raw).metadata
    except msgspec.ValidationError:
        return None  # decoded in full, which keeps what it can
    return None if meta is None else known.get(version_key(meta.uid, meta.resourceVersion))


def page_of(
    decode: Callable[[Mapping[str, Any]], T], known: Known[T] | None = None
) -> Callable[[bytes], Page[T]]:
    """A page decoder that decodes each item from its full JSON object, unless
    ``known`` holds it already: then only its uid and resourceVersion are read."""

    def decode_page(body: bytes) -> Page[T]:
        page = _raw_list.decode(body)
        meta = page.metadata or _ListMeta()
        items = []
        for raw in items_of(page.items, page.kind):
            found = _known_item(raw, known) if known else None
            items.append(decode(_item.decode(raw)) if found is None else found)
        return Page(items, meta.continue_ or "", page.kind)

    return decode_page


raw_page: Callable[[bytes], Page[dict[str, Any]]] = page_of(dict)


class _Wire(msgspec.Struct):
    """A pod's message as JSON, read as `pod_fields.pod_of` reads protobuf's."""

    def HasField(self, name: str) -> bool:
        return getattr(self, name) is not None


_SCALARS: dict[Any, tuple[Any, Any]] = {STRING: (str, ""), BOOL: (bool, False)}
_SCALARS.update({INT64: (int, 0), INT32: (int, 0)})


def _struct_field(f: Field, made: Mapping[str, type[_Wire]]) -> tuple[str, Any, Any]:
    """A msgspec field with protobuf's default: "", 0, False, empty, or an
    empty message; None only where a reader asks whether it was sent."""
    kind: Any
    default: Any
    if f.kind == TIME:
        kind, default = str, None
    elif f.kind == MAP:
        kind, default = dict[str, str], msgspec.field(default_factory=dict)
    elif isinstance(f.kind, str):
        kind, default = made[f.kind], msgspec.field(default_factory=made[f.kind])
    else:
        kind, default = _SCALARS[f.kind]
    if f.many:
        return f.name, list[kind], msgspec.field(default_factory=list)
    if f.present:
        return f.name, kind | None, None
    return f.name, kind, default


def _structs() -> dict[str, type[_Wire]]:
    """`pod_fields.SCHEMA` as msgspec structs, JSON names in camelCase."""
    made: dict[str, type[_Wire]] = {}
    for name, fields in POD_SCHEMA.items():
        spec = [_struct_field(f, made) for f in fields]
        made[name] = cast(
            type[_Wire], msgspec.defstruct(f"_{name}", spec, bases=(_Wire,), rename="camel")
        )
    return made


_POD = _structs()["Pod"]


class _PodList(msgspec.Struct):
    kind: str = ""
    metadata: _ListMeta | None = None
    items: list[_POD] | msgspec.UnsetType | None = msgspec.UNSET  # type: ignore[valid-type]


_pod_list = msgspec.json.Decoder(_PodList)


_pods_generic = page_of(pod_from_api)


def pod_page(body: bytes | bytearray) -> Page[Pod]:
    """A page of pods, decoded to exactly what pod_from_api makes of it.

    A page the typed structs refuse (a field of an unexpected type: not from a
    conforming apiserver, but possible through a proxy) is decoded the generic
    way, so the fast path never changes what a pass sees.
    """
    try:
        page = _pod_list.decode(body)
    except msgspec.ValidationError:
        return _pods_generic(bytes(body))
    meta = page.metadata or _ListMeta()
    pods = [pod_of(item) for item in items_of(page.items, page.kind)]
    return Page(pods, meta.continue_ or "", page.kind)
