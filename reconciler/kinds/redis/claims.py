"""The claims of a Redis with storage, pass by pass: each desired index's
claim made before its pod, kept as the retention policy says (owned by
the Redis or by none), grown when ``size`` grows (StatefulSets cannot) if
its class allows expansion, deleted once scaled away under ``whenScaled:
Delete``; and what the status says of them: claims not bound yet, claims
still growing, and a class that does not let them grow. A claim that is
not ours (another's, of the same name) is mounted as it is and never written.

A claim that an earlier Redis of the same name owns (its owner reference
names that Redis with another uid) was made under that Redis's ``whenDeleted:
Delete``: the garbage collector deletes it, as that Redis's owner asked. It
is neither mounted nor adopted: its pod waits for it to go, the status names
it, and the next pass makes a new claim. As the StatefulSet controller does
with a claim whose owner reference names an earlier set of its name (it
leaves it to the garbage collector), and a pod is never started on data that
is about to be deleted under it. To keep that data instead, remove the
owner reference from the claim: a claim of ours with no owner is mounted
and owned as the retention policy says.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from reconciler.actions import CreateChild, DeleteChild, EventSpec, PatchChild
from reconciler.children import EXPANSION_FIELD, STORAGE_CLASSES
from reconciler.constants import LABEL_MANAGED_BY, MANAGED_BY
from reconciler.kinds.base import PlanInput
from reconciler.kinds.conditions import Verdict
from reconciler.kinds.owned import Owner
from reconciler.kinds.redis import storage
from reconciler.kinds.redis.identity import Redis, owner_of, pod_name
from reconciler.kinds.redis.quantity import to_bytes
from reconciler.kinds.redis.spec import RedisSpec
from reconciler.kinds.redis.storage import DELETE, KIND, VOLUME, Storage, claim_manifest, claim_name
from reconciler.model import Child, PodLookup

NAMED_MAX = 3  # claims named in a status message; the rest are counted
RESIZE_PENDING = "FileSystemResizePending"  # the claim condition a kubelet clears
NOT_EXPANDABLE = "StorageNotExpandable"  # the Degraded reason when a claim cannot grow
CREATED = "CreateClaim"  # the reason of the event that says a claim was made
RESIZING = "ResizingClaims"  # the Progressing reason while its claims grow


def is_ours(owner: Owner, claim: Child) -> bool:
    """Made by us for this Redis: our label, and no controller but this Redis."""
    return claim.labels.get(LABEL_MANAGED_BY) == MANAGED_BY and claim.controller_uid in (
        None,
        owner.uid,
    )


def earlier_owner(owner: Owner, claim: Child) -> str | None:
    """The uid of an earlier Redis of this name that owns the claim: an owner
    reference of our kind and the Redis's name, with another uid."""
    api_version, kind = owner.owner_ref["apiVersion"], owner.owner_ref["kind"]
    for ref in claim.owner_refs:
        same = (ref.api_version, ref.kind, ref.name) == (api_version, kind, owner.key.name)
        if same and ref.uid != owner.uid:
            return ref.uid
    return None


def earlier_note(name: str, pod: str, uid: str) -> str:
    return (
        f"claim {name} belongs to an earlier Redis of this name (uid {uid}) and is deleted "
        f"with it: pod {pod} waits for it to go (to keep its data, remove that ownerReference "
        f"from the claim)"
    )


def requested(claim: Child) -> int | None:
    resources = claim.spec.get("resources")
    requests = resources.get("requests") if isinstance(resources, Mapping) else None
    found = requests.get("storage") if isinstance(requests, Mapping) else None
    return to_bytes(str(found)) if isinstance(found, (str, int)) else None


def capacity(claim: Child) -> int | None:
    found = claim.status.get("capacity")
    size = found.get("storage") if isinstance(found, Mapping) else None
    return to_bytes(str(size)) if isinstance(size, (str, int)) else None


def _conditions(claim: Child) -> set[str]:
    found = claim.status.get("conditions")
    return {
        str(c.get("type"))
        for c in found or ()
        if isinstance(c, Mapping) and c.get("status") == "True"
    }


def _owner_refs_patch(owner: Owner, wanted: Storage, claim: Child) -> list[dict[str, Any]] | None:
    """The claim's owner references as the retention policy wants them (ours
    when it goes with the Redis, none of a Redis otherwise, others' kept);
    None when they already are."""
    api_version, kind = owner.owner_ref["apiVersion"], owner.owner_ref["kind"]
    others = [r for r in claim.owner_refs if (r.api_version, r.kind) != (api_version, kind)]
    ours = [r for r in claim.owner_refs if (r.api_version, r.kind) == (api_version, kind)]
    want_ours = wanted.when_deleted == DELETE
    if want_ours and [r.uid for r in ours] == [owner.uid]:
        return None
    if not want_ours and not ours:
        return None
    kept = [r.to_dict() for r in others]
    return [*kept, dict(owner.owner_ref)] if want_ours else kept


