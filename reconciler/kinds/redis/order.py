"""The order of a Redis's writes in one pass, and which wait for the next.

- The finalizer first: no pod may exist unguarded.
- New claims before the pods that mount them.
- The pods (created, deleted, evicted), then its Service and NetworkPolicy.
- The status, counting the pods as those writes leave them. A write that
  fails stops the object's writes there; the status written then says why.
- Pod metadata put back after the status: a pod written meanwhile (by its
  kubelet) answers 409, and that must not hold the status back.
- Claims kept right (grown, owner references, scaled away) after the status.
- The budget last. Its size waits for a pass that changes none of its pods:
  an eviction writes the budget's status, and the disruption controller
  writes it as soon as it sees a pod come or go, so a patch guarded by the
  resourceVersion this pass listed would meet a 409 of our own making (a
  scale-down always, a scale-up on an idle cluster). Every scale and
  rollout ends with a pass that changes no pod, which sizes it.
"""

from __future__ import annotations

from reconciler.actions import (
    CreateChild,
    CreatePod,
    DeleteChild,
    DeletePod,
    EvictPod,
    PatchChild,
    PatchFinalizers,
    PatchPodMetadata,
    PatchStatus,
)
from reconciler.kinds.order import Step, sharded
from reconciler.kinds.redis import disruption, network, service, storage

PODS_STEP = "pods"

ORDER = sharded(
    Step("finalizer", (PatchFinalizers,)),
    Step("new claims", (CreateChild,), storage.KIND),
    Step(PODS_STEP, (CreatePod, DeletePod, EvictPod)),
    Step("service", (CreateChild, PatchChild), service.KIND),
    Step("network policy", (CreateChild, PatchChild, DeleteChild), network.KIND),
    Step("status", (PatchStatus,)),
    Step("pod metadata", (PatchPodMetadata,)),
    Step("claims kept right", (PatchChild, DeleteChild), storage.KIND),
    Step("budget", (CreateChild, DeleteChild), disruption.KIND),
    Step("budget size", (PatchChild,), disruption.KIND, waits_for=(PODS_STEP,)),
)
