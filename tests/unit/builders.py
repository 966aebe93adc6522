"""Builders for snapshot values, so table tests state only what matters."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from reconciler.config import Config
from reconciler.constants import (
    FINALIZER,
    LABEL_INSTANCE,
    LABEL_MANAGED_BY,
    LABEL_NAME,
    MANAGED_BY,
)
from reconciler.model import Pod, PodCondition, Redis, Xca
from reconciler.plan import template_hash
from reconciler.spec import RedisSpec

NOW = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)
CONFIG = Config()


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
) -> Pod:
    owner_name = owner.name if owner else "x"
    ns = owner.namespace if owner else "default"
    conds = (
        PodCondition("PodScheduled", "True"),
        PodCondition("Ready", "True" if ready else "False", "" if ready else "ContainersNotReady"),
    )
    return Pod(
        namespace=ns,
        name=name or f"{owner_name}-{index}",
        uid=f"pod-uid-{owner_name}-{index}",
        resource_version="5",
        labels={LABEL_NAME: "redis", LABEL_INSTANCE: owner_name, LABEL_MANAGED_BY: MANAGED_BY},
        template_hash=hash_ if hash_ is not None else current_hash(),
        controller_uid=owner_uid if owner_uid is not None else (owner.uid if owner else None),
        controller_kind="Redis",
        deletion_timestamp="2026-11-22T11:59:00Z" if terminating else None,
        phase=phase or ("Running" if ready else "Pending"),
        conditions=conds,
    )


def xca(
    name: str = "x", ns: str = "default", *, active: bool | None = None, deleting: bool = False
) -> Xca:
    status = {} if active is None else {"active": active}
    return Xca(
        ns, name, f"uid-xca-{name}", "3", 1, "2026-11-22T11:00:00Z" if deleting else None, status
    )