@dataclass(frozen=True)
class ClaimPlan:
    """The claim writes of one pass (creates first), and what the status
    says of the claims: pods whose claim is still going (no pod is created
    on it), claims not yet bound, claims still growing, and why a claim
    cannot grow."""

    writes: tuple[CreateChild | PatchChild | DeleteChild, ...] = ()
    going: frozenset[str] = frozenset()  # pod names
    notes: tuple[str, ...] = ()
    resizing: tuple[str, ...] = ()
    cannot_grow: str | None = None
    pending: tuple[str, ...] = ()  # claims not bound to a volume yet
    # Its plan looked up a claim's storage class (a claim Pending, or to
    # grow): it needs the classes listed (`child_plans.needed_kinds`).
    reads_classes: bool = False


NO_CLAIMS = ClaimPlan()


@dataclass(frozen=True)
class ClaimInput:
    owner: Owner
    storage: Storage
    pods: tuple[str, ...]  # the desired pod names, index by index
    lookup: PodLookup
    write: bool  # claims were listed whole, and this pass may write them
    classes: bool = False  # the storage classes were listed this pass


def _grow(inp: ClaimInput, claim: Child) -> tuple[dict[str, Any] | None, str | None]:
    """The spec patch that grows the claim, or why its class does not let it."""
    want, have = inp.storage.size_bytes, requested(claim)
    if have is None or have >= want:
        return None, None
    class_name = claim.spec.get("storageClassName")
    found = (
        inp.lookup.child(STORAGE_CLASSES.kind, "", class_name)
        if isinstance(class_name, str)
        else None
    )
    if found is None:
        return None, None  # no class read this pass, or none: it stays Pending
    if not found.spec.get(EXPANSION_FIELD):
        why = (
            f"claims cannot grow to {inp.storage.size}: storage class {found.name} does not "
            f"allow volume expansion (allowVolumeExpansion); they stay at their size"
        )
        return None, why
    return {"resources": {"requests": {"storage": inp.storage.size}}}, None


def _claim_of_pod(inp: ClaimInput, pod: str) -> tuple[ClaimPlan, Child | None]:
    """One desired index's claim: made, waited for, or kept right."""
    owner = inp.owner
    name = claim_name(pod)
    claim = inp.lookup.child(KIND, owner.key.namespace, name)
    if claim is None:
        if not inp.write:
            return NO_CLAIMS, None
        message = f"Created claim {name}: the data of pod {pod}"
        event = EventSpec(owner.ref, "Normal", CREATED, message, owner.component)
        create = CreateChild(owner.key, claim_manifest(owner, inp.storage, name), event)
        return ClaimPlan((create,)), None
    if claim.terminating:
        note = f"claim {name} is being deleted: pod {pod} waits for it to go"
        return ClaimPlan(going=frozenset({pod}), notes=(note,)), None
    earlier = earlier_owner(owner, claim)
    if earlier is not None:  # the garbage collector's, labels or none
        note = earlier_note(name, pod, earlier)
        return ClaimPlan(going=frozenset({pod}), notes=(note,)), None
    if claim.status.get("phase") == "Pending":
        why = _unbindable(inp, claim)
        if why is not None:
            return ClaimPlan(notes=(f"claim {name} is Pending: {why}",), reads_classes=True), claim
        return ClaimPlan(pending=(name,), reads_classes=True), claim
    return NO_CLAIMS, claim


def _unbindable(inp: ClaimInput, claim: Child) -> str | None:
    """Why a Pending claim will stay so, when the classes listed say: its
    class does not exist, or it names none and the cluster has no default.
    Other reasons (a provisioner that fails) are in the claim's events,
    which we do not read; the progress deadline flags them."""
    if not inp.classes:
        return None
    name = claim.spec.get("storageClassName")
    if not isinstance(name, str) or not name:
        return "it names no storage class and the cluster has no default one"
    if inp.lookup.child(STORAGE_CLASSES.kind, "", name) is None:
        return f"storage class {name} does not exist"
    return None


def _keep_right(inp: ClaimInput, claim: Child) -> ClaimPlan:
    """Owner references as the policy says, the size as the spec says, and
    the resize the status shows until the claim reports the new capacity."""
    if not is_ours(inp.owner, claim):
        return NO_CLAIMS
    patch: dict[str, Any] = {}
    refs = _owner_refs_patch(inp.owner, inp.storage, claim)
    if refs is not None:
        patch["metadata"] = {"ownerReferences": refs}
    grow, cannot = _grow(inp, claim)
    if grow is not None:
        patch["spec"] = grow
    have = capacity(claim)
    reads = (requested(claim) or inp.storage.size_bytes) < inp.storage.size_bytes
    resizing: tuple[str, ...] = ()
    if cannot is None and have is not None and have < inp.storage.size_bytes:
        pending = RESIZE_PENDING in _conditions(claim)
        resizing = (f"{claim.name} ({RESIZE_PENDING})" if pending else claim.name,)
    if not patch or not inp.write:
        return ClaimPlan(resizing=resizing, cannot_grow=cannot, reads_classes=reads)
    retention = f"retention whenDeleted {inp.storage.when_deleted}"
    parts = ([f"grow to {inp.storage.size}"] if grow else []) + (
        [retention] if refs is not None else []
    )
    why = ", ".join(parts) if parts else retention
    write = PatchChild(inp.owner.key, claim.key, claim.resource_version, patch, why)
    return ClaimPlan((write,), resizing=resizing, cannot_grow=cannot, reads_classes=reads)


