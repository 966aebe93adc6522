"""Observe: one paged LIST per kind (per namespace when scoped) into a Snapshot.

Pods are listed before Redis objects: a pod's owner always exists before the
pod, so every owner of a listed pod is in the later Redis LIST, and a pod is
never mistaken for an orphan because its owner appeared mid-pass.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from reconciler.constants import MANAGED_POD_SELECTOR
from reconciler.kube import ApiError, Kube, Unreachable
from reconciler.model import ObjKey, Pod, Snapshot, pod_from_api, redis_from_api, xca_from_api

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Observation:
    snapshot: Snapshot
    report_pods: tuple[Pod, ...] | None
    errors: tuple[str, ...] = ()
    unreachable: str | None = None  # set when no LIST could reach the cluster
    counts: dict[str, int] = field(default_factory=dict)
    gone: frozenset[ObjKey] = frozenset()  # remembered conflict pods that no longer exist


def _list_all(
    kube: Kube,
    kind: str,
    namespaces: Sequence[str],
    selector: str | None,
    decode: Callable[[Any], Any],
) -> list[Any]:
    """Decoded items of one kind, across the scoped namespaces (or all)."""
    if not namespaces:
        return kube.list(kind, None, selector, decode)
    items: list[Any] = []
    for ns in namespaces:
        items.extend(kube.list(kind, ns, selector, decode))
    return items


def _why(kind: str, exc: Exception) -> str:
    if isinstance(exc, ApiError) and exc.status == 404 and kind in ("Redis", "Xca"):
        return f"LIST {kind}: the {kind} CRD is not installed (404); apply crds/ (`make install`)"
    return f"LIST {kind}: {exc}"


def _fetch(kube: Kube, keys: Iterable[ObjKey]) -> tuple[list[Pod], set[ObjKey]] | None:
    """GET pods by name; None if any GET failed (the pod view would be partial)."""
    found: list[Pod] = []
    gone: set[ObjKey] = set()
    for key in sorted(keys):
        try:
            found.append(pod_from_api(kube.get("Pod", key.namespace, key.name)))
        except ApiError as exc:
            if exc.status != 404:
                return None
            gone.add(key)
        except Unreachable:
            return None
    return found, gone


def observe(
    kube: Kube,
    namespaces: Sequence[str],
    report_selector: str | None,
    conflict_pods: Iterable[ObjKey] = (),
) -> Observation:
    """LIST every kind; a failed LIST leaves that kind None, never partial."""
    errors: list[str] = []
    attempts: list[str] = []
    failed_to_reach: list[str] = []
    counts: dict[str, int] = {}

    def attempt(kind: str, selector: str | None, decode: Callable[[Any], Any]) -> tuple | None:
        attempts.append(kind)
        try:
            decoded = _list_all(kube, kind, namespaces, selector, decode)
        except (ApiError, Unreachable) as exc:
            errors.append(_why(kind, exc))
            if isinstance(exc, Unreachable) or exc.unauthorized:
                failed_to_reach.append(str(exc))
            return None
        counts[kind] = len(decoded)
        log.info("listed %d %s", len(decoded), kind)
        return tuple(decoded)

    pods = attempt("Pod", MANAGED_POD_SELECTOR, pod_from_api)
    report_pods = pods
    gone: set[ObjKey] = set()
    wanted = [k for k in conflict_pods if not namespaces or k.namespace in namespaces]
    if pods is not None and wanted:
        fetched = _fetch(kube, wanted)
        if fetched is None:
            errors.append("GET of pods known to conflict failed; no Redis writes this pass")
            pods = None
        else:
            listed = {p.key for p in pods}
            pods = pods + tuple(p for p in fetched[0] if p.key not in listed)
            gone = fetched[1]
    if report_selector is not None and report_selector != MANAGED_POD_SELECTOR:
        report_pods = attempt("Pod", report_selector or None, pod_from_api)
    redis = attempt("Redis", None, redis_from_api)
    xcas = attempt("Xca", None, xca_from_api)
    unreachable = failed_to_reach[0] if len(failed_to_reach) == len(attempts) else None
    return Observation(
        Snapshot(redis, xcas, pods),
        report_pods,
        tuple(errors),
        unreachable,
        counts,
        frozenset(gone),
    )
