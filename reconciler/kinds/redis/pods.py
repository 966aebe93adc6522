"""The pods a Redis wants: their manifest and template hash, and how a pod
found in the cluster is judged against the spec (made for another spec,
changed by hand since, or changed by admission, which never makes it stale).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from reconciler.actions import CreatePod
from reconciler.kinds.redis import placement, server, storage
from reconciler.kinds.redis.identity import (
    ADMITTED_IMAGE_ANNOTATION,
    CONTAINER_NAME,
    FIELDS_HASH_ANNOTATION,
    TEMPLATE_HASH_ANNOTATION,
    Redis,
    controller_ref,
    pod_index,
    pod_labels,
    pod_name,
    selector_labels,
)
from reconciler.kinds.redis.spec import RedisSpec, num_error
from reconciler.model import (
    Container,
    Pod,
    PodLookup,
)


@lru_cache(maxsize=256)
def template_hash(spec: RedisSpec) -> str:
    """Hash of the pod spec we send, so that any change to it (of the Redis
    spec, or of this template in a new release) rolls the pods. Cached: it is
    asked for each pod of each pass, and specs repeat."""
    doc = [_pod_spec(desired_container(spec)), pod_fields_hash(spec)]
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:10]


@lru_cache(maxsize=256)
def pod_fields_hash(spec: RedisSpec) -> str:
    """The hash a pod records of the fields it was made with besides its
    container: the placement's alone while the Redis has no storage and
    the default grace period and none of `server`'s fields, so that pods
    made before these existed are not rolled."""
    base = placement.fields_hash(spec.placement)
    more = {**storage.pod_fields(spec.storage, spec.grace), **server.pod_fields(spec.server)}
    if not more:
        return base
    doc = [base, more]
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:10]


def template_hash_of(pod: Pod) -> str | None:
    return pod.annotations.get(TEMPLATE_HASH_ANNOTATION)


def desired_pod_names(redis: Redis) -> tuple[str, ...]:
    """``<name>-0`` to ``<name>-(num-1)``; none while ``spec.num`` is invalid."""
    num = redis.spec.get("num", 0)
    if num_error(num) is not None:
        return ()
    return tuple([pod_name(redis, i) for i in range(num)])


def desired_container(spec: RedisSpec) -> Container:
    """The server listens on the spec's port, with the directives and the
    password of `server`: the image's entrypoint passes these arguments to
    redis-server."""
    args = ("--port", str(spec.port), *server.args(spec.server))
    return Container(CONTAINER_NAME, spec.image, (spec.port,), args)


def pod_template(redis: Redis, spec: RedisSpec) -> dict[str, Any]:
    """A pod manifest of this Redis without its name. Its pods' manifests
    share it: a first pass over 10,000 Redis plans 30,000 creates, and a
    manifest of their own took 2.7 kB each."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "namespace": redis.namespace,
            "labels": pod_labels(redis),
            "annotations": {
                TEMPLATE_HASH_ANNOTATION: template_hash(spec),
                FIELDS_HASH_ANNOTATION: pod_fields_hash(spec),
            },
            "ownerReferences": [controller_ref(redis).to_dict()],
        },
        "spec": pod_spec(redis, spec),
    }


def pod_spec(redis: Redis, spec: RedisSpec) -> dict[str, Any]:
    """The container's spec with the placement fields added to it and to the
    pod's, its password's variable, the data volume's mount, the grace
    period, and the exporter beside it. The volume itself names each pod's
    own claim: `claims_of` gives it to each create."""
    shared = _pod_spec(desired_container(spec))
    container = {**shared["containers"][0], **placement.container_fields(spec.placement)}
    if opened := server.open_args(spec.server):
        container["args"] = [*container["args"], *opened]
    variables = server.env(spec.server)
    if variables:
        container["env"] = variables
    if spec.storage is not None:
        container["volumeMounts"] = [{"name": storage.VOLUME, "mountPath": storage.MOUNT_PATH}]
    fields = placement.pod_fields(spec.placement, selector_labels(redis))
    if spec.grace is not None:
        fields[storage.GRACE_FIELD] = spec.grace
    exporter = server.exporter_container(spec.server, spec.port)
    containers = [container] if exporter is None else [container, exporter]
    return {
        **shared,
        **_NOTHING_GRANTED,
        "containers": containers,
        "subdomain": redis.name,
        **fields,
    }


