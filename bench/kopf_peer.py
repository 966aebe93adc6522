"""A kopf operator doing what `reconciler` does on the first pass, as a peer.

Run: kopf run bench/kopf_peer.py --standalone --namespace NS (with KUBECONFIG).

It is written the way kopf's documentation writes operators: handlers on
create and resume, kopf.adopt() for ownership, the handler's ``patch`` for
status, kopf.info() for events, pykube (which kopf itself logs in with) for
children, and a delete handler, which makes kopf put its finalizer on every
Redis. kopf's own costs (the finalizer patch, the last-handled-configuration
annotation, watch streams) are its normal price and are left in.

Same end state as the reconciler's: 3 pods per Redis, owned with
controller=true and carrying the same manifest (bar the managed-by label), a
finalizer, ``status.replicas`` and ``status.readyReplicas``; each Xca
``status.active`` and ``status.last_update_time``; and the same CreatePod and
Activated events.

readyReplicas is kept the way kopf's documentation keeps children in view: an
index of the operator's pods by owner, and an event handler on those pods that
patches the owner's status when its count of Ready pods changes (and only then).
"""

from __future__ import annotations

import logging
import os
import threading
from datetime import UTC, datetime
from typing import Any

import kopf
import pykube
import requests

from reconciler.constants import LABEL_INSTANCE, LABEL_MANAGED_BY
from reconciler.kinds.redis.identity import GROUP as REDIS_GROUP
from reconciler.kinds.redis.identity import VERSION as REDIS_VERSION
from reconciler.kinds.redis.identity import from_api
from reconciler.kinds.redis.pods import pod_manifest
from reconciler.kinds.redis.spec import validate_spec

REDIS = ("myapp.demo.kubebuilder.io", "v1", "redis")
XCA = ("apps.xca.k8s.kb.cx", "v1beta1", "xcas")
MANAGED_BY = "kopf-peer"
DEFAULT_IMAGE = "redis:5-alpine"
WRITE_CONCURRENCY = 8  # the reconciler's default, for a like-for-like comparison

_local = threading.local()
_owner_locks: dict[tuple[str, str], threading.Lock] = {}
_owner_locks_guard = threading.Lock()
_ready_written: dict[tuple[str, str], int] = {}  # (namespace, redis) -> last readyReplicas


def _api() -> pykube.HTTPClient:
    """pykube's session is not thread-safe: one client per executor thread."""
    api = getattr(_local, "api", None)
    if api is None:
        api = pykube.HTTPClient(pykube.KubeConfig.from_file(os.environ["KUBECONFIG"]))
        _local.api = api
    return api


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    # The CRDs prune unknown status fields, so keep kopf's progress in annotations
    # (kopf's documented choice for such CRDs) instead of status.kopf.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage()
    # Sync handlers run on this pool; match the reconciler's 8 concurrent writers.
    settings.execution.max_workers = WRITE_CONCURRENCY


def _pod(body: kopf.Body, index: int) -> dict[str, Any]:
    """The reconciler's pod manifest, owned the kopf way."""
    check = validate_spec(dict(body.get("spec") or {}), DEFAULT_IMAGE)
    if check.spec is None:
        raise kopf.PermanentError("; ".join(map(str, check.errors)))
    manifest = pod_manifest(from_api(body), check.spec, index)
    meta = manifest["metadata"]
    meta["labels"][LABEL_MANAGED_BY] = MANAGED_BY
    del meta["ownerReferences"]
    kopf.adopt(manifest, owner=body)  # controller=true, blockOwnerDeletion=true
    return manifest


@kopf.on.resume(*REDIS)
@kopf.on.create(*REDIS)
def redis_pods(body: kopf.Body, spec: kopf.Spec, patch: kopf.Patch, **_: Any) -> None:
    num = int(spec.get("num", 0))
    created = []
    for index in range(num):
        manifest = _pod(body, index)
        try:
            pykube.Pod(_api(), manifest).create()
        except pykube.exceptions.HTTPError as exc:
            if exc.code != 409:  # already there from an interrupted attempt
                raise
            continue
        created.append(manifest["metadata"]["name"])
    if created:  # one event per object and pass, naming the pods, as the reconciler does
        noun = "pods" if len(created) > 1 else "pod"
        kopf.info(
            body, reason="CreatePod", message=f"Created {noun} {', '.join(created)}: scale up"
        )
    patch.status["replicas"] = num


@kopf.on.delete(*REDIS)
def redis_release(name: str, namespace: str, **_: Any) -> None:
    """Delete the pods before kopf drops its finalizer, as the reconciler does."""
    pods = pykube.Pod.objects(_api(), namespace=namespace).filter(
        selector={LABEL_INSTANCE: name, LABEL_MANAGED_BY: MANAGED_BY}
    )
    for pod in pods:
        try:
            pod.delete()
        except (pykube.exceptions.ObjectDoesNotExist, requests.HTTPError):
            logging.getLogger(__name__).info("pod %s already gone", pod.name)


@kopf.on.resume(*XCA)
@kopf.on.create(*XCA)
def xca_activate(body: kopf.Body, status: kopf.Status, patch: kopf.Patch, **_: Any) -> None:
    if status.get("active") is True:
        return
    patch.status["active"] = True
    patch.status["last_update_time"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    kopf.info(body, reason="Activated", message=f"Xca {body.metadata.name} activated")


def _pod_ready(status: kopf.Status) -> bool:
    conditions = status.get("conditions") or ()
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


@kopf.index("pods", labels={LABEL_MANAGED_BY: MANAGED_BY})
def pods_by_owner(
    name: str, namespace: str, labels: kopf.Labels, status: kopf.Status, **_: Any
) -> dict[tuple[str, str], tuple[str, bool]]:
    return {(namespace, labels[LABEL_INSTANCE]): (name, _pod_ready(status))}


def _count_ready(index: kopf.Index, key: tuple[str, str]) -> int:
    """The event loop may update the index while a handler thread reads it."""
    for _ in range(10):
        try:
            return sum(1 for _, ok in list(index.get(key, ())) if ok)
        except RuntimeError:  # changed size during iteration
            continue
    return sum(1 for _, ok in list(index.get(key, ())) if ok)


@kopf.on.event("pods", labels={LABEL_MANAGED_BY: MANAGED_BY})
def pod_changed(namespace: str, labels: kopf.Labels, pods_by_owner: kopf.Index, **_: Any) -> None:
    """Patch the owner's readyReplicas when its number of Ready pods changed.

    Handlers for one owner's pods run concurrently on the executor, so the
    count is read from the (live) index and written under a per-owner lock:
    whichever handler runs last writes the latest count.
    """
    key = (namespace, labels[LABEL_INSTANCE])
    with _owner_locks_guard:
        lock = _owner_locks.setdefault(key, threading.Lock())
    with lock:
        ready = _count_ready(pods_by_owner, key)
        if _ready_written.get(key) == ready:
            return
        resp = _api().patch(
            version=f"{REDIS_GROUP}/{REDIS_VERSION}",
            namespace=namespace,
            url=f"redis/{key[1]}/status",
            json={"status": {"readyReplicas": ready}},
            headers={"Content-Type": "application/merge-patch+json"},
        )
        if resp.ok:
            _ready_written[key] = ready
        elif resp.status_code != 404:  # 404: the Redis is gone, nothing to report on
            resp.raise_for_status()
