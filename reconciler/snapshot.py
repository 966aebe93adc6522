"""One pass's view of the cluster: the planner's whole input besides config and time.

The failure memory is part of it: each object carries its own record, read
from its status, so the view and the memory come from the same LIST."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler.model import Child, Pod


@dataclass(frozen=True)
class Snapshot:
    """Objects of each of our kinds by kind name, and the managed pods.

    A kind that is absent, or ``None``, was not listed completely this pass
    (its LIST failed): nothing that depends on it is written, since a partial
    view would make live objects look deleted.
    """

    objects: Mapping[str, tuple[Any, ...] | None]
    pods: tuple[Pod, ...] | None
    # Namespaces being deleted: nothing can be created there any more.
    terminating: frozenset[str] = frozenset()
    # Why the pod LIST failed, when ``pods`` is None and the next pass will
    # fail it too (a refusal, not a timeout): the statuses that would have
    # counted pods say it instead. None leaves them as they are.
    pods_error: str | None = None
    # Status fields of each kind that the installed CRD prunes (it is older
    # than this release): learnt from what a status write returned, and never
    # asked for again, so a lagging CRD costs no more writes than a current one.
    pruned: Mapping[str, frozenset[str]] = field(default_factory=dict)
    # The objects our kinds make besides pods, by kind (Service): a kind
    # absent, or None, was not listed completely, and is neither created nor
    # repaired this pass.
    children: Mapping[str, tuple[Child, ...] | None] = field(default_factory=dict)
    # Why a kind of child was not listed (None in ``children``), by kind,
    # when the next pass will fail it too, as ``pods_error`` for pods: the
    # status of each object that depends on it says so (Degraded). A
    # timeout, a 429 or a 5xx is not here: the next pass likely sees the
    # kind, and a Degraded condition flipped per timeout would fire a
    # Warning event each time for nothing the user can fix.
    unlisted: Mapping[str, str] = field(default_factory=dict)
    # Of each kind, the objects this pass read added or changed since the
    # pass before (engine/observe/churn.py): the next pass lists a kind that
    # moved a lot in full at once, without a LIST of its metadata first.
    churn: Mapping[str, int] = field(default_factory=dict)
    # The uids of owners missing from their kind's LIST that a GET found gone
    # (404, or another uid: engine/observe/orphans.py): only their pods are
    # deleted as orphans, never on the word of a LIST alone.
    owners_gone: frozenset[str] = frozenset()

    @property
    def listed_children(self) -> frozenset[str]:
        return frozenset(k for k, v in self.children.items() if v is not None)

    def all_children(self) -> tuple[Child, ...]:
        return tuple(c for found in self.children.values() for c in found or ())

    def of(self, kind: str) -> tuple[Any, ...] | None:
        return self.objects.get(kind)
