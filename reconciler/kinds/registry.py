"""The kinds a pass reconciles, in the order it lists and plans them.

Adding a kind: a module (or a package, as `redis`) beside this one with its
rules and a `Kind`, one line here, a CRD in crds/ and its verbs in the RBAC
rules.
"""

from __future__ import annotations

from typing import Any

from reconciler.kinds import xca
from reconciler.kinds.base import Kind
from reconciler.kinds.redis import kind as redis
from reconciler.model import ObjKey

KINDS: tuple[Kind[Any], ...] = (redis.KIND, xca.KIND)
_BY_NAME: dict[str, Kind[Any]] = {kind.name: kind for kind in KINDS}


def kind_of(key: ObjKey) -> Kind[Any] | None:
    """The kind of an object key; None for what is not one of ours (a pod)."""
    return _BY_NAME.get(key.kind)
