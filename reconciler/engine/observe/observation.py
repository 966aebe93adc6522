"""Observe: one LIST per kind (per namespace when scoped) into a Snapshot.

Pods are listed before our objects: an owner always exists before its pods,
so every owner of a listed pod is in the later LIST of its kind, and a pod is
never mistaken for an orphan because its owner appeared mid-pass.

Only the pods that carry our label are listed, so that the pods of others
in a shared cluster cost the pass (almost) nothing. Two kinds of pod matter
without our label: a foreign pod holding a desired name (the object says so
and nothing is created), and ours with its labels removed by hand (they are
put back). Both hold a name the object wants, so once the objects are listed,
each desired name that the labelled pods do not show is looked up: by GET
while they are few, else by one LIST of every pod, of which only those names
are kept (`_named`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from reconciler.buckets import Scope
from reconciler.children import STORAGE_CLASSES, ChildType, storage_class_from_api
from reconciler.client.interface import Client
from reconciler.client.json_wire import page_of
from reconciler.client.pod_dict import pod_from_api
from reconciler.constants import MANAGED_POD_SELECTOR
from reconciler.engine.observe import orphans
from reconciler.engine.observe.churn import churn, in_full
from reconciler.engine.observe.lister import (
    FullList,
    Lister,
    ListSettings,
    Reuse,
    reuse_of,
)
from reconciler.engine.observe.named import (
    list_children,
    owner_listed,
    wanted_children,
    with_named,
)
from reconciler.engine.observe.namespaces import Namespaces, namespaces_seen, pod_namespaces
from reconciler.engine.observe.scope import Sorter, selection
from reconciler.kinds import registry
from reconciler.kinds.base import Kind
from reconciler.model import PODS, Child, Pod
from reconciler.snapshot import Snapshot

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class Observation:
    """What one pass's LISTs saw, each field named where it is made."""

    snapshot: Snapshot
    report_pods: tuple[Pod, ...] | None
    errors: tuple[str, ...] = ()
    unreachable: str | None = None  # set when no LIST could reach the cluster
    counts: dict[str, int] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()  # worth a look, but no object failed: a typo in the scope
    mislabelled: frozenset[int] = frozenset()  # see Sorter
    # Kinds whose LIST was no list (Lister.malformed) or left out an owner
    # that exists (orphans.py): each counted, and the kind not seen.
    malformed: tuple[str, ...] = ()
    stale: tuple[str, ...] = ()
    # Our pods whose controller reference could not name one of our objects:
    # left alone, each named in a warning, an event on the pod and a metric.
    refused: tuple[orphans.Refused, ...] = ()


def list_pods(
    lister: Lister,
    full: FullList,
    selector: str | None,
    reuse: Reuse[Pod] | None,
    namespaces: Sequence[str] | None = None,
) -> tuple[Pod, ...] | None:
    """Pods as protobuf when asked for (a JSON answer still decodes)."""
    known = reuse.known if reuse else {}
    list_in = full.pods(lister.kube, selector, known)
    return lister.list(PODS, selector, list_in, reuse, namespaces)


def list_kind(
    lister: Lister,
    full: FullList,
    kind: Kind[Any],
    before: Snapshot | None,
    selector: str | None,
) -> tuple[Any, ...] | None:
    """The kind's objects, None if the LIST failed."""
    reuse = reuse_of(None if before is None else before.of(kind.name), kind.decode)
    decode = page_of(kind.decode, reuse.known if reuse else {})
    res = kind.resource
    return lister.list(res, selector, full.held(lister.kube, res, selector, decode), reuse)


def _reading_classes(
    types: Iterable[ChildType], children: Mapping[str, tuple[Child, ...] | None]
) -> bool:
    """Whether a child seen this pass is of a type that reads storage classes."""
    return any(c.reads_classes and children.get(c.kind) for c in types)


def list_classes(lister: Lister, full: FullList, wanted: bool) -> tuple[Child, ...] | None:
    """The storage classes, once a pass that sees a claim of ours: whether a
    claim may grow is its class's to say. None (not read) without claims."""
    if not wanted:
        return None
    res = STORAGE_CLASSES
    list_in = full.held(lister.kube, res, None, page_of(storage_class_from_api))
    return lister.list(res, None, list_in, None, ())


