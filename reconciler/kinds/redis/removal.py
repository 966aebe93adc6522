"""How a pod is taken away from a Redis, and said: deleted, or evicted when
it serves, so that every disruption budget that selects it is honoured.
"""

from __future__ import annotations

from reconciler.actions import (
    DeletePod,
    EventSpec,
    EvictPod,
    pod_event,
)
from reconciler.kinds.redis.identity import COMPONENT, Redis, ref
from reconciler.model import (
    Pod,
)


def pod_event_of(redis: Redis, reason: str, name: str, why: str) -> EventSpec:
    return pod_event(ref(redis), reason, (name,), why, COMPONENT)


def delete(redis: Redis, pod: Pod, why: str, event_why: str) -> DeletePod:
    event = pod_event_of(redis, "DeletePod", pod.name, event_why)
    return DeletePod(redis.key, pod.namespace, pod.name, pod.uid, why, event)


# A pod taken away from a Redis that runs: deleted, or evicted when it serves.
Removal = DeletePod | EvictPod


def remove(redis: Redis, pod: Pod, why: str, event_why: str) -> Removal:
    """A Ready pod is evicted, so that every disruption budget that selects
    it is honoured (ours, or one its users made); a pod that serves nothing
    (not Ready, ended, terminating) is deleted: no budget counts it, and a
    refused eviction would only hold a fix back."""
    if not pod.ready or pod.terminating:
        return delete(redis, pod, why, event_why)
    event = pod_event_of(redis, "EvictPod", pod.name, event_why)
    return EvictPod(redis.key, pod.namespace, pod.name, pod.uid, why, event)
