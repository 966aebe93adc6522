"""The writes of a Redis's Service and NetworkPolicy in one pass, and what
its status says of them. Neither is written while its kind was not listed
(the status keeps the name it shows), while the Redis is held after a
failure, paused, or in a namespace being deleted. And what its status says
while a kind of child it needs could not be listed (`unseen_verdict`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from reconciler.children import STORAGE_CLASSES, plural
from reconciler.kinds.base import PlanInput
from reconciler.kinds.conditions import Verdict, observed_conditions
from reconciler.kinds.redis import network, service
from reconciler.kinds.redis.identity import Redis, owner_of
from reconciler.kinds.redis.spec import RedisSpec

SERVICE_FIELD = "service"  # status: the name of its Service, once it exists


def service_plan(redis: Redis, spec: RedisSpec, inp: PlanInput) -> service.ServicePlan:
    """Its Service's write, if any. Nothing while the Services could not all
    be listed (the status keeps the name it shows), while held after a
    failure, or while paused (the Service stays as it is)."""
    if service.KIND not in inp.children:
        stored = redis.status.get(SERVICE_FIELD)
        return service.ServicePlan((), stored if isinstance(stored, str) else None)
    found = inp.pods.child(service.KIND, redis.namespace, redis.name)
    metrics = spec.server.exporter is not None
    planned = service.plan_service(owner_of(redis), found, spec.port, metrics)
    if spec.paused or inp.gate.hold or inp.namespace_terminating:
        return service.ServicePlan(
            (), None if found is None else planned.shown, planned.held_by_another
        )
    return planned


def policy_plan(redis: Redis, spec: RedisSpec, inp: PlanInput) -> network.PolicyPlan:
    """Its NetworkPolicy's write, if any, as for its Service: nothing while
    the policies were not listed (the status keeps the name it shows), while
    held, paused, or in a namespace being deleted."""
    stored = redis.status.get(network.FIELD)
    if network.KIND not in inp.children:
        return network.PolicyPlan((), stored if isinstance(stored, str) else None)
    found = inp.pods.child(network.KIND, redis.namespace, redis.name)
    owner = owner_of(redis)
    exporter = spec.server.exporter is not None
    want = (
        None
        if spec.access is None
        else network.desired_spec(owner, spec.access, spec.port, exporter)
    )
    planned = network.plan_policy(owner, found, want)
    if spec.paused or inp.gate.hold or inp.namespace_terminating:
        ours = found is not None and found.controller_uid == redis.uid
        return network.PolicyPlan((), redis.name if ours else None, planned.held_by_another)
    return planned


def policy_verdict(degraded: Verdict, held: str | None) -> Verdict:
    """Another's policy holds the name: said unless something worse is."""
    if degraded.ok or held is None:
        return degraded
    return Verdict(True, network.CONFLICT, network.conflict_message(held))


# The Degraded reason while a kind of child it needs cannot be listed.
CHILDREN_UNKNOWN = "ChildrenUnknown"


def needed_kinds(made: Iterable[tuple[str, str]], reads_classes: bool) -> frozenset[str]:
    """The kinds of child its plan reads: those it makes (``made``: its
    `child_names`), and the storage classes while its claim plan looks one
    up (``reads_classes``: a claim Pending, or to grow)."""
    kinds = {kind for kind, _ in made}
    return frozenset(kinds | {STORAGE_CLASSES.kind}) if reads_classes else frozenset(kinds)


def unseen_verdict(
    degraded: Verdict, needed: Iterable[str], inp: PlanInput, status: Mapping[str, Any]
) -> Verdict:
    """A kind it needs whose LIST was refused (``inp.unlisted``): Degraded,
    naming each such kind and why, unless something worse is said; nothing
    of that kind is written for it (each kind's plan reads ``inp.children``).
    Only a failure the next pass meets again is said: while one that passes
    (a timeout) hides a kind, the reason stored stays as it is, so that a
    refusal and a timeout in turn do not flap the condition and its event."""
    if degraded.ok:
        return degraded
    unseen = sorted(k for k in needed if k not in inp.children)
    refused = [k for k in unseen if k in inp.unlisted]
    if refused:
        message = "; ".join(f"could not list {plural(k)}: {_why(k, inp.unlisted)}" for k in refused)
        return Verdict(True, CHILDREN_UNKNOWN, f"{message}; none is written until they can be")
    stored = observed_conditions(status).get("Degraded") or {}
    if unseen and stored.get("reason") == CHILDREN_UNKNOWN and stored.get("status") == "True":
        return Verdict(True, CHILDREN_UNKNOWN, str(stored.get("message") or ""))
    return degraded


def _why(kind: str, unlisted: Mapping[str, str]) -> str:
    """The lister's words less the "LIST <kind>: " they start with."""
    return unlisted[kind].removeprefix(f"LIST {kind}: ")