def observe(
    kube: Client,
    namespaces: Sequence[str],
    report_selector: str | None,
    settings: ListSettings,
    *,
    previous: Snapshot | None = None,
    scope: Scope | None = None,
) -> Observation:
    """LIST every kind; a failed LIST leaves that kind None, never partial.
    ``settings.protobuf`` asks for pods as protobuf. Whole objects come in
    pages of ``settings.page_size`` (0: one page for pods as protobuf, pages
    of JSON_PAGE_SIZE for what comes as JSON). An object unchanged since
    ``previous`` (same uid and resourceVersion) is taken from there rather
    than decoded again, after a LIST of metadata in pages of
    ``settings.metadata_page_size`` (0: one page). With ``scope`` (a sharded
    replica), only the objects of its buckets and their pods are kept."""
    full = settings.full()
    sorter = Sorter(scope)
    lister = Lister(
        kube, namespaces, settings.meta(), sorter, in_full(previous.churn if previous else {})
    )
    pod_reuse = reuse_of(None if previous is None else previous.pods, pod_from_api)
    chosen = selection(scope)
    where = pod_namespaces(namespaces, previous)
    labelled = sorter.pods(list_pods(lister, full, chosen.pods, pod_reuse, where))
    report_pods = None
    if report_selector == MANAGED_POD_SELECTOR:
        report_pods = labelled
    elif report_selector is not None:
        report_pods = sorter.pods(list_pods(lister, full, report_selector or None, pod_reuse))
    objects = {
        kind.name: sorter.objects(list_kind(lister, full, kind, previous, chosen.objects))
        for kind in registry.KINDS
    }
    if labelled is not None and chosen.selective:
        # An owner missing from a LIST selected on the bucket label may be
        # there with a label changed by hand: its pods are no orphans to
        # delete, and wait for the next pass that lists everything.
        labelled = owner_listed(labelled, objects)
    pods = None if labelled is None else with_named(lister, full, labelled, objects, pod_reuse)
    del pod_reuse
    gone, refused = _owners_confirmed(lister, objects, pods)
    wanted = wanted_children(objects)
    types = registry.child_types().values()
    children = {
        c.kind: list_children(lister, full, c, previous, sorter, wanted[c.kind]) for c in types
    }
    classes = list_classes(lister, full, _reading_classes(types, children))
    if classes is not None:
        children[STORAGE_CLASSES.kind] = classes
    pods_error = unlisted(lister, {PODS.kind: pods}).get(PODS.kind)
    seen = (
        namespaces_seen(kube, namespaces)
        if lister.unreachable is None
        else Namespaces(frozenset(), ())
    )
    warnings = (*seen.warnings, *(str(r) for r in refused))
    for warning in warnings:
        log.warning("%s", warning)
    snapshot = Snapshot(
        objects,
        pods,
        seen.terminating,
        pods_error,
        children=children,
        unlisted=unlisted(lister, {**children, STORAGE_CLASSES.kind: classes}),
        owners_gone=gone,
    )
    return Observation(
        snapshot=replace(snapshot, churn=churn(previous, snapshot, lister.fetched)),
        report_pods=report_pods,
        errors=tuple(lister.errors),
        unreachable=lister.unreachable,
        counts=lister.counts,
        warnings=warnings,
        mislabelled=frozenset(sorter.mislabelled),
        malformed=tuple(lister.malformed),
        stale=tuple(lister.stale),
        refused=refused,
    )


def unlisted(lister: Lister, found: Mapping[str, tuple[Any, ...] | None]) -> dict[str, str]:
    """Why each kind not seen this pass (None in ``found``) was not, when
    the next pass will meet it too (`Lister.lasting`): what the statuses
    that depend on it say. A kind not asked for (None, no failure) is not
    here, nor one whose failure passes (a timeout)."""
    return {
        kind: lister.lasting[kind]
        for kind, seen in found.items()
        if seen is None and kind in lister.lasting
    }


def _owners_confirmed(
    lister: Lister, objects: dict[str, tuple[Any, ...] | None], pods: tuple[Pod, ...] | None
) -> tuple[frozenset[str], tuple[orphans.Refused, ...]]:
    """The owners missing from their kind's LIST that a GET confirms gone,
    and the pods whose owner cannot be asked for; a kind whose LIST left
    out an owner that exists is not seen this pass."""
    owners = orphans.missing_owners(registry.KINDS, objects, pods)
    refused, missing = tuple(owners.refused), owners.missing
    if not missing or lister.gave_up is not None:
        return frozenset(), refused
    found = orphans.confirm(lister.kube, {k.name: k for k in registry.KINDS}, missing)
    lister.errors.extend(found.errors)
    for kind, why in found.stale.items():
        log.error("%s", why)
        objects[kind] = None
        lister.was_stale(kind, why)
    return found.gone, refused
