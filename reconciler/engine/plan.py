"""The planner: (snapshot, config, now) -> actions. Pure: no I/O, no clock.

A converged cluster yields an empty plan. This module only conducts: for each
kind, in the registry's order, it gates each object by its failure memory and
hands it to that kind's planner (`reconciler.kinds.<kind>`), which holds the
kind's rules; then it deletes the kind's orphan pods.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from reconciler.actions import (
    Action,
    CreatePod,
    DeletePod,
    EvictPod,
    OwnerWrites,
    PatchLabels,
    PatchPodMetadata,
    PatchStatus,
    Plan,
)
from reconciler.backoff import EVICTION_REFUSED, Gate, WriteError, after_failure, gate
from reconciler.buckets import bucket_of
from reconciler.config import Config
from reconciler.constants import LABEL_INSTANCE
from reconciler.health import Health
from reconciler.kinds import registry
from reconciler.kinds.base import Kind, Object, PlanInput
from reconciler.kinds.conditions import status_changes
from reconciler.kinds.order import BUCKET_LABEL_WHY
from reconciler.model import LABEL_BUCKET, ObjKey, Pod, PodIndex, PodLookup, RecordingLookup
from reconciler.settled import NOTHING_SETTLED, Settled, SettledObject
from reconciler.snapshot import Snapshot


def orphan_pods(
    kind: Kind[Any], objects: Iterable[Object], pods: Sequence[Pod], gone: frozenset[str]
) -> list[tuple[DeletePod, str]]:
    """Delete our pods whose controlling object of ``kind`` no longer exists:
    missing from the LIST, and confirmed ``gone`` by a GET (observe's
    `orphans`), since a stale or garbled LIST can leave out a live owner.
    Pods are listed before our objects, so a pod's owner, created before
    the pod, is always in the later LIST. Each delete comes with the uid of
    its owner, which names its shard bucket.
    """
    if not gone:
        return []  # the steady pass: no owner was missing
    known = {obj.uid for obj in objects}
    return [
        (DeletePod(pod.key, pod.namespace, pod.name, pod.uid, "owner gone"), pod.controller_uid)
        for pod in pods
        if kind.orphaned(pod, known) and pod.controller_uid in gone
    ]


def index_of(snapshot: Snapshot) -> PodIndex:
    """The pass's pods and children, by owner and name; children grouped by
    their instance label too (a Redis's claims, owned or kept)."""
    return PodIndex(snapshot.pods or (), snapshot.all_children(), LABEL_INSTANCE)


def plan_pass(
    snapshot: Snapshot,
    config: Config,
    now: datetime,
    settled: Settled = NOTHING_SETTLED,
    holder: str | None = None,
) -> Plan:
    """Plan one pass. A kind whose LIST failed (None) gets no writes, nor does
    a kind whose rules read pods when the pod LIST failed, but for the status
    that says so when the failure will last (``snapshot.pods_error``; for
    a kind of child, ``snapshot.unlisted``, which each object's plan reads).
    ``settled`` is the previous plan's: an object it holds is not planned
    again (`reconciler.settled`). ``holder``: the sharded replica planning,
    recorded in each object's status."""
    index = index_of(snapshot)
    out = _Planned(index, settled.under(config), snapshot.pruned)
    listed, policy = snapshot.listed_children, config.backoff
    for kind in registry.KINDS:
        objects = snapshot.of(kind.name)
        if objects is None:
            continue
        if kind.plan_unseen is not None and snapshot.pods is None:
            if snapshot.pods_error is not None:
                out.unseen(kind, objects, config, now, snapshot.pods_error, holder)
            continue
        own = kind.settings_in(config)
        for obj in sorted(objects, key=lambda o: (o.namespace, o.name)):
            closing = obj.namespace in snapshot.terminating
            # While a kind is refused, each object is planned anew, so its
            # status can say so (a settled plan read no such input).
            if snapshot.unlisted or not out.reuse(obj, closing):
                obj_gate = gate(obj.failure, policy, now)
                inp = PlanInput(
                    out.index,
                    config,
                    now,
                    obj_gate,
                    frozenset(),
                    closing,
                    holder,
                    listed,
                    unlisted=snapshot.unlisted,
                    settings=own,
                )
                out.plan(kind, obj, inp)
        if snapshot.pods is not None:
            out.orphans(orphan_pods(kind, objects, snapshot.pods, snapshot.owners_gone))
    return Plan(
        tuple(out.actions),
        frozenset(out.held),
        out.health,
        Settled(config, out.settled),
        out.owners,
    )


class _Planned:
    """The plan of one pass as it is built, object by object."""

    def __init__(
        self,
        index: PodIndex,
        known: Mapping[ObjKey, SettledObject],
        pruned: Mapping[str, frozenset[str]],
    ) -> None:
        self.index, self.known, self.pruned = index, known, pruned
        self.actions: list[Action] = []
        self.held: set[ObjKey] = set()
        self.health: dict[ObjKey, Health] = {}
        self.settled: dict[ObjKey, SettledObject] = {}
        self.owners: dict[ObjKey, OwnerWrites] = {}

    def reuse(self, obj: Object, closing: bool) -> bool:
        """Take the object's empty plan from the pass before, if it still holds."""
        prior = self.known.get(obj.key)
        if prior is None or not prior.holds(obj.uid, obj.resource_version, closing, self.index):
            return False
        self.health[obj.key] = prior.health
        self.settled[obj.key] = prior
        return True

    def unseen(
        self,
        kind: Kind[Any],
        objects: Sequence[Object],
        config: Config,
        now: datetime,
        why: str,
        holder: str | None,
    ) -> None:
        """Objects planned without their pods: never settled, so the next
        pass that sees their pods plans them whole."""
        assert kind.plan_unseen is not None
        own, policy = kind.settings_in(config), config.backoff
        for obj in sorted(objects, key=lambda o: (o.namespace, o.name)):
            obj_gate = gate(obj.failure, policy, now)
            if obj_gate.backing_off:
                self.held.add(obj.key)
            inp = PlanInput(self.index, config, now, obj_gate, holder=holder, settings=own)
            planned = unpruned(obj, kind.plan_unseen(obj, inp, why), self.pruned.get(kind.name))
            self.actions.extend(planned)
            if planned:  # its pods unseen: a status counted from nothing would lie
                self.owners[obj.key] = OwnerWrites(kind.ref(obj), obj.uid)
            self.health[obj.key] = kind.health(obj, planned)

    def plan(self, kind: Kind[Any], obj: Object, inp: PlanInput) -> None:
        lookup = RecordingLookup(self.index)
        found = kind.plan(obj, replace(inp, pods=lookup))
        pruned, actions = self.pruned.get(kind.name), found.actions
        if inp.holder is not None and not inp.gate.hold and not obj.deletion_timestamp:
            actions = bucket_labels(obj, actions, lookup, inp.config.shard_buckets)
        planned = unpruned(obj, kind.order.arranged(actions), pruned)
        if inp.gate.backing_off:
            self.held.add(obj.key)
        self.actions.extend(planned)
        if planned:
            rule = found.status_after
            after = None if rule is None else _StatusAfter(obj, rule, inp, pruned)
            self.owners[obj.key] = OwnerWrites(kind.ref(obj), obj.uid, after)
        health = self.health[obj.key] = kind.health(obj, planned)
        if not planned and obj.failure is None and not health.progressing:
            self.settled[obj.key] = SettledObject(
                obj.uid,
                obj.resource_version,
                inp.namespace_terminating,
                tuple(lookup.reads),
                health,
            )

    def orphans(self, deletes: list[tuple[DeletePod, str]]) -> None:
        """An orphan pod is written for on its own: its bucket is its gone
        owner's, and it has no object to name in an event."""
        for delete, owner_uid in deletes:
            self.actions.append(delete)
            self.owners[delete.owner] = OwnerWrites(None, owner_uid)


def unpruned(obj: Object, actions: list[Action], pruned: frozenset[str] | None) -> list[Action]:
    """The actions without the status fields the installed CRD prunes; a
    status patch left with nothing to change is dropped."""
    if not pruned:
        return actions
    out: list[Action] = []
    for action in actions:
        if isinstance(action, PatchStatus) and pruned & action.status.keys():
            kept = {k: v for k, v in action.status.items() if k not in pruned}
            changed = status_changes(obj.status, kept)
            if not changed:
                continue
            action = replace(action, status=kept, changed=changed)
        out.append(action)
    return out


def bucket_labels(obj: Object, actions: list[Action], pods: PodLookup, total: int) -> list[Action]:
    """Sharded: the object, each of its pods and each pod created for it carry
    its bucket as a label, so that the replica holding the bucket finds them
    with a LIST selected on it. Written by the holder when it first sees them
    (and whenever the label is wrong); an unsharded pass neither adds nor
    removes it. Each kind's order (`Kind.order`, kinds/order.py `sharded`)
    places these writes: the object's label first, new ones on pods last."""
    want = {LABEL_BUCKET: str(bucket_of(obj.uid, total))}
    out: list[Action] = []
    if obj.bucket_label != want[LABEL_BUCKET]:
        out.append(PatchLabels(obj.key, obj.resource_version, want, BUCKET_LABEL_WHY))
    patched = {a.name for a in actions if isinstance(a, PatchPodMetadata | DeletePod | EvictPod)}
    templates: dict[int, Mapping[str, Any]] = {}  # the creates of one object share theirs
    for action in actions:
        if isinstance(action, CreatePod):
            template = templates.get(id(action.template))
            if template is None:
                template = templates[id(action.template)] = _labelled(action.template, want)
            action = replace(action, template=template)
        elif isinstance(action, PatchPodMetadata):
            action = replace(action, labels={**action.labels, **want})
        out.append(action)
    for pod in pods.owned_by(obj.uid):
        if (
            pod.name not in patched
            and not pod.terminating
            and pod.labels.get(LABEL_BUCKET) != want[LABEL_BUCKET]
        ):
            out.append(
                PatchPodMetadata(
                    obj.key,
                    pod.namespace,
                    pod.name,
                    pod.resource_version,
                    want,
                    {},
                    None,
                    BUCKET_LABEL_WHY,
                )
            )
    return out


def _labelled(manifest: Mapping[str, Any], labels: Mapping[str, str]) -> dict[str, Any]:
    meta = dict(manifest["metadata"])
    meta["labels"] = {**(meta.get("labels") or {}), **labels}
    return {**manifest, "metadata": meta}


@dataclass(frozen=True)
class _StatusAfter:
    """For the executor: the status of an object right after one of its
    writes failed, so that the failure shows in the status in the same pass,
    in every mode. Its kind's status rule (`Planned.status_after`), given
    the failure counted (the record the next pass reads back) and the
    writes that landed before it; a refused eviction is no failure of the
    object, so it counts none."""

    obj: Object
    rule: Callable[[PlanInput], list[Action]]
    inp: PlanInput
    pruned: frozenset[str] | None

    def __call__(self, error: WriteError, landed: Sequence[Action]) -> list[Action]:
        refused = None
        if error.reason == EVICTION_REFUSED and error.pod is not None:
            held = Gate(None, True, False)
            refused = (error.pod, error.message)
        else:
            now, policy = self.inp.now.timestamp(), self.inp.config.backoff
            held = after_failure(self.obj.failure, error, now, policy)
        done = frozenset((a.verb, a.target) for a in landed)
        inp = replace(self.inp, gate=held, landed=done, refused=refused)
        actions = unpruned(self.obj, self.rule(inp), self.pruned)
        return [a for a in actions if isinstance(a, PatchStatus)]


def _objects(snapshot: Snapshot) -> dict[ObjKey, tuple[Kind[Any], Any]]:
    return {o.key: (kind, o) for kind in registry.KINDS for o in snapshot.of(kind.name) or ()}


def health_after(snapshot: Snapshot, written: Sequence[Action]) -> dict[ObjKey, Health]:
    """The health of the objects whose status was written after a failure,
    from that status: what the pass ended with, not what it planned."""
    owners = {a.owner for a in written if isinstance(a, PatchStatus)}
    if not owners:
        return {}
    objects = _objects(snapshot)
    return {k: objects[k][0].health(objects[k][1], written) for k in owners if k in objects}
