"""The writes a pass may make, as plain values.

The planner returns these and the executor is the only code that turns them
into requests, so `reconciler plan` and `--dry-run` show exactly what a real
pass would send.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from reconciler.backoff import WriteError
from reconciler.health import Health, not_ready
from reconciler.model import PODS, ObjKey
from reconciler.settled import NOTHING_SETTLED, Settled


class Verb(StrEnum):
    """What an action does; its value is the word in logs, summaries and metrics."""

    CREATE = "create"
    DELETE = "delete"
    PATCH_FINALIZERS = "patch-finalizers"
    PATCH_STATUS = "patch-status"
    PATCH_METADATA = "patch-metadata"
    PATCH_LABELS = "patch-labels"
    PATCH = "patch"  # a child object's fields we set, put back
    EVICT = "evict"  # a pod deleted through the Eviction API


@dataclass(frozen=True, slots=True)
class ObjRef:
    """An involvedObject for events."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str


@dataclass(frozen=True, slots=True)
class EventSpec:
    """An event to post. ``pods`` and ``why`` are set on pod events (see
    `pod_event`) so that the executor can merge them without reading
    ``message``, which is what users see."""

    involved: ObjRef
    type: str  # Normal or Warning
    reason: str
    message: str
    component: str
    pods: tuple[str, ...] = ()
    why: str | None = None


POD_EVENT_VERBS = {"CreatePod": "Created", "DeletePod": "Deleted", "EvictPod": "Evicted"}


def pod_event_message(reason: str, pods: Sequence[str], why: str) -> str:
    """The text users see: "Created pod r-0: scale up", "Created pods r-0, r-1: scale up"."""
    noun = "pod" if len(pods) == 1 else "pods"
    return f"{POD_EVENT_VERBS[reason]} {noun} {', '.join(pods)}: {why}"


def pod_event(
    involved: ObjRef, reason: str, pods: Sequence[str], why: str, component: str
) -> EventSpec:
    """A Normal CreatePod or DeletePod event naming ``pods``."""
    message = pod_event_message(reason, pods, why)
    return EventSpec(involved, "Normal", reason, message, component, tuple(pods), why)


@dataclass(frozen=True, slots=True)
class CreatePod:
    """Create the pod ``name`` from ``template``: a pod manifest without a
    name, shared by the creates of one object. A first pass over 1,000 Redis
    plans 3,000 creates, and a manifest of their own held 1.3 kB each until
    the pass ended; this one is made when it is sent. As a StatefulSet's
    pods, the pod's hostname is its name."""

    owner: ObjKey
    name: str
    template: Mapping[str, Any]
    event: EventSpec | None = None
    # (volume, claim) of each claim of this pod alone, as a StatefulSet's
    # volumeClaimTemplates give each pod its own (a Redis's data-<pod>).
    claims: tuple[tuple[str, str], ...] = ()
    verb: Verb = field(default=Verb.CREATE, init=False)
    kind: str = field(default=PODS.kind, init=False)

    @property
    def manifest(self) -> dict[str, Any]:
        meta = {"name": self.name, **self.template["metadata"]}
        spec = {**self.template["spec"], "hostname": self.name}
        if self.claims:
            spec["volumes"] = [
                {"name": volume, "persistentVolumeClaim": {"claimName": claim}}
                for volume, claim in self.claims
            ]
        return {**self.template, "metadata": meta, "spec": spec}

    @property
    def target(self) -> ObjKey:
        return ObjKey(PODS.kind, self.template["metadata"]["namespace"], self.name)

    @property
    def owner_uid(self) -> str:
        return str(self.template["metadata"]["ownerReferences"][0]["uid"])

    def describe(self) -> str:
        return f"create pod {self.target}" + (f" ({self.event.message})" if self.event else "")


@dataclass(frozen=True, slots=True)
class _PodRemoval:
    """A pod taken away: its name, and its uid as a precondition, so that a
    new pod of the same name is never hit."""

    owner: ObjKey
    namespace: str
    name: str
    uid: str
    why: str
    event: EventSpec | None = None

    @property
    def target(self) -> ObjKey:
        return ObjKey(PODS.kind, self.namespace, self.name)


