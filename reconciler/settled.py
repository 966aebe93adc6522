"""The objects whose last plan was empty, and the inputs it was planned from.

A daemon (and `sync --wait`) plans the same converged objects pass after
pass. An object whose own resourceVersion is unchanged, whose pod lookups
(see `reconciler.model.RecordingLookup`) would return the same pods at the
same versions, under the same config and namespace state, gets the same empty
plan again, so the planner reuses the result instead of re-running the rules.

Time does not enter. An object is settled only if it has no failure record:
then no backoff gate depends on the clock. Its plan was empty: then no
condition flipped, and a flip is one place the rules read the clock
(lastTransitionTime). It is not progressing: the others are the progress
deadline and the age of a pod stuck terminating, which only a progressing
object reads. Nothing here is read from or written to the cluster: a
one-shot pass starts with nothing settled and plans everything, and gets the
same plan.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from reconciler.config import Config
from reconciler.health import Health
from reconciler.model import ObjKey, PodIndex, PodRead


@dataclass(frozen=True, slots=True)
class SettledObject:
    uid: str
    resource_version: str
    closing: bool  # its namespace was being deleted
    reads: tuple[PodRead, ...]
    health: Health

    def holds(self, uid: str, resource_version: str, closing: bool, pods: PodIndex) -> bool:
        """Would the object, seen now, get the same empty plan?"""
        return (
            self.resource_version == resource_version
            and self.uid == uid
            and self.closing == closing
            and all(pods.answers(read) for read in self.reads)
        )


@dataclass(frozen=True)
class Settled:
    """What one pass leaves the next; valid only under the config it was planned with."""

    config: Config | None = None
    objects: Mapping[ObjKey, SettledObject] = field(default_factory=dict)

    def under(self, config: Config) -> Mapping[ObjKey, SettledObject]:
        return self.objects if self.config == config else {}


NOTHING_SETTLED = Settled()
