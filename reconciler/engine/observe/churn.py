"""How much of each kind changed since the pass before, and so how the next
pass lists it.

A pass that saw a kind before lists its metadata first and fetches only
what changed (`lister`). Past FETCH_MAX changes it lists the kind in full as
well, so while a kind moves (pods starting or rolling, statuses this
controller patched, budgets the disruption controller counts) every pass
paid for both LISTs. On 1,000 Redis (3,000 pods) the metadata LIST of pods
costs the apiserver about 60% of the full one, that of Redis about 30%.

A kind's churn is the number of its objects that this pass read added or
changed since the pass before, plus those its own writes changed (the pass
that creates 3,000 pods knows the next will find them). A kind whose last
churn was past FETCH_MAX is
listed in full at once: changes come in runs, and when the guess is wrong,
the pass pays one full LIST instead of a cheaper one, and the next goes back
to metadata. A kind with no pass before it has no churn: its first LIST is
whole anyway, and the pass after it tries metadata, as a quiet cluster needs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from reconciler.engine.observe.lister import FETCH_MAX
from reconciler.model import PODS, version_key
from reconciler.snapshot import Snapshot


class _Versioned(Protocol):
    @property
    def uid(self) -> str: ...
    @property
    def resource_version(self) -> str: ...


def changed(before: Iterable[_Versioned] | None, now: Iterable[_Versioned] | None) -> int:
    """Objects in ``now`` at a uid and resourceVersion ``before`` did not
    have; 0 when either was not listed (no pass to compare with, or a failed
    LIST). By version, not by the objects kept: a LIST in full as JSON
    decodes pods anew, and those would all look changed in every pass. Only
    kinds listed in full are compared (about 45 ms for 70,000 objects)."""
    if before is None or now is None:
        return 0
    known = {version_key(o.uid, o.resource_version) for o in before}
    return sum(1 for o in now if version_key(o.uid, o.resource_version) not in known)


def churn(before: Snapshot | None, now: Snapshot, fetched: Mapping[str, int]) -> dict[str, int]:
    """Each kind's churn (pods, our kinds, children) from ``before`` to ``now``;
    ``fetched``: of the kinds read by a LIST of metadata, the objects fetched
    anew, which is their churn already (a quiet pass compares nothing)."""
    if before is None:
        return {}
    pairs: list[tuple[str, Iterable[_Versioned] | None, Iterable[_Versioned] | None]]
    pairs = [(PODS.kind, before.pods, now.pods)]
    pairs += [(kind, before.of(kind), objects) for kind, objects in now.objects.items()]
    pairs += [(kind, before.children.get(kind), c) for kind, c in now.children.items()]
    return {
        kind: fetched[kind] if kind in fetched else changed(old, new) for kind, old, new in pairs
    }


def with_writes(counts: Mapping[str, int], wrote: Mapping[str, int]) -> dict[str, int]:
    """``counts`` plus the objects of each kind the pass then wrote: what it
    changed, the next pass will read changed."""
    return {kind: counts.get(kind, 0) + wrote.get(kind, 0) for kind in {*counts, *wrote}}


def in_full(counts: Mapping[str, int]) -> frozenset[str]:
    """The kinds to list in full at once: each changed past FETCH_MAX
    between the last two passes."""
    return frozenset(kind for kind, n in counts.items() if n > FETCH_MAX)
