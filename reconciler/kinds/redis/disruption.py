"""Disruptions within a budget: a Redis's PodDisruptionBudget, and the
evictions a budget refuses.

A Redis of two pods or more gets a budget of its own: at most one pod away
at a time, whoever takes it (a node drain, the cluster autoscaler, our own
rolling update). It says so as ``minAvailable: num - 1``, an integer, not as
``maxUnavailable: 1``: the disruption controller counts a budget of an
integer minAvailable from the pods alone, and one of maxUnavailable by a GET
of the Redis's scale subresource, a round trip to the apiserver (and etcd)
at every count. It counts budgets one at a time, so under the load of a
rolling update that round trip, paid for every budget, made most of the
wait that ended each wave (docs/performance/pace.md). The price is a patch
of the budget when spec.num changes. Pods that are not Ready may always be evicted
(``unhealthyPodEvictionPolicy: AlwaysAllow``), so a crash-looping pod never
blocks a drain. A Redis of one pod gets none: a budget there would block
every drain of its node.

Our rolling update and scale-down take Ready pods through the Eviction API,
so every budget is honoured, ours or one its users made. A refused eviction
is no failure of the Redis: the pod stays, the status names the budget in
the apiserver's own words (`Refusal`), and a later pass asks again. An
eviction our own budget, as the pass listed it, would refuse is not asked at
all (`allowed_now`): the Eviction API answers from that same status.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.actions import CreateChild, DeleteChild, EventSpec, PatchChild
from reconciler.children import PDBS, ChildType
from reconciler.kinds.owned import DRIFT, Owner, labels_patch, metadata, what_drifted
from reconciler.kinds.redis.spec import is_int
from reconciler.model import Child

# A budget's policy for unhealthy pods: dropped by an apiserver that does not
# keep it (before 1.27, or its gate off).
POLICY_FIELD = "unhealthyPodEvictionPolicy"
# What its rules read of a budget: its spec, and the disruption controller's
# count, from which the Eviction API answers.
CHILD = ChildType(
    PDBS,
    ("selector", "maxUnavailable", "minAvailable", POLICY_FIELD),
    ("observedGeneration", "disruptionsAllowed", "currentHealthy", "desiredHealthy"),
)
KIND = CHILD.kind
MAX_UNAVAILABLE = 1  # pods away at a time: minAvailable is num minus this
MIN_AVAILABLE = "minAvailable"
SIZE_FIELDS = (MIN_AVAILABLE, "maxUnavailable")  # a budget has one or the other
ALWAYS_ALLOW = "AlwaysAllow"
MIN_PODS = 2  # fewer pods get no budget
REFUSED_FIELD = "evictionRefused"  # status: the last refusal, while it holds
REFUSED = "EvictionRefused"  # the reason of the Warning event that says so


@dataclass(frozen=True)
class Refusal:
    """An eviction of ``pod`` that a budget refused, and the apiserver's words."""

    pod: str
    message: str

    def to_status(self) -> dict[str, str]:
        return {"pod": self.pod, "message": self.message}

    @property
    def note(self) -> str:
        return f"eviction of {self.pod} refused: {self.message}"


def refusal_of(status: Mapping[str, Any]) -> Refusal | None:
    stored = status.get(REFUSED_FIELD)
    if not isinstance(stored, Mapping):
        return None
    pod, message = stored.get("pod"), stored.get("message")
    if not isinstance(pod, str) or not isinstance(message, str):
        return None
    return Refusal(pod, message)


def expected(stored: Refusal | None, evicting: frozenset[str]) -> Refusal | None:
    """The stored refusal, while this pass asks to evict the same pod again:
    it is taken to hold until an eviction goes through, so a blocked rollout
    writes no status each pass."""
    return stored if stored is not None and stored.pod in evicting else None


def allowed_now(budget: Child | None, owner_uid: str) -> int | None:
    """How many pods our budget, as this pass listed it, lets go now: none
    until the disruption controller has counted it for its generation. None
    when it is not ours (another's is the Eviction API's to judge). The
    Eviction API answers from the same count, so an eviction past it would
    only be refused: a request, a Warning and a status write per held pod
    and pass, until the controller counts the pod that just turned Ready."""
    if budget is None or budget.controller_uid != owner_uid or budget.terminating:
        return None
    status = budget.status
    observed, allowed = status.get("observedGeneration"), status.get("disruptionsAllowed")
    if not is_int(observed) or observed < budget.generation:
        return 0
    return max(0, allowed) if is_int(allowed) else 0


