"""Metadata put back on a pod that is ours (labels, controller reference,
hash annotations changed by hand), and the image admission gave a pod,
recorded once.
"""

from __future__ import annotations

from reconciler.actions import (
    EventSpec,
    PatchPodMetadata,
)
from reconciler.kinds import owned
from reconciler.kinds.redis.identity import (
    ADMITTED_IMAGE_ANNOTATION,
    COMPONENT,
    FIELDS_HASH_ANNOTATION,
    TEMPLATE_HASH_ANNOTATION,
    Redis,
    controller_ref,
    pod_labels,
    ref,
)
from reconciler.kinds.redis.pods import (
    edited,
    made_for,
    own_container,
    pod_fields_hash,
    template_hash,
    template_hash_of,
)
from reconciler.kinds.redis.spec import RedisSpec
from reconciler.model import (
    Pod,
)

DRIFT = owned.DRIFT  # the reason of the event that says a pod was put back


ADMITTED = "ChangedAtAdmission"  # the reason of the event that says admission changed a pod


def admitted_change(pod: Pod, spec: RedisSpec) -> str | None:
    """The image admission put in place of ours, if not yet recorded: a pod
    made for this spec and not changed since, whose container runs another
    image than the spec's (a mirror, a pinned digest)."""
    have = own_container(pod)
    if have is None or edited(pod) or template_hash_of(pod) != template_hash(spec):
        return None
    if have.image == spec.image or pod.annotations.get(ADMITTED_IMAGE_ANNOTATION) == have.image:
        return None
    return have.image


def _repair_event(
    redis: Redis, pod: Pod, spec: RedisSpec, what: list[str], admitted: str | None
) -> EventSpec:
    """Drift put back, or else the first sight of what admission changed."""
    if what:
        why = f"drift: {', '.join(what)} changed by hand"
        return EventSpec(ref(redis), "Normal", DRIFT, f"Restored pod {pod.name}: {why}", COMPONENT)
    message = f"Pod {pod.name}: image is {admitted}, asked {spec.image}: changed at admission"
    return EventSpec(ref(redis), "Normal", ADMITTED, message, COMPONENT)


def _hashes_to_repair(pod: Pod, spec: RedisSpec) -> dict[str, str]:
    """A hash annotation edited by hand, while the other shows the pod was
    made for this spec: the template hash of a pod whose container and
    placement fields match, or the fields hash of one whose template hash
    does."""
    want_hash, want_fields = template_hash(spec), pod_fields_hash(spec)
    if template_hash_of(pod) == want_hash:
        if pod.annotations.get(FIELDS_HASH_ANNOTATION) != want_fields:
            return {FIELDS_HASH_ANNOTATION: want_fields}
        return {}
    if made_for(pod, own_container(pod), spec):
        return {TEMPLATE_HASH_ANNOTATION: want_hash}
    return {}


def metadata_repair(redis: Redis, spec: RedisSpec, pod: Pod) -> PatchPodMetadata | None:
    """Put back our labels, our controller reference and, on a pod whose
    container matches the spec, the template-hash annotation; record once the
    image admission gave the pod. Labels and annotations of others are left
    alone."""
    labels = {k: v for k, v in pod_labels(redis).items() if pod.labels.get(k) != v}
    annotations = _hashes_to_repair(pod, spec)
    want_ref = controller_ref(redis)
    refs = None
    if want_ref not in pod.owner_refs:
        others = [r.to_dict() for r in pod.owner_refs if not r.controller]
        refs = (*others, want_ref.to_dict())
    what = [*labels, *annotations] + (["ownerReferences"] if refs is not None else [])
    admitted = admitted_change(pod, spec)
    if not what and admitted is None:
        return None
    event = _repair_event(redis, pod, spec, what, admitted)
    if admitted is not None:
        annotations[ADMITTED_IMAGE_ANNOTATION] = admitted
    why = f"drift: {', '.join(what)} changed by hand" if what else "changed at admission"
    return PatchPodMetadata(
        redis.key,
        pod.namespace,
        pod.name,
        pod.resource_version,
        labels,
        annotations,
        refs,
        why,
        event,
    )
