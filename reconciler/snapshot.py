"""One pass's view of the cluster: the planner's whole input besides config and time."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler.backoff import Failure
from reconciler.model import ObjKey, Pod


@dataclass(frozen=True)
class Snapshot:
    """Objects of each of our kinds by kind name, and the managed pods.

    A kind that is absent, or ``None``, was not listed completely this pass
    (its LIST failed): nothing that depends on it is written, since a partial
    view would make live objects look deleted.
    """

    objects: Mapping[str, tuple[Any, ...] | None]
    pods: tuple[Pod, ...] | None
    failures: Mapping[ObjKey, Failure] = field(default_factory=dict)

    def of(self, kind: str) -> tuple[Any, ...] | None:
        return self.objects.get(kind)
