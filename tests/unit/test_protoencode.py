"""Creates as protobuf: every key of the manifest a JSON create would send
reaches the wire, and one the schema does not know is an error."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from google.protobuf import json_format
from hypothesis import given
from hypothesis import strategies as st

from reconciler.actions import EventSpec, ObjRef
from reconciler.events import event_body
from reconciler.kinds.redis import RedisSpec, pod_manifest
from reconciler.protoencode import EncodeError, encode
from reconciler.protowire import MAGIC, MESSAGES
from tests.unit.builders import redis

NAMES = st.from_regex(r"[a-z][a-z0-9-]{0,20}[a-z0-9]", fullmatch=True)
TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)


def _decoded(body: bytes) -> tuple[dict[str, Any], dict[str, Any]]:
    """The type meta and the object of a protobuf body, as JSON names say them."""
    assert body.startswith(MAGIC)
    envelope = MESSAGES["Envelope"].FromString(body[len(MAGIC) :])
    kind = envelope.type_meta.kind
    obj = MESSAGES[kind].FromString(envelope.raw)
    type_meta = {"apiVersion": envelope.type_meta.api_version, "kind": kind}
    return type_meta, json_format.MessageToDict(obj)


def _object(manifest: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in manifest.items() if k not in ("apiVersion", "kind")}


@given(
    name=NAMES,
    namespace=NAMES,
    image=st.from_regex(r"[a-z0-9./-]{1,30}(:[a-z0-9.]{1,10})?", fullmatch=True),
    port=st.integers(1, 65535),
    index=st.integers(0, 50),
)
def test_a_pod_manifest_reaches_the_wire_whole(
    name: str, namespace: str, image: str, port: int, index: int
) -> None:
    """The pod a pass creates, read back from its protobuf, is its manifest:
    a key dropped on the way would make a pod unlike its spec."""
    r = redis(name, namespace, port=port, image=image)
    manifest = pod_manifest(r, RedisSpec(port=port, num=3, image=image), index)
    type_meta, obj = _decoded(encode(manifest))
    assert type_meta == {"apiVersion": "v1", "kind": "Pod"}
    assert obj == _object(manifest)


@given(
    reason=NAMES,
    message=TEXT,
    warning=st.booleans(),
    at=st.datetimes(datetime(2000, 1, 1), datetime(2100, 1, 1), timezones=st.just(UTC)),
)
def test_an_event_reaches_the_wire_whole(
    reason: str, message: str, warning: bool, at: datetime
) -> None:
    involved = ObjRef("myapp.demo.kubebuilder.io/v1", "Redis", "ns", "r", "uid-1")
    spec = EventSpec(involved, "Warning" if warning else "Normal", reason, message, "reconciler")
    body = event_body(spec, at)
    type_meta, obj = _decoded(encode(body))
    assert type_meta == {"apiVersion": "v1", "kind": "Event"}
    seconds = str(int(at.replace(microsecond=0).timestamp()))
    want = _object(body)
    want["firstTimestamp"] = want["lastTimestamp"] = {"seconds": seconds}
    assert obj == want


@pytest.mark.parametrize(
    ("manifest", "error"),
    [
        (
            {"kind": "Pod", "spec": {"containers": [{"name": "a", "resources": {}}]}},
            "Pod.spec.containers[0].resources: not in the protobuf schema",
        ),
        ({"kind": "Pod", "metadata": {"name": 7}}, "Pod.metadata.name: "),
        ({"kind": "Pod", "metadata": {"labels": {"a": 1}}}, "Pod.metadata.labels: "),
        (
            {"kind": "Event", "firstTimestamp": "2026-11-24T10:00:00"},
            "Event.firstTimestamp: '2026-11-24T10:00:00' has no time zone",
        ),
        ({"kind": "Redis", "spec": {}}, "kind 'Redis' is not written as protobuf"),
    ],
)
def test_what_the_schema_cannot_say_is_an_error_naming_the_field(
    manifest: dict[str, Any], error: str
) -> None:
    with pytest.raises(EncodeError) as caught:
        encode(manifest)
    assert str(caught.value).startswith(error)


def test_an_empty_object_is_sent_not_dropped() -> None:
    """``"securityContext": {}`` and the like: set, though empty."""
    body = encode({"apiVersion": "v1", "kind": "Event", "source": {}})
    envelope = MESSAGES["Envelope"].FromString(body[len(MAGIC) :])
    assert MESSAGES["Event"].FromString(envelope.raw).HasField("source")
