"""The order of a kind's writes, declared in one place.

Each kind says which of its writes run first, which after, and which must not
share a pass with another (they wait for the next). The planner arranges each
object's actions by it, and the executor runs them in that order, stopping at
the first that does not land. Before this, the order was a list
concatenation in the kind's planner, and a write moved by accident met a 409
of our own making (a budget patched while its pods changed, a status written
before the pod it counts).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from reconciler.actions import Action, PatchLabels, PatchPodMetadata, PatchStatus


@dataclass(frozen=True)
class Step:
    """One step: the writes of ``types`` (of child ``kind``, when given).
    ``waits_for``: steps whose writes, when this pass has any, make this
    one's wait for a later pass."""

    name: str
    types: tuple[type, ...]
    kind: str | None = None
    waits_for: tuple[str, ...] = ()
    # Only the writes made for this reason (their ``why``); a step with one
    # is asked before the steps without.
    why: str | None = None

    def takes(self, action: Action) -> bool:
        return (
            isinstance(action, self.types)
            and (self.kind is None or action.kind == self.kind)
            and (self.why is None or getattr(action, "why", None) == self.why)
        )


class Unplaced(TypeError):
    """A write no step of its kind's order takes: a planner bug, found by the
    first test that plans it, never a guess at its place."""


@dataclass(frozen=True)
class WriteOrder:
    steps: tuple[Step, ...]

    def __post_init__(self) -> None:
        names = [s.name for s in self.steps]
        unknown = {w for s in self.steps for w in s.waits_for} - set(names)
        if len(set(names)) != len(names) or unknown:
            why = f"names repeat, or waits_for names steps nowhere: {unknown}"
            raise ValueError(f"steps {names}: {why}")
        if self.steps[0] != BUCKET_LABEL or self.steps[-1] != POD_BUCKET_LABELS:
            raise ValueError(f"steps {names}: sharded steps first and last (`sharded`)")

    def step_of(self, action: Action) -> int:
        for i in self._asked:
            if self.steps[i].takes(action):
                return i
        raise Unplaced(f"{action.describe()}: no step of {[s.name for s in self.steps]}")

    @property
    def _asked(self) -> list[int]:
        """The steps' indices, those for one reason (`Step.why`) first."""
        return sorted(range(len(self.steps)), key=lambda i: self.steps[i].why is None)

    def arranged(self, actions: Sequence[Action]) -> list[Action]:
        """``actions`` in the order of the steps (as planned within one), less
        those of a step that waits for another present in this pass."""
        placed = [(self.step_of(a), a) for a in actions]
        present = {self.steps[i].name for i, _ in placed}
        kept = [(i, a) for i, a in placed if not present.intersection(self.steps[i].waits_for)]
        return [a for _, a in sorted(kept, key=lambda pair: pair[0])]


# A sharded replica's writes of the shard bucket label (engine/plan.py
# `bucket_labels`): on the object before anything else, so that the replica
# holding its bucket finds it with a LIST selected on the label; on pods it
# already has after every other write, so that a pod written meanwhile (409)
# holds nothing back.
BUCKET_LABEL_WHY = "shard bucket"
BUCKET_LABEL = Step("bucket label", (PatchLabels,))
POD_BUCKET_LABELS = Step("pod bucket labels", (PatchPodMetadata,), why=BUCKET_LABEL_WHY)


def sharded(*steps: Step) -> WriteOrder:
    """A kind's order: its own ``steps``, between the sharded replica's."""
    return WriteOrder((BUCKET_LABEL, *steps, POD_BUCKET_LABELS))


# The order of a kind whose one write is its status (Xca).
STATUS_ONLY = sharded(Step("status", (PatchStatus,)))