def _scaled_away(inp: ClaimInput, redis_name: str) -> tuple[DeleteChild | PatchChild, ...]:
    """Our claims of indexes at or above num: under whenScaled Delete,
    deleted once no pod holds their name; else kept, their owner references
    as whenDeleted wants them (a kept claim must not go with the Redis)."""
    if not inp.write:
        return ()
    owner, wanted = inp.owner, {claim_name(p) for p in inp.pods}
    prefix = claim_name(redis_name) + "-"
    writes: list[DeleteChild | PatchChild] = []
    for claim in inp.lookup.grouped(KIND, owner.key.namespace, redis_name):
        tail = claim.name[len(prefix) :] if claim.name.startswith(prefix) else ""
        if claim.name in wanted or not tail.isdigit() or claim.terminating:
            continue
        if not is_ours(owner, claim):
            continue
        pod = claim.name[len(VOLUME) + 1 :]
        if inp.storage.when_scaled == DELETE and inp.lookup.named(owner.key.namespace, pod) is None:
            why = f"scaled down below index {tail} (whenScaled {DELETE})"
            writes.append(DeleteChild(owner.key, claim.key, claim.uid, why))
            continue
        refs = _owner_refs_patch(owner, inp.storage, claim)
        if refs is not None:
            why = f"retention whenDeleted {inp.storage.when_deleted}"
            body = {"metadata": {"ownerReferences": refs}}
            writes.append(PatchChild(owner.key, claim.key, claim.resource_version, body, why))
    return tuple(writes)


def plan_claims(inp: ClaimInput, redis_name: str) -> ClaimPlan:
    """Every claim write of a Redis with storage, and what its status says."""
    writes: list[CreateChild | PatchChild | DeleteChild] = []
    going: set[str] = set()
    notes: list[str] = []
    resizing: list[str] = []
    pending: list[str] = []
    cannot: str | None = None
    reads = False
    for pod in inp.pods:
        found, claim = _claim_of_pod(inp, pod)
        kept = NO_CLAIMS if claim is None else _keep_right(inp, claim)
        for part in (found, kept):
            writes.extend(part.writes)
            going.update(part.going)
            notes.extend(part.notes)
            resizing.extend(part.resizing)
            pending.extend(part.pending)
            cannot = cannot or part.cannot_grow
            reads = reads or part.reads_classes
    writes.extend(_scaled_away(inp, redis_name))
    if pending:
        notes.append(f"claims not bound to a volume yet (Pending): {named(pending)}")
    return ClaimPlan(
        tuple(writes), frozenset(going), tuple(notes), tuple(resizing), cannot, reads_classes=reads
    )


def named(names: Sequence[str]) -> str:
    """The first NAMED_MAX names, and how many more."""
    shown = ", ".join(names[:NAMED_MAX])
    more = len(names) - NAMED_MAX
    return f"{shown}; and {more} more" if more > 0 else shown


def claim_plan(redis: Redis, spec: RedisSpec, inp: PlanInput) -> ClaimPlan:
    """Its claims' writes and what the status says of them. Claims are
    written only when they were all listed (else one may exist unseen), and
    not while held, paused, or in a namespace being deleted. While paused,
    no growth is asked, so none is said to be refused."""
    if spec.storage is None:
        return NO_CLAIMS
    write = storage.KIND in inp.children and not (
        inp.gate.hold or spec.paused or inp.namespace_terminating
    )
    pods = tuple(pod_name(redis, i) for i in range(spec.num))
    classes = STORAGE_CLASSES.kind in inp.children
    found = ClaimInput(owner_of(redis), spec.storage, pods, inp.pods, write, classes)
    planned = plan_claims(found, redis.name)
    return replace(planned, cannot_grow=None) if spec.paused else planned


def resizing_verdict(progressing: Verdict, spec: RedisSpec, claims: ClaimPlan) -> Verdict:
    """Once the pods are done, claims still growing keep it Progressing,
    named, until each reports the new capacity (the deadline applies)."""
    if progressing.ok or not claims.resizing or spec.storage is None:
        return progressing
    names = named(claims.resizing)
    return Verdict(True, RESIZING, f"claims growing to {spec.storage.size}: {names}")


def claims_verdict(degraded: Verdict, claims: ClaimPlan) -> Verdict:
    """A claim that cannot grow, unless something worse is said: once, as a
    change of Degraded (its Warning event too), not a write each pass."""
    if degraded.ok or claims.cannot_grow is None:
        return degraded
    return Verdict(True, NOT_EXPANDABLE, claims.cannot_grow)
