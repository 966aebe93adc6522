"""The writes of a Redis's Service and NetworkPolicy in one pass, and what
its status says of them. Neither is written while its kind was not listed
(the status keeps the name it shows), while the Redis is held after a
failure, paused, or in a namespace being deleted.
"""

from __future__ import annotations

from reconciler.kinds.base import PlanInput
from reconciler.kinds.conditions import Verdict
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