# A Redis's pods need no token of the namespace's ServiceAccount and no
# variables naming its Services: neither is given, so that what runs in
# them cannot read what the Redis's author was not granted. Outside the
# template hash: pods made before are not rolled for them (docs/install.md).
_NOTHING_GRANTED = {"automountServiceAccountToken": False, "enableServiceLinks": False}


def claims_of(spec: RedisSpec, pod: str) -> tuple[tuple[str, str], ...]:
    """The pod's own claim, as its create mounts it."""
    return () if spec.storage is None else ((storage.VOLUME, storage.claim_name(pod)),)


@lru_cache(maxsize=256)
def _pod_spec(container: Container) -> dict[str, Any]:
    """Shared by every manifest with this container, like the template: never
    mutated."""
    return {
        "containers": [
            {
                "name": container.name,
                "image": container.image,
                "imagePullPolicy": "IfNotPresent",
                "args": list(container.args),
                "ports": [
                    {"name": "redis", "containerPort": port, "protocol": "TCP"}
                    for port in container.ports
                ],
                # Ready means the server accepts connections on its port.
                "readinessProbe": {
                    "tcpSocket": {"port": container.ports[0]},
                    "periodSeconds": 5,
                },
            }
        ]
    }


def pod_manifest(redis: Redis, spec: RedisSpec, index: int) -> dict[str, Any]:
    """One pod's manifest, as its create sends it (the benches make pods with it)."""
    name = pod_name(redis, index)
    return CreatePod(
        redis.key, name, pod_template(redis, spec), claims=claims_of(spec, name)
    ).manifest


def own_container(pod: Pod) -> Container | None:
    """The container we asked for, by name: containers that admission added
    (a mesh's sidecar) are not ours to judge."""
    return next((c for c in pod.containers if c.name == CONTAINER_NAME), None)


def admitted_image(pod: Pod, spec: RedisSpec) -> str:
    """The image this pod should run: the spec's, or what admission made of it
    when the pod was created (recorded on the pod once seen)."""
    return pod.annotations.get(ADMITTED_IMAGE_ANNOTATION) or spec.image


def made_for(pod: Pod, have: Container | None, spec: RedisSpec) -> bool:
    """Its container is what this spec asks for (with `open_args` or, made
    before them, without), and it was made with this spec's placement
    fields (the template-hash annotation aside)."""
    want = desired_container(spec)
    return (
        have is not None
        and pod.annotations.get(FIELDS_HASH_ANNOTATION) == pod_fields_hash(spec)
        and have.image == admitted_image(pod, spec)
        and have.ports == want.ports
        and have.args in (want.args, want.args + server.open_args(spec.server))
    )


def edited(pod: Pod) -> bool:
    """Its spec changed after it was created: the apiserver counts a pod's
    generation from 1 and raises it on every spec change, while what
    admission does to the create is part of generation 1. A server that does
    not count pod generations (0) cannot tell: the pod is taken as created."""
    return pod.generation > 1


def spec_drift(pod: Pod, spec: RedisSpec) -> str | None:
    """Why the pod must be replaced, or None if it is what we asked for.

    Made for another spec (or template): its template-hash annotation differs,
    and its container does not match (an annotation edited by hand on a
    matching pod is put back instead, by `metadata_repair`). Changed by hand
    since it was created (generation above 1): compared on the one field of
    our container that can change on a running pod, its image. Nothing else is
    compared, so whatever admission did at creation (a sidecar, a rewritten
    image, defaults) never makes a pod stale.
    """
    have = own_container(pod)
    if template_hash_of(pod) != template_hash(spec):
        return None if made_for(pod, have, spec) else "spec changed"
    if have is None or not edited(pod):
        return None
    want = admitted_image(pod, spec)
    return None if have.image == want else f"image is {have.image}, want {want}"


@dataclass(frozen=True)
class PodSet:
    """A Redis's pods, sorted into the groups the rules talk about."""

    owned: tuple[Pod, ...]  # controller ref is this Redis
    by_index: Mapping[int, Pod]  # owned, with a name of the form <redis>-<index>
    index: PodLookup  # our pods and those holding a desired name, to see who holds one


def pods_of(redis: Redis, index: PodLookup) -> PodSet:
    owned = index.owned_by(redis.uid)
    by_index: dict[int, Pod] = {}
    for pod in owned:
        idx = pod_index(redis.name, pod.name)
        if idx is not None:
            by_index[idx] = pod
    return PodSet(owned, by_index, index)


def held_by_another(redis: Redis, podset: PodSet, name: str) -> bool:
    holder = podset.index.named(redis.namespace, name)
    return holder is not None and holder.controller_uid != redis.uid
