"""The observed cluster as frozen values: keys, resource types, pods.

Raw API objects are decoded once, at the edge, keeping only the fields the
planner reads, so that the planner never touches a dict of unknown shape and a
malformed object fails in one obvious place. The decoders of pods are in
`reconciler.client` (`pod_dict` from dicts, `json_wire` from JSON bytes,
`protowire` from protobuf); what is specific to one of our kinds (Redis, Xca)
lives with that kind's rules in `reconciler.kinds`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from sys import intern
from typing import Any, Generic, Protocol, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True, order=True)
class ObjKey:
    """Identifies an object across passes (kind, namespace, name)."""

    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class ResourceType:
    """Where a kind lives in the API: enough for the client to build its paths."""

    group: str  # "" for the core group
    version: str
    kind: str
    plural: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def crd_name(self) -> str:
        """The name of the CustomResourceDefinition that serves it."""
        return f"{self.plural}.{self.group}"

    @property
    def path_prefix(self) -> str:
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"


PODS = ResourceType("", "v1", "Pod", "pods")


NAMESPACES = ResourceType("", "v1", "Namespace", "namespaces")


@dataclass(frozen=True, slots=True)
class Condition:
    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: str = ""
    observed_generation: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": self.type,
            "status": self.status,
            "reason": self.reason,
            "message": self.message,
            "lastTransitionTime": self.last_transition_time,
        }
        if self.observed_generation is not None:
            out["observedGeneration"] = self.observed_generation
        return out


@dataclass(frozen=True, slots=True)
class PodCondition:
    type: str
    status: str
    reason: str = ""
    message: str = ""


@dataclass(frozen=True, slots=True)
class ContainerState:
    """A container that is not running, as its kubelet last reported it: why a
    pod is not Ready (ImagePullBackOff, CrashLoopBackOff), or why it ended."""

    name: str
    waiting: bool  # waiting to start; else terminated
    reason: str = ""
    message: str = ""

    def __str__(self) -> str:
        return f"{self.reason}: {self.message}" if self.message else self.reason


@dataclass(frozen=True, slots=True)
class Container:
    """The parts of a container a pod's owner decides, to see drift."""

    name: str
    image: str
    ports: tuple[int, ...] = ()  # containerPort of each declared port
    args: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class OwnerRef:
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool = False
    block_owner_deletion: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": self.controller,
            "blockOwnerDeletion": self.block_owner_deletion,
        }


@dataclass(frozen=True, slots=True)
class Pod:
    namespace: str
    name: str
    uid: str
    resource_version: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    controller_uid: str | None
    deletion_timestamp: str | None
    phase: str
    controller_kind: str | None = None
    conditions: tuple[PodCondition, ...] = ()
    containers: tuple[Container, ...] = ()
    owner_refs: tuple[OwnerRef, ...] = ()
    # metadata.generation: 1 as created, more once its spec was changed; 0
    # from a server that does not count pod generations (before 1.33).
    generation: int = 0
    deletion_grace_seconds: int | None = None
    finalizers: tuple[str, ...] = ()
    reason: str = ""  # status.reason and status.message: why it ended (Evicted)
    message: str = ""
    container_states: tuple[ContainerState, ...] = ()  # containers not running

    @property
    def key(self) -> ObjKey:
        return ObjKey(PODS.kind, self.namespace, self.name)

    @property
    def terminating(self) -> bool:
        return self.deletion_timestamp is not None

    @property
    def ended(self) -> bool:
        """Its containers will not run again: the kubelet never restarts a
        Failed or Succeeded pod, so only a new pod can take its place."""
        return self.phase in ENDED_PHASES

    @property
    def ready(self) -> bool:
        return not self.ended and any(
            c.type == "Ready" and c.status == "True" for c in self.conditions
        )

    def condition(self, type_: str) -> PodCondition | None:
        return next((c for c in self.conditions if c.type == type_), None)


ENDED_PHASES = frozenset({"Failed", "Succeeded"})


@dataclass(frozen=True, slots=True)
class Child:
    """An object one of ours makes besides pods (a Redis's Service): what its
    rules compare. Decoded in `reconciler.children`."""

    kind: str
    namespace: str
    name: str
    uid: str
    resource_version: str
    labels: Mapping[str, str]
    controller_uid: str | None
    owner_refs: tuple[OwnerRef, ...]
    spec: Mapping[str, Any]
    deletion_timestamp: str | None = None
    generation: int = 0
    # The fields of its status that a rule reads (a budget's disruptions allowed).
    status: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> ObjKey:
        return ObjKey(self.kind, self.namespace, self.name)

    @property
    def terminating(self) -> bool:
        return self.deletion_timestamp is not None


