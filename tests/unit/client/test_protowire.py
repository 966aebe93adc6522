"""Pods read as protobuf (protowire.pod_page_any) make exactly what
pod_from_api makes of the same pods as JSON.

The pages here are written with protowire's own schema, so this checks the
mapping to Pod (defaults, maps, timestamps, the envelope), not the field
numbers: tests/e2e/test_decode.py compares against the apiserver's own
protobuf and JSON for the same pods."""

from __future__ import annotations

import dataclasses
import itertools
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from google.protobuf.message import DecodeError
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.client.pod_dict import pod_from_api
from reconciler.client.protowire import (
    MAGIC,
    MESSAGES,
    ErrorStatus,
    _unwrap,
    error_status_of,
    pod_page_any,
    pod_page_reusing,
    version_page,
)
from reconciler.client.streams import ListStream, PodStream, VersionStream
from reconciler.model import LABEL_BUCKET, Version

text = st.text(max_size=8)
labels = st.dictionaries(st.one_of(text, st.just(LABEL_BUCKET)), text, max_size=3)


def optional(fields: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional=fields)


owner = optional(
    {
        "apiVersion": text,
        "kind": text,
        "name": text,
        "uid": text,
        "controller": st.booleans(),
        "blockOwnerDeletion": st.booleans(),
    }
)
meta = optional(
    {
        "name": text,
        "namespace": text,
        "uid": text,
        "resourceVersion": text,
        "labels": labels,
        "annotations": labels,
        "deletionTimestamp": st.integers(0, 4_000_000_000),  # seconds; JSON gets RFC 3339
        "deletionGracePeriodSeconds": st.integers(0, 3600),
        "generation": st.integers(0, 2**40),
        "ownerReferences": st.lists(owner, max_size=3),
        "finalizers": st.lists(text, max_size=2),
    }
)
container = optional(
    {
        "name": text,
        "image": text,
        "args": st.lists(text, max_size=3),
        "ports": st.lists(optional({"containerPort": st.integers(0, 65535)}), max_size=2),
    }
)
condition = optional(
    {
        "type": st.sampled_from(["Ready", "PodScheduled", ""]),
        "status": st.sampled_from(["True", "False", "Unknown", ""]),
        "reason": text,
        "message": text,
    }
)
detail = optional({"reason": text, "message": text})
container_status = optional(
    {
        "name": text,
        "state": optional({"waiting": detail, "terminated": detail}),
        "ready": st.booleans(),  # not read
    }
)
pod = optional(
    {
        "metadata": meta,
        "spec": optional({"containers": st.lists(container, max_size=2)}),
        "status": optional(
            {
                "phase": st.sampled_from(["Pending", "Running", "Failed", ""]),
                "conditions": st.lists(condition, max_size=3),
                "reason": text,
                "message": text,
                "containerStatuses": st.lists(container_status, max_size=2),
            }
        ),
    }
)

# JSON name -> protowire's name, where they differ.
NAMES = {
    "apiVersion": "api_version",
    "blockOwnerDeletion": "block_owner_deletion",
    "resourceVersion": "resource_version",
    "ownerReferences": "owner_references",
    "containerPort": "container_port",
    "deletionGracePeriodSeconds": "deletion_grace_period_seconds",
    "containerStatuses": "container_statuses",
}
# Fields of the real schema that ours does not declare: written as the
# apiserver would, and skipped on reading.
UNREAD = {"ready"}


def _fill(message: Any, obj: dict[str, Any]) -> None:
    for key, value in obj.items():
        name = NAMES.get(key, key)
        if key == "deletionTimestamp":
            message.deletion_timestamp.seconds = value
        elif key in ("labels", "annotations"):
            getattr(message, name).update(value)
        elif isinstance(value, dict):
            getattr(message, name).SetInParent()  # present even if empty, as Go sends it
            _fill(getattr(message, name), value)
        elif key in UNREAD:
            continue
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            getattr(message, name).extend(value)
        elif isinstance(value, list):
            for item in value:
                _fill(getattr(message, name).add(), item)
        else:
            setattr(message, name, value)


