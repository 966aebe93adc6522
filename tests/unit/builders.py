"""Builders for snapshot values, so table tests state only what matters."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from reconciler.actions import Action, DeletePod, EvictPod
from reconciler.backoff import STATUS_FIELD, Failure, gate, to_status
from reconciler.config import Config
from reconciler.constants import LABEL_INSTANCE, LABEL_MANAGED_BY, LABEL_NAME, MANAGED_BY
from reconciler.kinds import xca as xca_kind
from reconciler.kinds.base import PlanInput
from reconciler.kinds.redis import disruption, service
from reconciler.kinds.redis import kind as redis_kind
from reconciler.kinds.redis import placement as redis_placement
from reconciler.kinds.redis.identity import (
    FIELDS_HASH_ANNOTATION,
    FINALIZER,
    RESOURCE,
    TEMPLATE_HASH_ANNOTATION,
    Redis,
    owner_of,
)
from reconciler.kinds.redis.pods import template_hash
from reconciler.kinds.redis.spec import RedisSpec
from reconciler.kinds.xca import Xca
from reconciler.model import Child, Container, OwnerRef, Pod, PodCondition, PodIndex
from reconciler.snapshot import Snapshot

NOW = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)
CONFIG = Config()
REDIS_API = RESOURCE.api_version


def redis(
    name: str = "r",
    ns: str = "default",
    *,
    num: int = 3,
    port: int = 6379,
    image: str | None = None,
    finalizers: tuple[str, ...] = (FINALIZER,),
    deleting: bool = False,
    status: dict[str, Any] | None = None,
    generation: int = 1,
    uid: str | None = None,
    spec: dict[str, Any] | None = None,
) -> Redis:
    body: dict[str, Any] = {"port": port, "num": num}
    if image:
        body["image"] = image
    return Redis(
        namespace=ns,
        name=name,
        uid=uid or f"uid-{ns}-{name}",
        resource_version="10",
        generation=generation,
        deletion_timestamp="2026-11-22T11:00:00Z" if deleting else None,
        finalizers=finalizers,
        spec=spec if spec is not None else body,
        status=status or {},
    )


def current_hash(port: int = 6379, image: str = "redis:5-alpine") -> str:
    return template_hash(RedisSpec(port=port, num=0, image=image))


def pod(
    owner: Redis | None,
    index: int,
    *,
    ready: bool = True,
    hash_: str | None = None,
    terminating: bool = False,
    name: str | None = None,
    owner_uid: str | None = None,
    phase: str | None = None,
    port: int = 6379,
    image: str = "redis:5-alpine",
    generation: int = 1,
) -> Pod:
    """A pod as a pass created it for a spec with ``port`` and ``image``;
    ``hash_`` overrides its template-hash annotation (as if edited by hand);
    ``generation`` above 1 means its spec changed since it was created."""
    owner_name = owner.name if owner else "x"
    ns = owner.namespace if owner else "default"
    conds = (
        PodCondition("PodScheduled", "True"),
        PodCondition("Ready", "True" if ready else "False", "" if ready else "ContainersNotReady"),
    )
    controller = owner_uid if owner_uid is not None else (owner.uid if owner else None)
    refs = (
        ()
        if controller is None
        else (OwnerRef(REDIS_API, "Redis", owner_name, controller, True, True),)
    )
    return Pod(
        namespace=ns,
        name=name or f"{owner_name}-{index}",
        uid=f"pod-uid-{owner_name}-{index}",
        resource_version="5",
        labels={LABEL_NAME: "redis", LABEL_INSTANCE: owner_name, LABEL_MANAGED_BY: MANAGED_BY},
        annotations={
            TEMPLATE_HASH_ANNOTATION: hash_ if hash_ is not None else current_hash(port, image),
            FIELDS_HASH_ANNOTATION: redis_placement.fields_hash(redis_placement.NONE),
        },
        controller_uid=controller,
        controller_kind="Redis",
        # Deleted 10 s before NOW, with the default grace period of 30 s.
        deletion_timestamp="2026-11-22T12:00:20Z" if terminating else None,
        deletion_grace_seconds=30 if terminating else None,
        phase=phase or ("Running" if ready else "Pending"),
        conditions=conds,
        containers=(Container("redis", image, (port,), ("--port", str(port))),),
        owner_refs=refs,
        generation=generation,
    )


def xca(
    name: str = "x", ns: str = "default", *, active: bool | None = None, deleting: bool = False
) -> Xca:
    status = {} if active is None else {"active": active}
    return Xca(
        namespace=ns,
        name=name,
        uid=f"uid-xca-{name}",
        resource_version="3",
        generation=1,
        deletion_timestamp="2026-11-22T11:00:00Z" if deleting else None,
        status=status,
    )


def snap(
    redis: Sequence[Redis] | None = (),
    xcas: Sequence[Xca] | None = (),
    pods: Sequence[Pod] | None = (),
    services: Sequence[Child] | None = None,
    budgets: Sequence[Child] | None = None,
    claims: Sequence[Child] | None = None,
    classes: Sequence[Child] | None = None,
    policies: Sequence[Child] | None = None,
) -> Snapshot:
    """A snapshot; ``None`` for a kind means its LIST failed (Services and
    budgets are not listed unless given, so a test of pods sees no write of
    theirs)."""
    objects = {
        RESOURCE.kind: None if redis is None else tuple(redis),
        xca_kind.RESOURCE.kind: None if xcas is None else tuple(xcas),
    }
    children = {
        "Service": None if services is None else tuple(services),
        "PodDisruptionBudget": None if budgets is None else tuple(budgets),
        "PersistentVolumeClaim": None if claims is None else tuple(claims),
        "StorageClass": None if classes is None else tuple(classes),
        "NetworkPolicy": None if policies is None else tuple(policies),
    }
    listed = {o.uid for found in objects.values() for o in found or ()}
    # As observe hands it over: each owner its LIST left out, confirmed gone by a GET.
    gone = frozenset(p.controller_uid for p in pods or () if p.controller_uid not in listed)
    return Snapshot(
        objects, None if pods is None else tuple(pods), children=children, owners_gone=gone
    )


def service_of(r: Redis, **changes: Any) -> Child:
    """The Service a pass made for ``r``, as the apiserver stores it."""
    plan = service.plan_service(owner_of(r), None, 6379)
    made = service.CHILD.decode(plan.actions[0].manifest)
    return dataclasses.replace(made, uid=f"svc-{r.uid}", resource_version="1", **changes)


def _num(r: Redis) -> int:
    num = r.spec.get("num")
    return num if isinstance(num, int) else 0


def budget_of(r: Redis, **changes: Any) -> Child:
    """The budget a pass made for ``r``, as the apiserver stores it."""
    made = disruption.CHILD.decode(disruption.manifest(owner_of(r), _num(r)))
    return dataclasses.replace(
        made, uid=f"pdb-{r.uid}", resource_version="1", **({"status": LETS_ONE_GO} | changes)
    )


# A budget of three Ready pods, as the disruption controller counts it.
LETS_ONE_GO = {
    "observedGeneration": 0,
    "disruptionsAllowed": 1,
    "currentHealthy": 3,
    "desiredHealthy": 2,
}


def failing(obj: Any, failure: Failure) -> Any:
    """The object with this failure record in its status, as a pass wrote it."""
    status = {**obj.status, STATUS_FIELD: to_status(failure)}
    return dataclasses.replace(obj, status=status, failure=failure)


def plan_input(
    pods: Sequence[Pod] = (),
    config: Config = CONFIG,
    now: datetime = NOW,
    failure: Failure | None = None,
) -> PlanInput:
    """What the conductor hands a kind's planner, gated as it would gate it."""
    return PlanInput(PodIndex(pods), config, now, gate(failure, config.backoff, now))


def plan_redis(
    r: Redis,
    pods: Sequence[Pod],
    config: Config = CONFIG,
    now: datetime = NOW,
    failure: Failure | None = None,
) -> list[Action]:
    """The Redis rules for one object, as a pass would run them."""
    if failure is not None:
        r = failing(r, failure)
    return redis_writes(r, plan_input(pods, config, now, r.failure))


def redis_writes(r: Redis, inp: PlanInput) -> list[Action]:
    """One Redis's writes as the engine takes them from its kind
    (engine/plan.py, `PassPlan.plan`): the registered kind's planner, its
    actions arranged by the kind's write order. In an unsharded pass whose
    CRD prunes no status field the engine adds nothing to these."""
    found = redis_kind.KIND.plan(r, inp)
    return redis_kind.KIND.order.arranged(found.actions)


def removed(actions: Sequence[Action]) -> list[DeletePod | EvictPod]:
    """The pods a plan takes away, deleted or evicted."""
    return [a for a in actions if isinstance(a, DeletePod | EvictPod)]


def plan_xca(x: Xca, now: datetime = NOW, failure: Failure | None = None) -> list[Action]:
    if failure is not None:
        x = failing(x, failure)
    return xca_kind.plan(x, plan_input((), CONFIG, now, x.failure))
