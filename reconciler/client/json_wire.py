"""LIST pages off the wire as JSON, decoded by msgspec into typed structs of
the fields a pass reads: every other field (managedFields, most of spec and
status) is skipped without being built. An item decoded in an earlier pass
(same uid and resourceVersion) is taken from there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from reconciler.client.pod_dict import pod_from_api
from reconciler.model import (
    LABEL_BUCKET,
    Container,
    ContainerState,
    Known,
    OwnerRef,
    Page,
    Pod,
    PodCondition,
    T,
    Version,
    version_key,
)


class _ListMeta(msgspec.Struct):
    continue_: str | None = msgspec.field(default=None, name="continue")


class _RawList(msgspec.Struct):
    metadata: _ListMeta | None = None
    items: list[msgspec.Raw] | None = None


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
    metadata: _ListMeta | None = None
    items: list[_Ident] | None = None


class _OwnedList(msgspec.Struct):
    metadata: _ListMeta | None = None
    items: list[_VersionItem] | None = None


_ident_list = msgspec.json.Decoder(_IdentList)


_owned_list = msgspec.json.Decoder(_OwnedList)


def _version(m: _VersionMeta) -> Version:
    controller = next((o.uid for o in m.ownerReferences or () if o.controller), "")
    label = (m.labels or {}).get(LABEL_BUCKET, "")
    return Version(m.namespace, m.name, m.uid, m.resourceVersion, controller, label)


def version_page_json(body: bytes | bytearray, owned: bool = False) -> Page[Version]:
    """protowire.version_page, for an answer in JSON."""
    if owned:
        page = _owned_list.decode(body)
        metas = (item.metadata or _VersionMeta() for item in page.items or ())
        versions = [_version(m) for m in metas]
        return Page(versions, (page.metadata or _ListMeta()).continue_ or "")
    plain = _ident_list.decode(body)
    idents = (item.metadata or _IdentMeta() for item in plain.items or ())
    versions = [Version(m.namespace, m.name, m.uid, m.resourceVersion) for m in idents]
    return Page(versions, (plain.metadata or _ListMeta()).continue_ or "")


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
        for raw in page.items or ():
            found = _known_item(raw, known) if known else None
            items.append(decode(_item.decode(raw)) if found is None else found)
        return Page(items, meta.continue_ or "")

    return decode_page


raw_page: Callable[[bytes], Page[dict[str, Any]]] = page_of(dict)


class _WireCondition(msgspec.Struct):
    type: str | None = None
    status: str | None = None
    reason: str | None = None
    message: str | None = None


class _WirePort(msgspec.Struct):
    containerPort: int | None = None


class _WireContainer(msgspec.Struct):
    name: str | None = None
    image: str | None = None
    ports: list[_WirePort] | None = None
    args: list[str] | None = None


class _WireStateDetail(msgspec.Struct):
    reason: str | None = None
    message: str | None = None


class _WireState(msgspec.Struct):
    waiting: _WireStateDetail | None = None
    terminated: _WireStateDetail | None = None


class _WireContainerStatus(msgspec.Struct):
    name: str | None = None
    state: _WireState | None = None


class _WireOwner(msgspec.Struct):
    apiVersion: str | None = None
    kind: str | None = None
    name: str | None = None
    uid: str | None = None
    controller: bool | None = None
    blockOwnerDeletion: bool | None = None


class _WireMeta(msgspec.Struct):
    name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resourceVersion: str | None = None
    generation: int | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    deletionTimestamp: str | None = None
    deletionGracePeriodSeconds: int | None = None
    ownerReferences: list[_WireOwner] | None = None
    finalizers: list[str] | None = None


class _WireSpec(msgspec.Struct):
    containers: list[_WireContainer] | None = None


class _WireStatus(msgspec.Struct):
    phase: str | None = None
    conditions: list[_WireCondition] | None = None
    reason: str | None = None
    message: str | None = None
    containerStatuses: list[_WireContainerStatus] | None = None


class _WirePod(msgspec.Struct):
    metadata: _WireMeta | None = None
    spec: _WireSpec | None = None
    status: _WireStatus | None = None


class _PodList(msgspec.Struct):
    metadata: _ListMeta | None = None
    items: list[_WirePod] | None = None


_pod_list = msgspec.json.Decoder(_PodList)


_pods_generic = page_of(pod_from_api)


def _owner(ref: _WireOwner) -> OwnerRef:
    return OwnerRef(
        ref.apiVersion or "",
        ref.kind or "",
        ref.name or "",
        ref.uid or "",
        ref.controller is True,
        ref.blockOwnerDeletion is True,
    )


def _container(c: _WireContainer) -> Container:
    ports = tuple(p.containerPort for p in c.ports or () if p.containerPort is not None)
    return Container(c.name or "", c.image or "", ports, tuple(c.args or ()))


def _state(c: _WireContainerStatus) -> ContainerState | None:
    state = c.state or _WireState()
    for detail, waiting in ((state.waiting, True), (state.terminated, False)):
        if detail is not None:
            return ContainerState(c.name or "", waiting, detail.reason or "", detail.message or "")
    return None


def _states(status: _WireStatus) -> tuple[ContainerState, ...]:
    states = (_state(c) for c in status.containerStatuses or ())
    return tuple(s for s in states if s is not None)


def _pod(wire: _WirePod) -> Pod:
    meta = wire.metadata or _WireMeta()
    status = wire.status or _WireStatus()
    owners = tuple(_owner(r) for r in meta.ownerReferences or ())
    controller = next((o for o in owners if o.controller), None)
    return Pod(
        namespace=meta.namespace or "",
        name=meta.name or "",
        uid=meta.uid or "",
        resource_version=meta.resourceVersion or "",
        labels=meta.labels or {},
        annotations=meta.annotations or {},
        controller_uid=controller.uid if controller else None,
        controller_kind=controller.kind if controller else None,
        deletion_timestamp=meta.deletionTimestamp,
        phase=status.phase or "Unknown",
        conditions=tuple(
            PodCondition(c.type, c.status or "Unknown", c.reason or "", c.message or "")
            for c in status.conditions or ()
            if c.type
        ),
        containers=tuple(_container(c) for c in (wire.spec or _WireSpec()).containers or ()),
        owner_refs=owners,
        generation=meta.generation or 0,
        deletion_grace_seconds=meta.deletionGracePeriodSeconds,
        finalizers=tuple(meta.finalizers or ()),
        reason=status.reason or "",
        message=status.message or "",
        container_states=_states(status),
    )


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
    return Page([_pod(item) for item in page.items or ()], meta.continue_ or "")