def as_json(item: dict[str, Any]) -> dict[str, Any]:
    """The same pod as the apiserver writes it in JSON."""
    out = json.loads(json.dumps(item))
    seconds = item.get("metadata", {}).get("deletionTimestamp")
    if seconds is not None:
        stamp = datetime.fromtimestamp(seconds, UTC).isoformat()  # +00:00: Go writes Z
        out["metadata"]["deletionTimestamp"] = stamp.replace("+00:00", "Z")
    return out


def wire(items: list[dict[str, Any]], token: str) -> bytes:
    page = MESSAGES["PodList"]()
    page.metadata.continue_token = token
    for item in items:
        _fill(page.items.add(), item)
    envelope = MESSAGES["Unknown"](raw=page.SerializeToString())
    return MAGIC + type_meta("PodList") + envelope.SerializeToString()


def type_meta(kind: str) -> bytes:
    """runtime.Unknown's field 1, as the apiserver writes it: apiVersion, kind."""
    meta = b"\x0a\x02v1" + b"\x12" + _varint_bytes(len(kind)) + kind.encode()
    return b"\x0a" + _varint_bytes(len(meta)) + meta


@settings(max_examples=300)
@given(st.lists(pod, max_size=4), text)
def test_protobuf_pages_decode_as_the_json_of_the_same_pods(items, token):
    page = pod_page_any(wire(items, token))
    assert page.items == [pod_from_api(as_json(item)) for item in items]
    assert page.continue_token == token


@given(st.lists(pod, max_size=4), st.data())
def test_a_pod_known_at_its_uid_and_version_is_reused_and_no_other(items, data):
    body = wire(items, "")
    fresh = pod_page_any(body).items
    known = {}
    for i, p in enumerate(fresh):
        if data.draw(st.booleans()):
            version = p.resource_version if data.draw(st.booleans()) else p.resource_version + "x"
            known[(p.uid, version)] = dataclasses.replace(p, phase=f"known-{i}")
    got = pod_page_reusing(known)(body).items
    assert got == [known.get((p.uid, p.resource_version), p) for p in fresh]


def test_a_json_answer_goes_to_the_json_decoder():
    body = json.dumps({"kind": "PodList", "metadata": {"continue": "t"}, "items": [{}]}).encode()
    page = pod_page_any(body)
    assert page.items == [pod_from_api({})]
    assert page.continue_token == "t"


def test_an_error_status_sent_as_protobuf_gives_its_reason_and_message():
    status = MESSAGES["Status"](reason="Expired", message="the continue token is too old", code=410)
    body = MAGIC + MESSAGES["Unknown"](raw=status.SerializeToString()).SerializeToString()
    found = error_status_of(body)
    assert found is not None
    assert (found.reason, found.message) == ("Expired", "the continue token is too old")
    assert error_status_of(b'{"kind":"Status"}') is None
    assert error_status_of(MAGIC + b"\xff\xff") is None  # not a message: the caller keeps the text


def metadata_page(items: list[dict[str, Any]], token: str) -> bytes:
    """A LIST of metadata as the apiserver sends it. A PodList has the same
    field numbers for the list and each item's metadata; the fields the
    reader does not declare (labels, owners, spec, status) stay in the wire."""
    return wire(items, token)


@settings(max_examples=200)
@given(st.lists(pod, max_size=4), text)
def test_a_protobuf_list_of_metadata_gives_each_identity_and_version(items, token):
    metas = [as_json(item).get("metadata", {}) for item in items]
    plain = [
        Version(
            m.get("namespace", ""),
            m.get("name", ""),
            m.get("uid", ""),
            m.get("resourceVersion", ""),
        )
        for m in metas
    ]
    owned = [
        Version(
            v.namespace,
            v.name,
            v.uid,
            v.resource_version,
            next(
                (o.get("uid", "") for o in m.get("ownerReferences", []) if o.get("controller")), ""
            ),
            (m.get("labels") or {}).get(LABEL_BUCKET, ""),
        )
        for v, m in zip(plain, metas, strict=True)
    ]
    body = metadata_page(items, token)
    assert version_page(body).items == plain
    assert version_page(body, owned=True).items == owned
    as_text = json.dumps({"metadata": {"continue": token}, "items": [as_json(i) for i in items]})
    assert version_page(as_text.encode(), owned=True).items == owned  # the same in JSON
    assert version_page(body).continue_token == token


