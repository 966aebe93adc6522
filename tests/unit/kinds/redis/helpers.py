"""What the Redis table tests share: builders of statuses and of pods as a real
cluster leaves them."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from reconciler.actions import (
    PatchStatus,
)
from reconciler.kinds.redis.settings import DEFAULTS
from reconciler.model import Container, ContainerState, PodCondition
from tests.unit.builders import CONFIG, NOW, plan_redis, redis_writes

# Just past the default progress deadline (a pass then says it was exceeded).
PAST_DEADLINE = timedelta(seconds=DEFAULTS.progress_deadline + 1)


def kinds(actions):
    return [type(a).__name__ for a in actions]


def status_of(actions):
    patches = [a for a in actions if isinstance(a, PatchStatus)]
    assert len(patches) == 1, actions
    return patches[0]


def cond(status, type_):
    return next(c for c in status["conditions"] if c["type"] == type_)


def converged(r, pods):
    """The Redis with the status the planner wants for these pods."""
    status = status_of(plan_redis(r, pods, CONFIG, NOW)).status
    return dataclasses.replace(r, status=status)


def crashing(p):
    """A pod whose container keeps crashing: Running, never Ready."""
    waiting = ContainerState("redis", True, "CrashLoopBackOff", "back-off 40s restarting")
    return dataclasses.replace(pod_unready(p), phase="Running", container_states=(waiting,))


def pod_unready(p):
    return dataclasses.replace(
        p, conditions=(PodCondition("Ready", "False", "ContainersNotReady"),)
    )


def set_image(p, image):
    """`kubectl set image`: the container changes, and so the pod's
    generation; the annotation does not."""
    container = dataclasses.replace(p.containers[0], image=image)
    return dataclasses.replace(p, containers=(container,), generation=p.generation + 1)


def admitted(p, *, image=None, sidecar=False, ports=None):
    """What a mutating webhook makes of our create: the pod is still at
    generation 1, since nobody changed it after it was created."""
    (mine,) = p.containers
    mine = dataclasses.replace(
        mine, image=image or mine.image, ports=ports if ports is not None else mine.ports
    )
    extra = (Container("istio-proxy", "istio/proxyv2:1.24", (15090,)),) if sidecar else ()
    return dataclasses.replace(p, containers=(mine, *extra))


def held(r, failure, pods=(), now=NOW):
    """The Redis rules right after a failed write: status only, failure counted."""
    from reconciler.backoff import Gate
    from reconciler.kinds.base import PlanInput
    from reconciler.model import PodIndex

    gate = Gate(failure, True, failure.count >= CONFIG.failure_threshold)
    return redis_writes(r, PlanInput(PodIndex(pods), CONFIG, now, gate))


def conds(st):
    return {c["type"]: (c["status"], c["reason"]) for c in st["conditions"]}


def ended(p, phase="Failed", reason="Evicted", message="The node was low on resource: memory."):
    """A pod as the kubelet leaves it after an eviction: its containers stopped."""
    state = ContainerState("redis", False, "ContainerStatusUnknown", "")
    conditions = (PodCondition("Ready", "False", "PodFailed"),)
    return dataclasses.replace(
        p,
        phase=phase,
        reason=reason,
        message=message,
        conditions=conditions,
        container_states=(state,),
        resource_version="6",
    )


def image_pull_backoff(p, image="redis:does-not-exist"):
    waiting = ContainerState("redis", True, "ImagePullBackOff", f'Back-off pulling image "{image}"')
    return dataclasses.replace(p, phase="Pending", container_states=(waiting,))


def stored(r, pods, now):
    """The Redis as a pass at ``now`` left it."""
    return dataclasses.replace(r, status=status_of(plan_redis(r, pods, CONFIG, now)).status)
