"""Where an object stands, in one value every layer can read: the planner
fills it, `reconciler plan` and `sync -o json` explain it, metrics count it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.model import ObjKey

READY = "Ready"  # the state of an object with nothing left to do
# The state of an object whose spec asks that it be left as it is (spec.paused):
# not Ready, since its spec may not be carried out, and not in motion either.
PAUSED = "Paused"


@dataclass(frozen=True, slots=True)
class Health:
    """Where an object stands once this pass's writes land: the state column
    of `kubectl get`, what `reconciler plan` explains, what the metrics count.
    ``state`` is READY, or the reason it is not (a Degraded reason first)."""

    state: str
    message: str
    degraded: bool = False
    progressing: bool = False
    # Progressing=False/ProgressDeadlineExceeded: its pods stopped moving
    # before they were all Ready.
    stalled: bool = False
    # Its next step waits on another's decision (an eviction a disruption
    # budget refused, asked again): no pass of ours brings it closer, so
    # none comes early.
    waiting: bool = False

    @property
    def ready(self) -> bool:
        return self.state == READY


def not_ready(health: Mapping[ObjKey, Health]) -> dict[ObjKey, Health]:
    return {k: h for k, h in sorted(health.items()) if not h.ready}


def not_ready_json(health: Mapping[ObjKey, Health]) -> list[dict[str, Any]]:
    """The ``not_ready`` list of `plan -o json` and `sync -o json`."""
    return [
        {"object": f"{k.kind} {k}", "state": h.state, "message": h.message}
        for k, h in not_ready(health).items()
    ]
