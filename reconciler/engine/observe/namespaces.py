"""Namespaces: which are being deleted (nothing can be created there), which
configured ones do not exist, and where to LIST our pods across all of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.client.errors import (
    ApiError,
    NotFound,
    Unreachable,
)
from reconciler.client.interface import Client
from reconciler.engine.observe.lister import JSON_PAGE_SIZE
from reconciler.kinds import registry
from reconciler.model import (
    NAMESPACES,
    mapping,
    meta_of,
)
from reconciler.snapshot import Snapshot


@dataclass(frozen=True)
class Namespaces:
    terminating: frozenset[str]
    warnings: tuple[str, ...]


def _terminating(obj: Mapping[str, Any]) -> bool:
    phase = mapping(obj.get("status")).get("phase")
    return phase == "Terminating" or bool(meta_of(obj).get("deletionTimestamp"))


def namespaces_seen(kube: Client, scope: Sequence[str]) -> Namespaces:
    """Which namespaces are being deleted (nothing can be created there), and
    which configured ones do not exist (a typo must not pass in silence).

    Read from the namespaces themselves rather than learnt from refused
    creates: a pass then never plans a write it knows will be refused, and the
    same read checks the scope. One LIST, or one GET per configured namespace.
    """
    try:
        if not scope:
            found: list[dict[str, Any]] = kube.list(NAMESPACES, page_size=JSON_PAGE_SIZE)
            return Namespaces(
                frozenset(n["metadata"]["name"] for n in found if _terminating(n)), ()
            )
        terminating, missing = set(), []
        for ns in scope:
            try:
                if _terminating(kube.get(NAMESPACES, "", ns)):
                    terminating.add(ns)
            except NotFound:
                missing.append(f"namespace {ns} does not exist (is it a typo in the scope?)")
        return Namespaces(frozenset(terminating), tuple(missing))
    except (ApiError, Unreachable) as exc:
        why = (
            f"cannot read namespaces ({exc}); creates are not held back in namespaces being deleted"
        )
        return Namespaces(frozenset(), (why,))


# Past this many namespaces holding our objects, one LIST of our pods across
# all namespaces is kept rather than one LIST in each.
PER_NAMESPACE_MAX = 20


def pod_namespaces(scope: Sequence[str], previous: Snapshot | None) -> Sequence[str] | None:
    """Where to LIST our pods when the scope is every namespace (-A): in each
    namespace where the pass before saw our objects or pods, if they are few.
    The apiserver's watch cache then walks only those namespaces' pods, not
    every pod of every team, to find ours (a label selector does not spare
    it that walk). A pod in a namespace new since then is of an object new
    since then, and found by name like any desired pod the LIST does not show
    (`with_named`). None: the scope as it is."""
    if scope or previous is None or previous.pods is None:
        return None
    seen: set[str] = {p.namespace for p in previous.pods}
    for kind in registry.KINDS:
        objects = previous.of(kind.name)
        if objects is None:
            return None
        seen.update(o.namespace for o in objects)
    if not seen or len(seen) > PER_NAMESPACE_MAX:
        return None
    return sorted(seen)