@dataclass(frozen=True, slots=True)
class DeletePod(_PodRemoval):
    verb: Verb = field(default=Verb.DELETE, init=False)
    kind: str = field(default=PODS.kind, init=False)

    def describe(self) -> str:
        return f"delete pod {self.target} ({self.why})"


@dataclass(frozen=True, slots=True)
class EvictPod(_PodRemoval):
    """Delete a serving pod through the Eviction API, so that every
    disruption budget that selects it (ours or another's) is honoured. A
    refusal leaves the pod, and a later pass asks again."""

    verb: Verb = field(default=Verb.EVICT, init=False)
    kind: str = field(default=PODS.kind, init=False)

    def describe(self) -> str:
        return f"evict pod {self.target} ({self.why})"


class _OnOwner:
    """An action on the owner itself: its kind and target are the owner's."""

    __slots__ = ()
    owner: ObjKey

    @property
    def kind(self) -> str:
        return self.owner.kind

    @property
    def target(self) -> ObjKey:
        return self.owner


@dataclass(frozen=True, slots=True)
class PatchFinalizers(_OnOwner):
    """Replace the finalizer list, guarded by resourceVersion.

    A merge patch replaces lists whole, so without the resourceVersion guard a
    concurrent writer's finalizer could be dropped.
    """

    owner: ObjKey
    resource_version: str
    finalizers: tuple[str, ...]
    why: str
    verb: Verb = field(default=Verb.PATCH_FINALIZERS, init=False)

    def describe(self) -> str:
        return f"patch {self.owner.kind.lower()} {self.owner} finalizers ({self.why})"


@dataclass(frozen=True, slots=True)
class PatchStatus(_OnOwner):
    owner: ObjKey
    resource_version: str
    status: Mapping[str, Any]
    events: tuple[EventSpec, ...] = ()
    # The fields that differ from the status as listed: what the log and
    # `plan` name. The patch still carries every field the kind sets: a write
    # after a failure, in the same run, may follow one of our own.
    changed: tuple[str, ...] = ()
    verb: Verb = field(default=Verb.PATCH_STATUS, init=False)

    def describe(self) -> str:
        keys = ", ".join(self.changed or sorted(self.status))
        return f"patch {self.owner.kind.lower()} {self.owner} status ({keys})"


@dataclass(frozen=True, slots=True)
class PatchPodMetadata:
    """Put back what was changed by hand on a pod's metadata: the labels and
    annotations we set (others are left alone) and, if it drifted, the
    controller reference (the list is replaced whole, so the patch is guarded
    by resourceVersion)."""

    owner: ObjKey
    namespace: str
    name: str
    resource_version: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    owner_references: tuple[Mapping[str, Any], ...] | None
    why: str
    event: EventSpec | None = None
    verb: Verb = field(default=Verb.PATCH_METADATA, init=False)
    kind: str = field(default=PODS.kind, init=False)

    @property
    def target(self) -> ObjKey:
        return ObjKey(PODS.kind, self.namespace, self.name)

    def body(self, resource_version: str) -> dict[str, Any]:
        meta: dict[str, Any] = {"resourceVersion": resource_version}
        if self.labels:
            meta["labels"] = dict(self.labels)
        if self.annotations:
            meta["annotations"] = dict(self.annotations)
        if self.owner_references is not None:
            meta["ownerReferences"] = [dict(r) for r in self.owner_references]
        return {"metadata": meta}

    def describe(self) -> str:
        return f"patch pod {self.target} metadata ({self.why})"


@dataclass(frozen=True, slots=True)
class PatchLabels(_OnOwner):
    """Set labels of one of our objects (the shard bucket, which a sharded
    replica's LISTs select on), guarded by resourceVersion; other labels are
    left alone."""

    owner: ObjKey
    resource_version: str
    labels: Mapping[str, str]
    why: str
    verb: Verb = field(default=Verb.PATCH_LABELS, init=False)

    def describe(self) -> str:
        return f"patch {self.owner.kind.lower()} {self.owner} labels ({self.why})"