def why_held(budget: Child) -> str:
    """Why our budget lets no more pods go, in its own counts."""
    status = budget.status
    observed = status.get("observedGeneration")
    if not is_int(observed) or observed < budget.generation:
        return f"budget {budget.name} is not yet counted by the disruption controller"
    said = f"budget {budget.name} allows no more disruptions now"
    healthy, needed = status.get("currentHealthy"), status.get("desiredHealthy")
    if is_int(healthy) and is_int(needed):
        return f"{said} ({healthy} healthy, {needed} needed)"
    return said  # counted, but without the counts to say why


def refused_event(owner: Owner, old: Refusal | None, new: Refusal | None) -> tuple[EventSpec, ...]:
    if new is None or new == old:
        return ()
    message = f"Eviction of pod {new.pod} refused: {new.message}"
    return (EventSpec(owner.ref, "Warning", REFUSED, message, owner.component),)


# ------------------------------------------------------------ its budget


def spec(owner: Owner, pods: int) -> dict[str, Any]:
    return {
        MIN_AVAILABLE: max(0, pods - MAX_UNAVAILABLE),
        "selector": {"matchLabels": dict(owner.selector)},
        POLICY_FIELD: ALWAYS_ALLOW,
    }


def manifest(owner: Owner, pods: int) -> dict[str, Any]:
    return {
        "apiVersion": PDBS.api_version,
        "kind": KIND,
        "metadata": metadata(owner, owner.key.name),
        "spec": spec(owner, pods),
    }


def drift(owner: Owner, budget: Child, pods: int) -> dict[str, Any]:
    """The merge patch that puts back what we set (a maxUnavailable, set by
    hand or by a release before minAvailable, is removed: a budget has one
    or the other). A policy the apiserver does not keep (before 1.27, or its
    gate off) is what it made of our create: asked for again, it would be
    dropped again, every pass."""
    patch = labels_patch(owner, budget)
    want = spec(owner, pods)
    if POLICY_FIELD not in budget.spec:
        del want[POLICY_FIELD]
    changed: dict[str, Any] = {k: v for k, v in want.items() if budget.spec.get(k) != v}
    if "maxUnavailable" in budget.spec:
        changed["maxUnavailable"] = None
    if "selector" in changed:
        changed["selector"] = _selector_patch(budget.spec.get("selector"), owner.selector)
    if changed:
        patch["spec"] = changed
    return patch


def _selector_patch(stale: Any, labels: Mapping[str, str]) -> dict[str, Any]:
    """A merge patch merges maps key by key: what we did not set is nulled
    (matchExpressions, labels added to matchLabels), or it would stay."""
    stale = stale if isinstance(stale, Mapping) else {}
    matched = stale.get("matchLabels")
    extra = {k: None for k in matched if k not in labels} if isinstance(matched, Mapping) else {}
    others = {k: None for k in stale if k != "matchLabels"}
    return {**others, "matchLabels": {**extra, **labels}}


BudgetWrite = CreateChild | PatchChild | DeleteChild


def plan_budget(owner: Owner, found: Child | None, pods: int) -> tuple[BudgetWrite, ...]:
    """Create, repair or (below two pods) delete our budget; another's of
    that name is left alone (it still counts: the Eviction API honours it)."""
    wanted = pods >= MIN_PODS
    if found is not None and (found.controller_uid != owner.uid or found.terminating):
        return ()
    if found is None:
        return (CreateChild(owner.key, manifest(owner, pods)),) if wanted else ()
    if not wanted:
        why = f"fewer than {MIN_PODS} pods: a budget would block every drain"
        return (DeleteChild(owner.key, found.key, found.uid, why),)
    patch = drift(owner, found, pods)
    if not patch:
        return ()
    if set(patch) == {"spec"} and set(patch["spec"]) <= set(SIZE_FIELDS):
        why = f"sized for {pods} pods: {MIN_AVAILABLE} {spec(owner, pods)[MIN_AVAILABLE]}"
        return (PatchChild(owner.key, found.key, found.resource_version, patch, why),)
    why = f"drift: {what_drifted(patch)} changed by hand"
    message = f"Restored poddisruptionbudget {owner.key.name}: {why}"
    event = EventSpec(owner.ref, "Normal", DRIFT, message, owner.component)
    return (PatchChild(owner.key, found.key, found.resource_version, patch, why, event),)
