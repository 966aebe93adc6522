"""An in-memory cluster that applies plans, for the convergence properties.

It mirrors the API semantics the planner relies on: merge-patched status,
finalizers gating deletion, and pods that only become Ready (and terminating
pods that only disappear) when the simulated kubelet runs. tests/unit/test_sim.py
holds what it lands to FakeKube, which the client contract holds to the apiserver.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from reconciler.actions import (
    Action,
    CreateChild,
    CreatePod,
    DeleteChild,
    DeletePod,
    EvictPod,
    PatchChild,
    PatchFinalizers,
    PatchLabels,
    PatchPodMetadata,
    PatchStatus,
)
from reconciler.backoff import from_status
from reconciler.children import CLAIMS
from reconciler.client.pod_dict import pod_from_api
from reconciler.kinds import registry
from reconciler.kinds.redis.identity import Redis
from reconciler.kinds.xca import Xca
from reconciler.model import LABEL_BUCKET, Child, ContainerState, Pod, PodCondition, owner_refs_of
from reconciler.snapshot import Snapshot

from .builders import snap


def redises(snapshot: Snapshot) -> tuple[Redis, ...]:
    return snapshot.of("Redis") or ()


def xcas(snapshot: Snapshot) -> tuple[Xca, ...]:
    return snapshot.of("Xca") or ()


Admission = Callable[[Pod], Pod]


def apply(
    snapshot: Snapshot, actions: Iterable[Action], admit: Admission | None = None
) -> Snapshot:
    """The actions landed; ``admit`` is what a mutating webhook does to each
    pod created."""
    redis = {r.key: r for r in redises(snapshot)}
    xca = {x.key: x for x in xcas(snapshot)}
    pods = {p.key: p for p in snapshot.pods or ()}
    listed = {k: v for k, v in snapshot.children.items() if v is not None}
    children = {c.key: c for found in listed.values() for c in found}
    for action in actions:
        if isinstance(action, CreateChild | PatchChild | DeleteChild):
            assert action.kind in listed, f"a {action.kind} written while not listed"
            _child(children, action)
            continue
        if isinstance(action, CreatePod):
            if action.target in pods:
                continue  # AlreadyExists
            created = dataclasses.replace(
                pod_from_api(action.manifest),
                uid=f"new-{action.target.name}",
                resource_version="1",
                generation=1,
                phase="Pending",
                conditions=(PodCondition("Ready", "False", "ContainersNotReady"),),
            )
            pods[action.target] = admit(created) if admit else created
        elif isinstance(action, DeletePod | EvictPod):  # no budget refuses here
            old = pods.get(action.target)
            if old is not None and old.uid == action.uid:  # uid precondition
                pods[action.target] = bumped(
                    dataclasses.replace(old, deletion_timestamp="2026-11-22T12:00:00Z")
                )
        elif isinstance(action, PatchPodMetadata):
            old = pods.get(action.target)
            if old is not None and old.resource_version == action.resource_version:
                pods[action.target] = repaired(old, action)
        elif isinstance(action, PatchFinalizers):
            r = redis.get(action.owner)
            if r is not None:
                redis[action.owner] = bumped(dataclasses.replace(r, finalizers=action.finalizers))
        elif isinstance(action, PatchLabels):
            for objects in (redis, xca):
                if action.owner in objects:
                    label = dict(action.labels).get(LABEL_BUCKET)
                    objects[action.owner] = bumped(  # type: ignore[index]
                        dataclasses.replace(objects[action.owner], bucket_label=label)
                    )
        elif isinstance(action, PatchStatus):
            if action.owner in redis:
                redis[action.owner] = merged(redis[action.owner], action.status)
            elif action.owner in xca:
                xca[action.owner] = merged(xca[action.owner], action.status)
    # The apiserver drops an object being deleted once it has no finalizers.
    live_redis = tuple(r for r in redis.values() if not (r.deletion_timestamp and not r.finalizers))
    live_uids = {r.uid for r in live_redis}  # the garbage collector's part
    kept = [
        c
        for c in children.values()
        if c.controller_uid in live_uids | {"foreign"} or not (c.controller_uid or c.owner_refs)
    ]
    after = snap(live_redis, tuple(xca.values()), tuple(pods.values()))
    return dataclasses.replace(
        after,
        children={
            kind: tuple(c for c in kept if c.kind == kind) if kind in listed else None
            for kind in snapshot.children
        },
    )


def _child(children: dict, action: CreateChild | PatchChild | DeleteChild) -> None:
    """A create (AlreadyExists leaves it), a merge patch guarded by
    resourceVersion, or a delete guarded by uid."""
    if isinstance(action, CreateChild):
        if action.target not in children:
            made = registry.child_types()[action.kind].decode(action.manifest)
            children[action.target] = dataclasses.replace(made, uid=f"new-{made.kind}-{made.name}")
        return
    old: Child | None = children.get(action.target)
    if isinstance(action, DeleteChild):
        if old is not None and old.uid == action.uid:
            del children[action.target]
        return
    if old is None or old.resource_version != action.resource_version:
        return
    meta = action.body.get("metadata") or {}
    refs = old.owner_refs
    if "ownerReferences" in meta:  # a list: replaced whole
        refs = owner_refs_of(meta)
    controller = next((r.uid for r in refs if r.controller), None)
    children[action.target] = bumped(
        dataclasses.replace(
            old,
            labels=merge_patch(old.labels, meta.get("labels") or {}),
            spec=merge_patch(old.spec, action.body.get("spec") or {}),
            owner_refs=refs,
            controller_uid=controller if "ownerReferences" in meta else old.controller_uid,
        )
    )


def merge_patch(doc: Any, patch: Any) -> Any:
    """RFC 7386, as the apiserver applies a merge patch: maps merge key by
    key, a null removes, anything else replaces."""
    if not isinstance(patch, Mapping):
        return patch
    out = dict(doc) if isinstance(doc, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def bumped(obj):
    """Every write gives an object a new resourceVersion, as the apiserver does:
    the planner may take an object at the same version to be the same."""
    return dataclasses.replace(obj, resource_version=obj.resource_version + "+")


def repaired(pod: Pod, action: PatchPodMetadata) -> Pod:
    """A merge patch of the metadata: maps merge, the ownerReferences list is replaced."""
    refs = pod.owner_refs
    if action.owner_references is not None:
        refs = owner_refs_of({"ownerReferences": list(action.owner_references)})
    return dataclasses.replace(
        pod,
        labels={**pod.labels, **action.labels},
        annotations={**pod.annotations, **action.annotations},
        owner_refs=refs,
        resource_version=pod.resource_version + "+",
    )


def merged(obj, patch):
    """A status merge patch: a null removes the field; the record is read back."""
    status = {**obj.status, **patch}
    status = {k: v for k, v in status.items() if v is not None}
    return bumped(dataclasses.replace(obj, status=status, failure=from_status(status)))


# An image whose container exits at once: its pods never turn Ready.
CRASHING_IMAGE = "redis:crash"


def crashes(p: Pod) -> bool:
    return any(c.image.endswith(CRASHING_IMAGE) for c in p.containers)


def crash_loop(p: Pod) -> Pod:
    """Running and not Ready, its container waiting in CrashLoopBackOff, as
    the kubelet reports it."""
    waiting = ContainerState(p.containers[0].name, True, "CrashLoopBackOff", "back-off 40s")
    return dataclasses.replace(
        p,
        phase="Running",
        conditions=(
            PodCondition("PodScheduled", "True"),
            PodCondition("Ready", "False", "ContainersNotReady"),
        ),
        container_states=(waiting,),
    )


def disruption_controller(snapshot: Snapshot, pods: Iterable[Pod]) -> Snapshot:
    """Each budget counted over its Redis's pods as they are now, as the
    disruption controller does: an integer minAvailable as it stands, or a
    maxUnavailable of the Redis's num (its scale)."""
    budgets = snapshot.children.get("PodDisruptionBudget")
    if budgets is None:
        return snapshot
    live = [p for p in pods if not p.terminating]
    counted = []
    for budget in budgets:
        owner = next((r for r in redises(snapshot) if r.uid == budget.controller_uid), None)
        num = owner.spec.get("num") if owner is not None else None
        expected = num if isinstance(num, int) and not isinstance(num, bool) else 0
        healthy = sum(1 for p in live if p.controller_uid == budget.controller_uid and p.ready)
        needed = _needed(budget, expected)
        status = {
            "observedGeneration": budget.generation,
            "disruptionsAllowed": max(0, healthy - needed),
            "currentHealthy": healthy,
            "desiredHealthy": needed,
        }
        same = dict(budget.status) == status
        counted.append(budget if same else bumped(dataclasses.replace(budget, status=status)))
    children = {**snapshot.children, "PodDisruptionBudget": tuple(counted)}
    return dataclasses.replace(snapshot, children=children)


