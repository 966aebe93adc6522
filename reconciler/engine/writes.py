"""One write: the request an action makes, and what the answer means.

404 and 409 mean "see it again next pass" (GONE, CONFLICT); an eviction a
budget refuses, a 429 past the client's retries and any other API error
are raised as the executor's typed failures (`engine/failures.py`), which
it records. AlreadyExists on an object we own (an earlier pass that was
killed after its create) is success.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, assert_never

from reconciler.actions import (
    Action,
    CreateChild,
    CreatePod,
    DeleteChild,
    DeletePod,
    EventSpec,
    EvictPod,
    PatchChild,
    PatchFinalizers,
    PatchLabels,
    PatchPodMetadata,
    PatchStatus,
)
from reconciler.backoff import DEFAULT_REASON
from reconciler.client.errors import (
    ApiError,
    Conflict,
    EvictionRefused,
    KubeError,
    NotFound,
    Throttled,
)
from reconciler.client.interface import Client
from reconciler.engine.failures import (
    NO_STATUS_SUBRESOURCE,
    WriteFailed,
    WriteRefused,
    WriteThrottled,
    conflict_reason,
    failure_reason,
    no_status_subresource,
)
from reconciler.kinds.registry import child_types, kind_of
from reconciler.model import PODS, ObjKey, ResourceType
from reconciler.result import Result


@dataclass
class ObjectRun:
    """What the writes of one object share: our own writes bump its
    resourceVersion, and its pod events are posted once, merged, at the end."""

    new_rv: dict[str, str] = field(default_factory=dict)
    pod_events: list[EventSpec] = field(default_factory=list)


def _resource(key: ObjKey) -> ResourceType:
    kind = kind_of(key)
    if kind is None:
        raise TypeError(f"not one of our kinds: {key.kind}")
    return kind.resource


class Writer:
    """The requests of a pass's writes. ``events`` takes the events a write
    posts at once; ``pruned`` collects the status fields the apiserver
    dropped, by kind: field -> an object it was dropped from."""

    def __init__(self, kube: Client, events: Callable[[Sequence[EventSpec]], None]) -> None:
        self.kube, self._events = kube, events
        self.pruned: dict[str, dict[str, ObjKey]] = {}

    def do(self, action: Action, run: ObjectRun) -> Result:
        """One write; API errors other than the expected ones become WriteFailed."""
        try:
            match action:
                case CreatePod():
                    return self._create_pod(action, run)
                case DeletePod():
                    return self._delete_pod(action, run)
                case PatchFinalizers():
                    return self._patch_finalizers(action, run)
                case PatchStatus():
                    return self._patch_status(action, run)
                case PatchPodMetadata():
                    return self._patch_pod(action, run)
                case PatchLabels():
                    return self._patch_labels(action, run)
                case CreateChild():
                    return self._create_child(action, run)
                case PatchChild():
                    return self._patch_child(action, run)
                case EvictPod():
                    return self._evict_pod(action, run)
                case DeleteChild():
                    return self._delete_child(action)
                case _:
                    assert_never(action)
        except EvictionRefused as exc:
            raise WriteRefused(exc.why) from None
        except Throttled as exc:
            raise WriteThrottled(f"{exc.status} {exc.reason}: {exc.message}") from None
        except ApiError as exc:
            raise WriteFailed(
                f"{exc.status} {exc.reason}: {exc.message}", failure_reason(exc)
            ) from None
        except KubeError as exc:
            raise WriteFailed(str(exc), DEFAULT_REASON) from None

    def _create_pod(self, action: CreatePod, run: ObjectRun) -> Result:
        target = action.target
        try:
            self.kube.create(PODS, target.namespace, action.manifest)
        except Conflict:
            return self._already_exists(action)
        if action.event:
            run.pod_events.append(action.event)
        return Result.OK

    def _already_exists(self, action: CreatePod | CreateChild) -> Result:
        """AlreadyExists: fine if the object is ours (an earlier, interrupted pass)."""
        target = action.target
        res = PODS if isinstance(action, CreatePod) else _child(action.kind)
        try:
            found = self.kube.get(res, target.namespace, target.name)
        except NotFound:
            return Result.CONFLICT  # deleted meanwhile; the next pass creates it
        if not action.owner_uid:
            return Result.CONFLICT  # owned by none: the next pass sees whose it is
        refs = (found.get("metadata") or {}).get("ownerReferences") or []
        if any(r.get("controller") and r.get("uid") == action.owner_uid for r in refs):
            return Result.OK
        raise WriteFailed(
            f"{res.kind.lower()} {target.name} already exists and is not owned by this "
            f"{action.owner.kind}",
            conflict_reason(res.kind),
        )

    def _create_child(self, action: CreateChild, run: ObjectRun) -> Result:
        target = action.target
        try:
            self.kube.create(_child(action.kind), target.namespace, action.manifest)
        except Conflict:
            return self._already_exists(action)
        if action.event:
            self._events([action.event])
        return Result.OK

    def _patch_child(self, action: PatchChild, run: ObjectRun) -> Result:
        body = dict(action.body)
        meta = {**(body.get("metadata") or {}), "resourceVersion": action.resource_version}
        body["metadata"] = meta
        res = _child(action.kind)
        result = self._patch(action.target, action.resource_version, body, "", run, res)
        if result is Result.OK and action.event:
            self._events([action.event])
        return result

    def _delete_pod(self, action: DeletePod, run: ObjectRun) -> Result:
        try:
            self.kube.delete(PODS, action.namespace, action.name, action.uid)
        except NotFound:
            return Result.GONE
        if action.event:
            run.pod_events.append(action.event)
        return Result.OK

    def _evict_pod(self, action: EvictPod, run: ObjectRun) -> Result:
        try:
            self.kube.evict(action.namespace, action.name, action.uid)
        except NotFound:
            return Result.GONE
        except Conflict:
            return Result.CONFLICT  # the uid precondition: a new pod of that name
        if action.event:
            run.pod_events.append(action.event)
        return Result.OK

    def _delete_child(self, action: DeleteChild) -> Result:
        target = action.target
        try:
            self.kube.delete(_child(action.kind), target.namespace, target.name, action.uid)
        except (NotFound, Conflict):
            return Result.GONE  # gone, or replaced: the next pass sees which
        return Result.OK

    def _patch_finalizers(self, action: PatchFinalizers, run: ObjectRun) -> Result:
        rv = run.new_rv.get(action.resource_version, action.resource_version)
        body = {"metadata": {"finalizers": list(action.finalizers), "resourceVersion": rv}}
        return self._patch(action.owner, action.resource_version, body, "", run)

    def _patch_labels(self, action: PatchLabels, run: ObjectRun) -> Result:
        rv = run.new_rv.get(action.resource_version, action.resource_version)
        body = {"metadata": {"labels": dict(action.labels), "resourceVersion": rv}}
        return self._patch(action.owner, action.resource_version, body, "", run)

    def _patch_status(self, action: PatchStatus, run: ObjectRun) -> Result:
        rv = run.new_rv.get(action.resource_version, action.resource_version)
        body = {"metadata": {"resourceVersion": rv}, "status": dict(action.status)}
        out: dict[str, Any] = {}
        result = self._patch(action.owner, action.resource_version, body, "status", run, out=out)
        if result is Result.OK:
            self._events(action.events)
            self._pruned(action, out)
        return result

    def _exists(self, res: ResourceType, key: ObjKey) -> bool:
        """After a 404 on its status: the object is there, so the CRD serves no
        status subresource (the apiserver says "not found" of both)."""
        try:
            self.kube.get(res, key.namespace, key.name)
        except KubeError:
            return False
        return True

    def _pruned(self, action: PatchStatus, out: Mapping[str, Any]) -> None:
        """Note the fields we set that the stored status lacks: a CRD older
        than this release prunes them, and asking again would write every pass."""
        stored = out.get("status") or {}
        gone = [k for k, v in action.status.items() if v is not None and k not in stored]
        kind = self.pruned.setdefault(action.owner.kind, {})
        for name in gone:
            kind.setdefault(name, action.owner)

    def _patch_pod(self, action: PatchPodMetadata, run: ObjectRun) -> Result:
        body = action.body(action.resource_version)
        result = self._patch(action.target, action.resource_version, body, "", run, PODS)
        if result is Result.OK and action.event:
            self._events([action.event])
        return result

    def _patch(
        self,
        key: ObjKey,
        observed_rv: str,
        body: dict[str, Any],
        sub: str,
        run: ObjectRun,
        res: ResourceType | None = None,
        out: dict[str, Any] | None = None,
    ) -> Result:
        """A merge patch guarded by resourceVersion; 409 and 404 mean "next
        pass". ``out`` receives the object the apiserver returned."""
        res = res or _resource(key)
        try:
            answer = self.kube.merge_patch(res, key.namespace, key.name, body, sub)
        except NotFound:
            if sub == "status" and self._exists(res, key):
                raise WriteFailed(no_status_subresource(res), NO_STATUS_SUBRESOURCE) from None
            return Result.GONE
        except Conflict:
            return Result.CONFLICT
        if out is not None:
            out.update(answer)
        sent_rv = body["metadata"]["resourceVersion"]
        meta = answer.get("metadata") or {}
        run.new_rv[observed_rv] = str(meta.get("resourceVersion", sent_rv))
        return Result.OK


def _child(kind: str) -> ResourceType:
    """Where a child of ``kind`` lives, as its owner's kind declares it."""
    return child_types()[kind].resource
