"""The one description of the pod fields a pass reads, and the one way a
decoded pod becomes a `Pod`.

Three readers take pods off the wire: `protowire` (protobuf) and `json_wire`
(JSON, with msgspec) build their message types from `SCHEMA` (the protobuf
descriptors and the msgspec structs, with the same attribute names), and
`pod_dict` reads the dict of a GET, or of a page the typed structs refuse,
through `SCHEMA` too. All three hand what they read to `pod_of`. A field a
pass should read is a row here and a line in `pod_of`, where it becomes a
field of `Pod`. The property tests (tests/unit/client/test_pod_page.py,
test_protowire.py) check that the three readers agree, on well-formed pods
and on pods with values of the wrong type.
"""

from __future__ import annotations

from datetime import UTC, datetime
from sys import intern
from typing import Any, NamedTuple

from google.protobuf.descriptor_pb2 import FieldDescriptorProto as _F

from reconciler.model import Container, ContainerState, OwnerRef, Pod, PodCondition, rfc3339

# Field kinds: protobuf's scalar types, a message name, or one of these.
STRING, BOOL, INT64, INT32, BYTES = (
    _F.TYPE_STRING,
    _F.TYPE_BOOL,
    _F.TYPE_INT64,
    _F.TYPE_INT32,
    _F.TYPE_BYTES,
)
MAP = "map"  # a map<string, string>
TIME = "Time"  # metav1.Time: seconds in protobuf, an RFC 3339 string in JSON


class Field(NamedTuple):
    """One field: our name (snake_case; its JSON name is its camelCase), its
    number as in k8s.io/api's and apimachinery's generated.proto, its kind,
    whether it repeats, and whether a reader asks if it was sent at all."""

    name: str
    number: int
    kind: Any
    many: bool = False
    present: bool = False


# The messages of a pod, leaves first; only the fields a pass reads.
SCHEMA: dict[str, list[Field]] = {
    "OwnerReference": [
        Field("kind", 1, STRING),
        Field("name", 3, STRING),
        Field("uid", 4, STRING),
        Field("api_version", 5, STRING),
        Field("controller", 6, BOOL),
        Field("block_owner_deletion", 7, BOOL),
    ],
    "ObjectMeta": [
        Field("name", 1, STRING),
        Field("namespace", 3, STRING),
        Field("uid", 5, STRING),
        Field("resource_version", 6, STRING),
        Field("generation", 7, INT64),
        Field("deletion_timestamp", 9, TIME, present=True),
        Field("deletion_grace_period_seconds", 10, INT64, present=True),
        Field("labels", 11, MAP),
        Field("annotations", 12, MAP),
        Field("owner_references", 13, "OwnerReference", many=True),
        Field("finalizers", 14, STRING, many=True),
    ],
    "ContainerPort": [Field("container_port", 3, INT32, present=True)],
    "Container": [
        Field("name", 1, STRING),
        Field("image", 2, STRING),
        Field("args", 4, STRING, many=True),
        Field("ports", 6, "ContainerPort", many=True),
    ],
    "PodSpec": [Field("containers", 2, "Container", many=True)],
    "PodCondition": [
        Field("type", 1, STRING),
        Field("status", 2, STRING),
        Field("reason", 5, STRING),
        Field("message", 6, STRING),
    ],
    "ContainerStateWaiting": [Field("reason", 1, STRING), Field("message", 2, STRING)],
    "ContainerStateTerminated": [Field("reason", 3, STRING), Field("message", 4, STRING)],
    "ContainerState": [
        Field("waiting", 1, "ContainerStateWaiting", present=True),
        Field("terminated", 3, "ContainerStateTerminated", present=True),
    ],
    "ContainerStatus": [Field("name", 1, STRING), Field("state", 2, "ContainerState")],
    "PodStatus": [
        Field("phase", 1, STRING),
        Field("conditions", 2, "PodCondition", many=True),
        Field("message", 3, STRING),
        Field("reason", 4, STRING),
        Field("container_statuses", 8, "ContainerStatus", many=True),
    ],
    "Pod": [
        Field("metadata", 1, "ObjectMeta"),
        Field("spec", 2, "PodSpec"),
        Field("status", 3, "PodStatus"),
    ],
}


# Most pod strings repeat across pods (label keys and values, condition types
# and statuses, owner references shared by a Redis's pods, the namespace):
# interned, 30,000 pods take a fraction of the memory.


def _owner(ref: Any) -> OwnerRef:
    return OwnerRef(
        intern(ref.api_version),
        intern(ref.kind),
        intern(ref.name),
        intern(ref.uid),
        ref.controller,
        ref.block_owner_deletion,
    )


def _container(c: Any) -> Container:
    ports = tuple(p.container_port for p in c.ports if p.HasField("container_port"))
    return Container(intern(c.name), intern(c.image), ports, tuple(map(intern, c.args)))


def _state(c: Any) -> ContainerState | None:
    """A container that is not running; a running one (most) costs two checks."""
    state = c.state
    if state.HasField("waiting"):
        waiting = state.waiting
        return ContainerState(c.name, True, waiting.reason, waiting.message)
    if state.HasField("terminated"):
        ended = state.terminated
        return ContainerState(c.name, False, ended.reason, ended.message)
    return None


def _states(status: Any) -> tuple[ContainerState, ...]:
    return tuple(s for s in map(_state, status.container_statuses) if s is not None)


def _strings(pairs: Any) -> dict[str, str]:
    return {intern(k): intern(v) for k, v in pairs.items()}


def _time(value: Any) -> str:
    """metav1.Time as the API's JSON writes it."""
    return value if isinstance(value, str) else rfc3339(datetime.fromtimestamp(value.seconds, UTC))


def pod_of(wire: Any) -> Pod:
    """A pod decoded by either typed decoder: their messages have the fields
    of `SCHEMA` under the same names, with protobuf's defaults, and answer
    ``HasField`` for the fields marked ``present``."""
    meta, status = wire.metadata, wire.status
    owners = tuple(_owner(r) for r in meta.owner_references)
    controller = next((o for o in owners if o.controller), None)
    return Pod(
        namespace=intern(meta.namespace),
        name=meta.name,
        uid=meta.uid,
        resource_version=meta.resource_version,
        labels=_strings(meta.labels),
        annotations=_strings(meta.annotations),
        controller_uid=controller.uid if controller else None,
        controller_kind=controller.kind if controller else None,
        deletion_timestamp=(
            _time(meta.deletion_timestamp) if meta.HasField("deletion_timestamp") else None
        ),
        phase=intern(status.phase or "Unknown"),
        conditions=tuple(
            PodCondition(intern(c.type), intern(c.status or "Unknown"), intern(c.reason), c.message)
            for c in status.conditions
            if c.type
        ),
        containers=tuple(_container(c) for c in wire.spec.containers),
        owner_refs=owners,
        generation=meta.generation,
        deletion_grace_seconds=(
            meta.deletion_grace_period_seconds
            if meta.HasField("deletion_grace_period_seconds")
            else None
        ),
        finalizers=tuple(meta.finalizers),
        reason=status.reason,
        message=status.message,
        container_states=_states(status) if status.container_statuses else (),
    )