def _needed(budget: Child, expected: int) -> int:
    least = budget.spec.get("minAvailable")
    if isinstance(least, int):
        return least
    most = budget.spec.get("maxUnavailable")
    return max(0, expected - (most if isinstance(most, int) else 1))


def kubelet(snapshot: Snapshot) -> Snapshot:
    """Time passes: terminating pods vanish, the rest become Ready but for
    those that ended, which never run again, and those whose image crashes,
    which never turn Ready; then the disruption controller counts them."""
    pods: list[Pod] = []
    for p in snapshot.pods or ():
        if p.terminating:
            continue
        if p.ended:
            pods.append(p)
            continue
        running = (
            crash_loop(p)
            if crashes(p)
            else dataclasses.replace(
                p,
                phase="Running",
                conditions=(PodCondition("PodScheduled", "True"), PodCondition("Ready", "True")),
            )
        )
        pods.append(p if running == p else bumped(running))
    after = provisioner(dataclasses.replace(snapshot, pods=tuple(pods)))
    return disruption_controller(after, pods)


def provisioner(snapshot: Snapshot) -> Snapshot:
    """Claims bound at the size they ask (grown at once, the file system
    too), and a claim being deleted gone once no live pod mounts it."""
    found = snapshot.children.get(CLAIMS.kind)
    if found is None:
        return snapshot
    # Each pod of ours mounts data-<its name> (the pod model keeps no volumes).
    mounted = {(p.namespace, f"data-{p.name}") for p in snapshot.pods or ()}
    claims = []
    for c in found:
        if c.terminating and (c.namespace, c.name) not in mounted:
            continue
        asked = ((c.spec.get("resources") or {}).get("requests") or {}).get("storage")
        status = {"phase": "Bound", "capacity": {"storage": asked}}
        claims.append(c if c.status == status else bumped(dataclasses.replace(c, status=status)))
    return dataclasses.replace(snapshot, children={**snapshot.children, CLAIMS.kind: tuple(claims)})


def redis_named(snapshot: Snapshot, name: str) -> Redis | None:
    return next((r for r in redises(snapshot) if r.name == name), None)
