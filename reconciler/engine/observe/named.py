"""Lookups by name: the pods and child objects that hold a name our objects
want but that the labelled LISTs did not show (another's, or ours with its
labels removed).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

from reconciler.children import ChildType
from reconciler.client.json_wire import page_of
from reconciler.client.pod_dict import pod_from_api
from reconciler.constants import MANAGED_POD_SELECTOR
from reconciler.engine.observe.lister import (
    FETCH_MAX,
    READ_FAILURES,
    FullList,
    Lister,
    Reuse,
    across,
    get_one,
    reuse_of,
)
from reconciler.engine.observe.scope import Sorter
from reconciler.kinds import registry
from reconciler.kinds.base import Kind
from reconciler.model import PODS, Child, Pod
from reconciler.snapshot import Snapshot

log = logging.getLogger(__name__)
_N = TypeVar("_N")


def _holders(
    lister: Lister, full: FullList, missing: set[tuple[str, str]], reuse: Reuse[Pod] | None
) -> list[Pod]:
    """The pods holding these names: a GET each while they are few, else one
    LIST of every pod in scope, of which only these names are kept."""
    if len(missing) <= FETCH_MAX:
        got = (get_one(lister.kube, PODS, ns, name, pod_from_api) for ns, name in sorted(missing))
        return [pod for pod in got if pod is not None]
    everything = across(
        lister.namespaces, full.pods(lister.kube, None, reuse.known if reuse else {})
    )
    return [p for p in everything if (p.namespace, p.name) in missing]


def _missing_names(
    objects: Mapping[str, tuple[Any, ...] | None], labelled: tuple[Pod, ...]
) -> set[tuple[str, str]]:
    """The desired pod names, of every kind that has them, that no labelled
    pod holds. Asked every pass, so it avoids building a set of every name."""
    held: dict[str, set[str]] = {}
    for pod in labelled:
        held.setdefault(pod.namespace, set()).add(pod.name)
    missing: set[tuple[str, str]] = set()
    for obj, pod_names in _listed_with(objects, lambda kind: kind.pod_names):
        names = held.get(obj.namespace, _NONE)
        missing.update((obj.namespace, n) for n in pod_names(obj) if n not in names)
    return missing


def _listed_with(
    objects: Mapping[str, tuple[Any, ...] | None],
    hook: Callable[[Kind[Any]], Callable[[Any], Iterable[_N]] | None],
) -> Iterator[tuple[Any, Callable[[Any], Iterable[_N]]]]:
    """Each listed object of a kind that has ``hook`` (the `Kind` field that
    names what it wants: ``pod_names``, ``child_names``), with that field."""
    for kind in registry.KINDS:
        names = hook(kind)
        found = objects.get(kind.name)
        if names is not None and found is not None:
            yield from ((obj, names) for obj in found)


_NONE: frozenset[str] = frozenset()


def with_named(
    lister: Lister,
    full: FullList,
    labelled: tuple[Pod, ...],
    objects: Mapping[str, tuple[Any, ...] | None],
    reuse: Reuse[Pod] | None,
) -> tuple[Pod, ...] | None:
    """The labelled pods, and those holding a desired name the labelled ones
    do not show. None, as for a failed LIST, when the lookup fails: a pass
    never plans on a view it knows to be partial.

    These pods are read after the objects: one whose controller is one of
    our kinds but not an object just listed is left out of this pass, since
    its owner may be newer than the LIST (the next pass sees both)."""
    missing = _missing_names(objects, labelled)
    if not missing:
        return labelled
    lister.attempts += 1  # a read like a LIST: counted for telling an unreachable cluster
    try:
        found = _holders(lister, full, missing, reuse)
    except READ_FAILURES as exc:
        lister.failed(PODS, exc)
        return None
    late = owner_listed(found, objects)
    if late:
        log.info("found %d pod(s) holding a desired name without our label", len(late))
    return labelled + late


def owner_listed(
    pods: Iterable[Pod], objects: Mapping[str, tuple[Any, ...] | None]
) -> tuple[Pod, ...]:
    """The pods whose controller, if one of our kinds, is an object listed."""
    ours = {kind.name: {o.uid for o in objects.get(kind.name) or ()} for kind in registry.KINDS}
    return tuple(
        p
        for p in pods
        if not (p.controller_kind in ours and p.controller_uid not in ours[p.controller_kind])
    )


def list_children(
    lister: Lister,
    full: FullList,
    child: ChildType,
    before: Snapshot | None,
    sorter: Sorter,
    wanted: frozenset[tuple[str, str]],
) -> tuple[Child, ...] | None:
    """The child objects of type ``child`` that carry our label, and those
    holding a name our objects want that the LIST does not show (another's,
    or ours with its labels removed). None if a read failed, or for a type
    listed on demand (claims) that no object wants.

    Listed over the scope as it is, unlike pods (`pod_namespaces`): with
    every namespace in scope, one LIST across the cluster. The watch cache
    then walks every Service of every team to find ours, but a cluster holds
    far fewer Services and budgets than pods, and at 10,000 Redis in 20
    namespaces, one LIST of each costs less than 20: one request rather than
    20, each with its own round trip and its own answer to read."""
    if child.on_demand and not wanted:
        return None  # not listed: nothing of it is written this pass
    res, decode_one = child.resource, child.decode
    reuse = reuse_of(None if before is None else before.children.get(child.kind), decode_one)
    decode = page_of(decode_one, reuse.known if reuse else {})
    selector = MANAGED_POD_SELECTOR
    list_in = full.held(lister.kube, res, selector, decode)
    labelled = sorter.children(lister.list(res, selector, list_in, reuse))
    if labelled is None:
        return None
    shown = {(c.namespace, c.name) for c in labelled}
    missing = {key for key in wanted if key not in shown}
    if not missing:
        return labelled
    lister.attempts += 1
    try:
        if len(missing) <= FETCH_MAX:
            got = (get_one(lister.kube, res, ns, name, decode_one) for ns, name in sorted(missing))
            found = [c for c in got if c is not None]
        else:
            every = across(
                lister.namespaces, full.held(lister.kube, res, None, page_of(decode_one))
            )
            found = [c for c in every if (c.namespace, c.name) in missing]
    except READ_FAILURES as exc:
        lister.failed(res, exc)
        return None
    return labelled + tuple(found)


def wanted_children(
    objects: Mapping[str, tuple[Any, ...] | None],
) -> dict[str, frozenset[tuple[str, str]]]:
    """(namespace, name) of each child our listed objects want, by kind:
    each object's `child_names` asked once a pass, not once per kind."""
    wanted: dict[str, set[tuple[str, str]]] = {kind: set() for kind in registry.child_types()}
    for obj, child_names in _listed_with(objects, lambda kind: kind.child_names):
        for kind, name in child_names(obj):
            wanted.setdefault(kind, set()).add((obj.namespace, name))
    return {kind: frozenset(found) for kind, found in wanted.items()}
