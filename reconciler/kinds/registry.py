"""The kinds a pass reconciles, in the order it lists and plans them.

Adding a kind: copy `skeleton.py`, add its `KIND` here, and follow the
checklist in docs/architecture.md, "Adding a kind".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.children import ChildType
from reconciler.kinds import xca
from reconciler.kinds.base import Kind
from reconciler.kinds.redis import kind as redis
from reconciler.model import ObjKey

# Read where it is used (``registry.KINDS``), never copied at import: a test
# that registers a third kind (tests/unit/kinds/test_skeleton.py) sets it once.
KINDS: tuple[Kind[Any], ...] = (redis.KIND, xca.KIND)


def kind_of(key: ObjKey) -> Kind[Any] | None:
    """The kind of an object key; None for what is not one of ours (a pod)."""
    return next((kind for kind in KINDS if kind.name == key.kind), None)


def child_types() -> Mapping[str, ChildType]:
    """The types of child object the kinds declare (`Kind.children`), by
    kind, in the order declared: what a pass lists and writes besides pods.
    Two kinds that make one type must declare it alike."""
    found: dict[str, ChildType] = {}
    for kind in KINDS:
        for child in kind.children:
            if found.setdefault(child.kind, child) != child:
                raise ValueError(f"{kind.name} declares {child.kind} unlike another kind")
    return found
