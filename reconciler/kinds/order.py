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

from reconciler.actions import Action, PatchStatus


@dataclass(frozen=True)
class Step:
    """One step: the writes of ``types`` (of child ``kind``, when given).
    ``waits_for``: steps whose writes, when this pass has any, make this
    one's wait for a later pass."""

    name: str
    types: tuple[type, ...]
    kind: str | None = None
    waits_for: tuple[str, ...] = ()

    def takes(self, action: Action) -> bool:
        return isinstance(action, self.types) and (self.kind is None or action.kind == self.kind)


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

    def step_of(self, action: Action) -> int:
        for i, step in enumerate(self.steps):
            if step.takes(action):
                return i
        raise Unplaced(f"{action.describe()}: no step of {[s.name for s in self.steps]}")

    def arranged(self, actions: Sequence[Action]) -> list[Action]:
        """``actions`` in the order of the steps (as planned within one), less
        those of a step that waits for another present in this pass."""
        placed = [(self.step_of(a), a) for a in actions]
        present = {self.steps[i].name for i, _ in placed}
        kept = [(i, a) for i, a in placed if not present.intersection(self.steps[i].waits_for)]
        return [a for _, a in sorted(kept, key=lambda pair: pair[0])]


# The order of a kind whose one write is its status (Xca).
STATUS_ONLY = WriteOrder((Step("status", (PatchStatus,)),))