@dataclass(frozen=True, slots=True)
class CreateChild:
    """Create an object one of ours makes besides pods (a Redis's Service)."""

    owner: ObjKey
    manifest: Mapping[str, Any]
    event: EventSpec | None = None
    verb: Verb = field(default=Verb.CREATE, init=False)

    @property
    def kind(self) -> str:
        return str(self.manifest["kind"])

    @property
    def target(self) -> ObjKey:
        meta = self.manifest["metadata"]
        return ObjKey(self.kind, meta["namespace"], meta["name"])

    @property
    def owner_uid(self) -> str:
        """Its controller's uid; "" for an object made to outlive its owner
        (a claim kept after its Redis is deleted) and so owned by none."""
        refs = self.manifest["metadata"].get("ownerReferences") or ()
        return str(refs[0]["uid"]) if refs else ""

    def describe(self) -> str:
        return f"create {self.kind.lower()} {self.target}"


@dataclass(frozen=True, slots=True)
class PatchChild:
    """Put back the fields we set on a child object, by a merge patch guarded
    by resourceVersion; fields others set are not in it."""

    owner: ObjKey
    target: ObjKey
    resource_version: str
    body: Mapping[str, Any]  # the patch, without its resourceVersion
    why: str
    event: EventSpec | None = None
    verb: Verb = field(default=Verb.PATCH, init=False)

    @property
    def kind(self) -> str:
        return self.target.kind

    def describe(self) -> str:
        return f"patch {self.kind.lower()} {self.target} ({self.why})"


@dataclass(frozen=True, slots=True)
class DeleteChild:
    """Delete a child object we no longer want (the budget of a Redis scaled
    to one pod), with a uid precondition."""

    owner: ObjKey
    target: ObjKey
    uid: str
    why: str
    verb: Verb = field(default=Verb.DELETE, init=False)

    @property
    def kind(self) -> str:
        return self.target.kind

    def describe(self) -> str:
        return f"delete {self.kind.lower()} {self.target} ({self.why})"


Action = (
    CreatePod
    | DeletePod
    | EvictPod
    | PatchFinalizers
    | PatchStatus
    | PatchPodMetadata
    | PatchLabels
    | CreateChild
    | PatchChild
    | DeleteChild
)


# The status of an object right after one of its writes failed (the error,
# and the writes of it that landed before): the status writes that say so.
StatusAfter = Callable[[WriteError, Sequence[Action]], list[Action]]


@dataclass(frozen=True)
class OwnerWrites:
    """What the executor needs of an object it writes for, beyond the
    writes: where its events go (None: an orphan pod, which has no object
    to name), its uid (a gone owner's, for an orphan pod: the write fence
    asks whether its shard bucket is held), and its status rule after a
    failed write."""

    ref: ObjRef | None
    owner_uid: str
    status_after: StatusAfter | None = None


@dataclass(frozen=True)
class Plan:
    """Actions in order; actions of one owner must run in the order given.

    ``backing_off`` lists objects held this pass because of repeated
    failures. ``owners``: each owner of an action, as the executor needs it.
    """

    actions: tuple[Action, ...] = ()
    backing_off: frozenset[ObjKey] = frozenset()
    health: Mapping[ObjKey, Health] = field(default_factory=dict)  # once the actions land
    settled: Settled = NOTHING_SETTLED  # what the next pass may skip
    # Not compared: their status rules read the pass's own pod index.
    owners: Mapping[ObjKey, OwnerWrites] = field(default_factory=dict, compare=False)

    @property
    def pending(self) -> dict[ObjKey, Health]:
        """The objects that will not be Ready after this plan, and why."""
        return not_ready(self.health)

    def by_owner(self) -> dict[ObjKey, list[Action]]:
        groups: dict[ObjKey, list[Action]] = {}
        for action in self.actions:
            groups.setdefault(action.owner, []).append(action)
        return groups