def envelope(*fields: bytes) -> bytes:
    return MAGIC + b"".join(fields)


def test_the_envelope_is_read_whatever_surrounds_the_object():
    """runtime.Unknown: typeMeta (1), raw (2), contentEncoding (3), contentType (4)."""
    raw = MESSAGES["Status"](reason="NotFound", message="gone").SerializeToString()
    type_meta = b"\x0a\x05" + b"\x0a\x03" + b"v1x"  # field 1, 5 bytes: a nested message
    body = envelope(type_meta, b"\x12" + bytes([len(raw)]) + raw, b"\x1a\x00", b"\x22\x00")
    assert error_status_of(body) == ErrorStatus("NotFound", "gone")
    assert version_page(envelope(b"\x1a\x00")).items == []  # no object: an empty list


@pytest.mark.parametrize(
    "body",
    [
        envelope(b"\x12\x09abc"),  # raw says 9 bytes, 3 follow
        envelope(b"\x12"),  # the length is missing
        envelope(b"\x0a\xff\xff"),  # a length cut short
        envelope(b"\x0b"),  # wire type 3 (a group): not in an envelope
    ],
)
def test_a_broken_envelope_is_a_decode_error(body):
    with pytest.raises(DecodeError):
        version_page(body)
    assert error_status_of(body) is None


def _varint_bytes(value: int) -> bytes:
    out = bytearray()
    while True:
        out.append((value & 0x7F) | (0x80 if value > 0x7F else 0))
        value >>= 7
        if not value:
            return bytes(out)


