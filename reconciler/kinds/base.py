"""What every kind provides, so that the client, observe, plan and apply can
treat all kinds alike: where it lives in the API, how to decode it, and how to
plan it."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from datetime import datetime
from sys import intern
from typing import Any, ClassVar, Generic, Self, TypeVar

from reconciler.actions import Action, ObjRef
from reconciler.backoff import Failure, Gate, from_status
from reconciler.children import ChildType
from reconciler.config import Config
from reconciler.constants import LABEL_MANAGED_BY, MANAGED_BY
from reconciler.health import Health
from reconciler.kinds.order import STATUS_ONLY, WriteOrder
from reconciler.model import (
    LABEL_BUCKET,
    ObjKey,
    Pod,
    PodLookup,
    ResourceType,
    generation_of,
    mapping,
    meta_of,
    shared,
)
from reconciler.untrusted import dns_subdomain


@dataclass(frozen=True, kw_only=True, slots=True)
class Object:
    """What every object of our kinds is decoded with (`decoded`): its
    metadata, its status, and the failure record that status holds. A kind
    subclasses it with its own fields (a spec, finalizers) and its
    ``resource``, so that the engine reads every kind's objects alike."""

    resource: ClassVar[ResourceType]
    namespace: str
    name: str
    uid: str
    resource_version: str
    generation: int
    deletion_timestamp: str | None
    status: Mapping[str, Any]
    failure: Failure | None = None  # status.backoff: consecutive failed passes
    bucket_label: str | None = None  # its shard bucket label, if any (engine/plan.py)

    @property
    def key(self) -> ObjKey:
        return ObjKey(self.resource.kind, self.namespace, self.name)

    @classmethod
    def decoded(cls, obj: Mapping[str, Any], **own: Any) -> Self:
        """``obj`` as read, with the fields of its kind (``own``): the status
        kept raw, its failure record decoded once."""
        meta = meta_of(obj)
        status = mapping(shared(obj.get("status")))
        return cls(
            namespace=intern(str(meta.get("namespace", ""))),
            name=str(meta.get("name", "")),
            uid=intern(str(meta.get("uid", ""))),
            resource_version=str(meta.get("resourceVersion", "")),
            generation=generation_of(meta),
            deletion_timestamp=meta.get("deletionTimestamp"),
            status=status,
            failure=from_status(status),
            bucket_label=mapping(meta.get("labels")).get(LABEL_BUCKET),
            **own,
        )


@dataclass(frozen=True)
class PlanInput:
    """What a kind's planner may read about one object's world this pass."""

    pods: PodLookup
    config: Config
    now: datetime
    gate: Gate
    # While held after a failed write: the writes of this object that landed
    # before it, so the status counts them (nothing else is planned then).
    landed: frozenset[tuple[str, ObjKey]] = frozenset()  # (verb, target)
    # Its namespace is being deleted: nothing can be created there any more.
    namespace_terminating: bool = False
    # The sharded replica that holds its bucket (status.shard); None unsharded.
    holder: str | None = None
    # The kinds of child object (Service) listed completely this pass: only
    # those may be created or repaired.
    children: frozenset[str] = frozenset()
    # Of the kinds not listed, why, when the next pass will fail them too
    # (`Snapshot.unlisted`): the status of an object that needs one says so.
    unlisted: Mapping[str, str] = field(default_factory=dict)
    # Set only for the status written right after a disruption budget refused
    # an eviction of one of its pods: (pod, the apiserver's words).
    refused: tuple[str, str] | None = None
    # Its kind's settings under ``config`` (`Kind.settings_in`), found once a
    # pass rather than once an object; None for a kind without settings.
    settings: object | None = None


@dataclass(frozen=True)
class Planned:
    """One object's plan: its writes, and its status rule for the pass in
    which one of them fails. The rule is given the input as it stands then
    (``gate`` held with the failure counted, ``landed``, ``refused``) and
    returns the status writes; it reuses what the plan already worked out
    (the object's pods and their changes) rather than plan it again. None:
    the kind has no status to say it (or nothing to say)."""

    actions: list[Action]
    status_after: Callable[[PlanInput], list[Action]] | None = None


T = TypeVar("T", bound=Object)
S = TypeVar("S")