def rfc3339(at: datetime) -> str:
    """A time as the API stores it in seconds-precision fields
    (lastTransitionTime, events, our status.backoff.retryAfter)."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: Any) -> datetime | None:
    """A time the API wrote (RFC 3339), or None if it is absent or unreadable."""
    if not isinstance(value, str):
        return None
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        return None
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def meta_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return mapping(obj.get("metadata"))


def mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def shared(value: Any) -> Any:
    """A decoded JSON value with its strings interned. What a snapshot keeps
    of our objects and their children repeats across them (keys, condition
    reasons and times, label keys and values, the namespace): 1,000 Redis
    and 1,000 Xca with their Services and budgets held 3.2 MB of copies."""
    if isinstance(value, str):
        return intern(value)
    if isinstance(value, dict):
        return {intern(k) if isinstance(k, str) else k: shared(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shared(v) for v in value]
    return value


def generation_of(meta: Mapping[str, Any]) -> int:
    gen = meta.get("generation")
    return gen if isinstance(gen, int) else 0


# The bucket of a sharded replica (reconciler/buckets.py), on our objects and
# their pods, so that a replica LISTs only the buckets it holds.
LABEL_BUCKET = "myapp.demo.kubebuilder.io/shard-bucket"


@dataclass(frozen=True)
class Controller:
    """The controlling ownerReference of an object, if any."""

    uid: str | None
    kind: str | None


def controller_of(meta: Mapping[str, Any]) -> Controller:
    for ref in meta.get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return Controller(intern(str(ref.get("uid", ""))), intern(str(ref.get("kind", ""))))
    return Controller(None, None)


def owner_refs_of(meta: Mapping[str, Any]) -> tuple[OwnerRef, ...]:
    return tuple(
        OwnerRef(
            intern(str(r.get("apiVersion", ""))),
            intern(str(r.get("kind", ""))),
            intern(str(r.get("name", ""))),
            intern(str(r.get("uid", ""))),
            r.get("controller") is True,
            r.get("blockOwnerDeletion") is True,
        )
        for r in meta.get("ownerReferences") or ()
        if isinstance(r, Mapping)
    )


class PodIndex:
    """Pods by controlling owner and by name, built once per pass.

    Looking pods up per owner instead of scanning them keeps a pass linear in
    the number of objects (a scan per Redis is quadratic at 1000 Redis).
    """

    def __init__(
        self, pods: Iterable[Pod], children: Iterable[Child] = (), group_label: str = ""
    ) -> None:
        self.by_owner: dict[str, list[Pod]] = {}
        self.by_name: dict[tuple[str, str], Pod] = {}
        for pod in pods:
            if pod.controller_uid:
                self.by_owner.setdefault(pod.controller_uid, []).append(pod)
            self.by_name[(pod.namespace, pod.name)] = pod
        self.children: dict[tuple[str, str, str], Child] = {}
        self.by_group: dict[tuple[str, str, str], list[Child]] = {}
        for c in children:
            self.children[(c.kind, c.namespace, c.name)] = c
            value = c.labels.get(group_label) if group_label else None
            if value is not None:
                self.by_group.setdefault((c.kind, c.namespace, value), []).append(c)

    def child(self, kind: str, namespace: str, name: str) -> Child | None:
        return self.children.get((kind, namespace, name))

    def grouped(self, kind: str, namespace: str, value: str) -> tuple[Child, ...]:
        return tuple(self.by_group.get((kind, namespace, value), ()))

    def owned_by(self, uid: str) -> tuple[Pod, ...]:
        return tuple(self.by_owner.get(uid, ()))

    def named(self, namespace: str, name: str) -> Pod | None:
        return self.by_name.get((namespace, name))

    def answers(self, read: PodRead) -> bool:
        """Would this lookup return the same pods, at the same versions, today?"""
        if read.owner is not None:
            return versions_of(self.by_owner.get(read.owner, ())) == read.seen
        if read.grouped:
            found = self.grouped(read.child_kind, read.namespace, read.name)
            return versions_of(found) == read.seen
        if read.child_kind:
            child = self.child(read.child_kind, read.namespace, read.name)
            return versions_of(() if child is None else (child,)) == read.seen
        pod = self.by_name.get((read.namespace, read.name))
        return versions_of(() if pod is None else (pod,)) == read.seen


class PodLookup(Protocol):
    """The questions a kind's planner may ask about pods, and about the
    other objects it makes (its children, by kind and name)."""

    def owned_by(self, uid: str) -> tuple[Pod, ...]: ...
    def named(self, namespace: str, name: str) -> Pod | None: ...
    def child(self, kind: str, namespace: str, name: str) -> Child | None: ...

    # The children of ``kind`` in ``namespace`` whose grouping label (the
    # app.kubernetes.io/instance label: an object's name) has ``value``,
    # whoever owns them: a Redis's claims, kept after it scaled down.
    def grouped(self, kind: str, namespace: str, value: str) -> tuple[Child, ...]: ...


# An object is the same at the same uid and resourceVersion: what the pass
# before decoded or read of it still holds.
VersionKey = tuple[str, str]


def version_key(uid: str, resource_version: str) -> VersionKey:
    return (uid, resource_version)


def versions_of(pods: Iterable[Pod | Child]) -> tuple[VersionKey, ...]:
    return tuple(version_key(p.uid, p.resource_version) for p in pods)


@dataclass(frozen=True, slots=True)
class PodRead:
    """One pod lookup a planner made, and the pods (uid, resourceVersion) it got.

    A pod's resourceVersion changes with every write to it, so equal versions
    mean equal pods: the same lookup answered alike is the same input.
    """

    owner: str | None  # owned_by(owner), or else named(namespace, name)
    namespace: str
    name: str
    seen: tuple[VersionKey, ...]
    child_kind: str = ""  # set: child(child_kind, namespace, name)
    grouped: bool = False  # set too: grouped(child_kind, namespace, name)


class RecordingLookup:
    """A PodLookup that writes down every read, so that the planner can tell
    later whether an object's plan could have changed."""

    def __init__(self, index: PodIndex) -> None:
        self.index = index
        self.reads: list[PodRead] = []

    def owned_by(self, uid: str) -> tuple[Pod, ...]:
        pods = self.index.owned_by(uid)
        self.reads.append(PodRead(uid, "", "", versions_of(pods)))
        return pods

    def named(self, namespace: str, name: str) -> Pod | None:
        pod = self.index.named(namespace, name)
        self.reads.append(
            PodRead(None, namespace, name, versions_of(() if pod is None else (pod,)))
        )
        return pod

    def child(self, kind: str, namespace: str, name: str) -> Child | None:
        found = self.index.child(kind, namespace, name)
        seen = versions_of(() if found is None else (found,))
        self.reads.append(PodRead(None, namespace, name, seen, kind))
        return found

    def grouped(self, kind: str, namespace: str, value: str) -> tuple[Child, ...]:
        found = self.index.grouped(kind, namespace, value)
        self.reads.append(PodRead(None, namespace, value, versions_of(found), kind, True))
        return found


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a LIST, decoded: its items, the token for the next page,
    and the kind the answer says it is ("" when it says none), which the
    client holds to the kind it asked for (`client.kube`)."""

    items: list[T]
    continue_token: str
    kind: str = ""


class Incremental(Protocol[T]):
    """Decodes an answer fed to it piece by piece as it arrives, so that a
    large page need not be held whole."""

    # The answer's first bytes, for an error that quotes what came back.
    head: bytes

    def feed(self, piece: bytes) -> None: ...

    def close(self) -> Page[T]: ...


@dataclass(frozen=True, slots=True)
class Version:
    """Where an object is, and at which resourceVersion: all a LIST of
    metadata tells, and all it takes to know that an object is unchanged."""

    namespace: str
    name: str
    uid: str
    resource_version: str
    # What a sharded replica needs to tell whose an object is before it
    # decodes it: the uid of its controller (a pod's bucket is its
    # controller's), and its bucket label ("" when it has none).
    controller_uid: str = ""
    bucket_label: str = ""

    @property
    def known_as(self) -> VersionKey:
        return version_key(self.uid, self.resource_version)


# Objects decoded in an earlier pass, by version_key: they need not be decoded again.
Known = Mapping[VersionKey, T]