@settings(max_examples=300)
@given(
    st.lists(
        st.one_of(
            # Field 1 is the TypeMeta, read for the kind: its own test below.
            st.tuples(st.sampled_from([3, 4, 9]), st.just(2), st.binary(max_size=300)),
            st.tuples(st.integers(5, 99), st.just(0), st.integers(0, 2**64 - 1)),
            st.tuples(st.integers(5, 99), st.just(1), st.binary(min_size=8, max_size=8)),
            st.tuples(st.integers(5, 99), st.just(5), st.binary(min_size=4, max_size=4)),
        ),
        max_size=5,
    ),
    st.one_of(st.none(), st.binary(max_size=300)),
)
def test_the_envelope_is_read_as_the_protobuf_runtime_reads_it(others, raw):
    """Any valid envelope with at most one raw field: the object found by hand
    is the runtime's ``raw``, whatever other fields come before or after."""
    fields = []
    for number, wire_type, value in others:
        key = _varint_bytes(number << 3 | wire_type)
        if wire_type == 2:
            fields.append(key + _varint_bytes(len(value)) + value)
        elif wire_type == 0:
            fields.append(key + _varint_bytes(value))
        else:
            fields.append(key + value)
    if raw is not None:
        fields.insert(len(fields) // 2, b"\x12" + _varint_bytes(len(raw)) + raw)
    body = envelope(*fields)
    assert bytes(_unwrap(body)) == MESSAGES["Unknown"].FromString(body[len(MAGIC) :]).raw


def _pieces(body: bytes, cuts: list[int]) -> list[bytes]:
    """``body`` split at the given offsets, as the network may deliver it."""
    edges = [0, *sorted(c % (len(body) + 1) for c in cuts), len(body)]
    return [body[a:b] for a, b in itertools.pairwise(edges)]


def _streamed(pieces: list[bytes], batch: int, stream: ListStream[Any] | None = None) -> Any:
    stream = stream or VersionStream()
    stream.BATCH = batch  # small batches: many runs of items parsed on their own
    for piece in pieces:
        stream.feed(piece)
    return stream


def _around(body: bytes) -> bytes:
    """The envelope as the apiserver writes it: typeMeta, raw, contentEncoding, contentType."""
    raw = _unwrap(body).tobytes()
    type_meta = b"\x0a\x05\x0a\x03v1x"
    content_type = b"\x22\x14application/protobuf"
    return envelope(type_meta, b"\x12" + _varint_bytes(len(raw)) + raw, b"\x1a\x00", content_type)


def _answer(items: list[dict[str, Any]], token: str, as_json_: bool, protobuf: Any) -> bytes:
    """A LIST answer as JSON, or as the apiserver's protobuf made by ``protobuf``."""
    if as_json_:
        doc = {"metadata": {"continue": token}, "items": [as_json(i) for i in items]}
        return json.dumps(doc).encode()
    return _around(protobuf(items, token))


@settings(max_examples=300)
@given(
    st.lists(pod, max_size=6),
    text,
    st.booleans(),
    st.lists(st.integers(0, 10_000), max_size=12),
    st.integers(1, 400),
)
def test_a_list_read_in_pieces_gives_what_the_whole_answer_gives(
    items, token, as_json_, cuts, batch
):
    """However the answer is cut into pieces, and however small the batches,
    a stream reads the same identities and token as the whole body; a JSON
    answer too."""
    whole = _answer(items, token, as_json_, metadata_page)
    assert _streamed(_pieces(whole, cuts), batch).close() == version_page(whole)


@settings(max_examples=300)
@given(
    st.lists(pod, max_size=6),
    text,
    st.booleans(),
    st.lists(st.integers(0, 10_000), max_size=12),
    st.integers(1, 400),
    st.data(),
)
def test_pods_read_in_pieces_give_what_the_whole_answer_gives(
    items, token, as_json_, cuts, batch, data
):
    """The same for whole pods, reusing known ones as the whole-page decoder does."""
    whole = _answer(items, token, as_json_, wire)
    fresh = pod_page_any(whole).items
    known = {(p.uid, p.resource_version): p for p in fresh if data.draw(st.booleans())}
    got = _streamed(_pieces(whole, cuts), batch, PodStream(known)).close()
    assert got == pod_page_reusing(known)(whole)
    for p in got.items if not as_json_ else ():  # as protobuf: the very object known
        found = known.get((p.uid, p.resource_version))
        assert found is None or p is found
    if len({(p.uid, p.resource_version) for p in fresh}) == len(fresh):  # as real pods are
        assert got.items == fresh


@pytest.mark.parametrize("body", [b"", b"k8s"])
def test_an_answer_with_no_envelope_is_a_decode_error(body):
    stream = VersionStream()
    stream.feed(body)
    with pytest.raises(DecodeError, match="not a list"):
        stream.close()


@settings(max_examples=200)
@given(st.lists(pod, min_size=1, max_size=4), st.data())
def test_an_answer_cut_inside_the_list_is_a_decode_error(items, data):
    whole = metadata_page(items, "")
    raw = len(_unwrap(whole))
    start = len(whole) - raw  # where the list starts
    cut = data.draw(st.integers(start, len(whole) - 1))
    stream = _streamed([whole[:cut]], data.draw(st.integers(1, 400)))
    with pytest.raises(DecodeError):
        stream.close()


@pytest.mark.parametrize("kind", ["PodList", "Status", ""])
def test_the_envelope_names_the_kind_whole_or_as_it_arrives(kind):
    body = wire([], "")
    if kind != "PodList":
        rest = body[len(MAGIC + type_meta("PodList")) :]
        body = MAGIC + (type_meta(kind) if kind else b"") + rest
    assert pod_page_any(body).kind == kind
    stream = PodStream({})
    for i in range(0, len(body), 3):
        stream.feed(body[i : i + 3])
    assert stream.close().kind == kind
    assert version_page(body).kind == kind