@dataclass(frozen=True)
class Bound:
    """A status rule bound to one object (and to what its plan worked out):
    ``rule(*args, inp)``. A value, not a closure, so that two plans of one
    snapshot compare equal."""

    rule: Callable[..., list[Action]]
    args: tuple[Any, ...]

    def __call__(self, inp: PlanInput) -> list[Action]:
        return self.rule(*self.args, inp)


@dataclass(frozen=True)
class StatusOnly(Generic[T]):
    """The plan of a kind whose one write is its status: after a failure,
    that plan, given the held input, is the status that says so."""

    plan: Callable[[T, PlanInput], list[Action]]

    def __call__(self, obj: T, inp: PlanInput) -> Planned:
        return Planned(self.plan(obj, inp), Bound(self.plan, (obj,)))


def settings_of(config: Config, defaults: S) -> S:
    """A kind's settings under ``config``: those the settings were read into
    (`Config.kind_settings`), or the kind's defaults."""
    for found in config.kind_settings:
        if isinstance(found, type(defaults)):
            return found
    return defaults


@dataclass(frozen=True)
class Kind(Generic[T]):
    """One of our kinds. ``plan_unseen``, for a kind whose planner needs the
    pod LIST: in a pass whose pod LIST was refused, nothing of it is planned
    but what this returns, a status that says why (the third argument).
    ``owns_pods``: managed pods whose controlling object of this kind is gone
    are deleted as orphans."""

    resource: ResourceType
    component: str  # the source of its events
    decode: Callable[[Mapping[str, Any]], T]
    plan: Callable[[T, PlanInput], Planned]
    # Its health once the given actions (its plan, or a status written after
    # a failure) have landed.
    health: Callable[[T, Sequence[Action]], Health]
    plan_unseen: Callable[[T, PlanInput, str], list[Action]] | None = None
    owns_pods: bool = False
    # The names its pods should have. A pass lists only the pods that carry
    # our label; a desired name not among them is looked up by name, so that
    # a foreign pod holding it, or ours with its labels removed, is seen.
    pod_names: Callable[[T], Iterable[str]] | None = None
    # The types of object it makes besides pods (a Redis's Service), with
    # what its rules read of them: what a pass lists and decodes, and, with
    # ``order``, what `reconciler check` and `manifests` grant (checks/needs.py).
    children: tuple[ChildType, ...] = ()
    # The (kind, name) of each child object it makes besides pods (its
    # Service): looked up by name when the labelled LIST does not show it,
    # for the same reasons as a pod.
    child_names: Callable[[T], Iterable[tuple[str, str]]] | None = None
    # The order of its writes (kinds/order.py), the sharded replica's among
    # them: the planner arranges each object's actions by it; the executor
    # runs them in that order; its steps say which verbs it needs.
    order: WriteOrder = STATUS_ONLY
    # Its own settings: a frozen dataclass of its defaults. Each field is a
    # key of the config file and a RECONCILER_<KEY> variable; one whose
    # metadata has a "flag" (its help) is a global option too, and one with
    # "positive" must be greater than 0. Its rules read them with `settings_of`.
    settings: object | None = None
    # Whether a name can be one of its objects': the owner named by a pod's
    # controller reference is asked for only then (engine/observe/orphans.py).
    name_valid: Callable[[str], bool] = dns_subdomain

    def settings_in(self, config: Config) -> object | None:
        """Its settings under ``config``; None for a kind without settings."""
        return None if self.settings is None else settings_of(config, self.settings)

    @property
    def reads_pods(self) -> bool:
        return self.plan_unseen is not None

    @property
    def name(self) -> str:
        return self.resource.kind

    def ref(self, obj: Object) -> ObjRef:
        """The involvedObject of events about ``obj``."""
        res = self.resource
        return ObjRef(res.api_version, res.kind, obj.namespace, obj.name, obj.uid)

    def orphaned(self, pod: Pod, listed: Set[str]) -> bool:
        """Is ``pod`` a live pod of ours whose controller, of this kind, is
        not among the ``listed`` uids? Only a candidate: its owner must still
        be confirmed gone (engine/observe/orphans.py)."""
        return (
            self.owns_pods
            and pod.labels.get(LABEL_MANAGED_BY) == MANAGED_BY
            and pod.controller_kind == self.name
            and bool(pod.controller_uid)
            and pod.controller_uid not in listed
            and not pod.terminating
        )
