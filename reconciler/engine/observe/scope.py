"""A sharded replica's scope: what its LISTs select, and what it keeps of
what they return.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from reconciler.buckets import Scope, bucket_of
from reconciler.constants import MANAGED_POD_SELECTOR
from reconciler.kinds import registry
from reconciler.model import (
    LABEL_BUCKET,
    PODS,
    Child,
    Pod,
    ResourceType,
    Version,
)


@dataclass(frozen=True)
class Selection:
    """What the LISTs of a pass ask for: our pods, and each kind's objects
    (None: all of them)."""

    pods: str
    objects: str | None

    @property
    def selective(self) -> bool:
        return self.objects is not None


def selection(scope: Scope | None) -> Selection:
    """Everything, or (a sharded replica) the objects and pods labelled with
    a bucket it holds, or with none yet: one LIST of each kind, as `notin`
    the other buckets selects both. Pods not labelled yet that hold a name
    the objects want are found by name too, as any pod missing from the LIST
    is (`with_named`)."""
    if scope is None or not scope.select or not scope.held or len(scope.held) == scope.total:
        return Selection(MANAGED_POD_SELECTOR, None)
    ours = f"{LABEL_BUCKET} notin ({scope.others})"
    return Selection(f"{MANAGED_POD_SELECTOR},{ours}", ours)


class Sorter:
    """Keeps what is in a sharded replica's scope (everything without one),
    and notes the buckets of what its LISTs returned under the label of a
    held bucket but is not its own: a label changed by hand. Only the holder
    of the true bucket may put it back, and its LISTs do not select it; told
    (`Holder.report`), it lists everything once and finds it."""

    def __init__(self, scope: Scope | None) -> None:
        self.scope = scope
        self.mislabelled: set[int] = set()

    def keeps(self, uid: str, label: str | None) -> bool:
        """``uid``: the object's, or a pod's controller's (its own without one)."""
        scope = self.scope
        if scope is None or scope.covers(uid):
            return True
        if scope.claims(label):
            self.mislabelled.add(bucket_of(uid, scope.total))
        return False

    def keep(self, res: ResourceType) -> Callable[[Version], bool] | None:
        """What to keep of a LIST of ``res``'s metadata; None: all of it."""
        scope = self.scope
        types = registry.child_types()
        child = types.get(res.kind)
        if scope is None or len(scope.held) == scope.total or (child and not child.bucketed):
            return None
        if res == PODS or child is not None:
            return lambda v: self.keeps(v.controller_uid or v.uid, v.bucket_label)
        return lambda v: self.keeps(v.uid, v.bucket_label)

    def pods(self, pods: tuple[Pod, ...] | None) -> tuple[Pod, ...] | None:
        """The pods of the objects in scope: a pod is in its controller's
        bucket (its own, if it has no controller)."""
        if self.scope is None or pods is None:
            return pods
        return tuple(
            p for p in pods if self.keeps(p.controller_uid or p.uid, p.labels.get(LABEL_BUCKET))
        )

    def children(self, children: tuple[Child, ...] | None) -> tuple[Child, ...] | None:
        """Those of the objects in scope, as pods: by their controller. Those
        of a type not bucketed (`ChildType.bucketed`: claims) are all kept."""
        if self.scope is None or children is None:
            return children
        whole = {c.kind for c in registry.child_types().values() if not c.bucketed}
        return tuple(
            c for c in children if c.kind in whole or self.keeps(c.controller_uid or c.uid, None)
        )

    def objects(self, objects: tuple[Any, ...] | None) -> tuple[Any, ...] | None:
        if self.scope is None or objects is None:
            return objects
        return tuple(o for o in objects if self.keeps(o.uid, o.bucket_label))
