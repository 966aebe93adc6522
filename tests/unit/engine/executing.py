"""An executor as a pass builds one, and plans whose owners it knows, for
the tests of what the executor does."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from reconciler.actions import Action, ObjRef, OwnerWrites, Plan
from reconciler.backoff import WriteError
from reconciler.client.interface import UNFENCED, Client, WriteFence
from reconciler.engine.apply import ApplyOptions, Executor
from reconciler.engine.events import EventSink
from reconciler.model import ObjKey
from tests.unit.builders import NOW

StatusAfter = Callable[[ObjKey, WriteError, Sequence[Action]], list[Action]]


def executor(
    kube: Client,
    *,
    concurrency: int = 1,
    dry_run: bool = False,
    pass_id: str = "",
    fence: WriteFence = UNFENCED,
    now: datetime = NOW,
) -> Executor:
    options = ApplyOptions(concurrency, dry_run, pass_id)
    return Executor(kube, EventSink(kube, lambda: now), options, fence)


def plan_of(
    actions: Sequence[Action],
    refs: Mapping[ObjKey, ObjRef] | None = None,
    status_after: StatusAfter | None = None,
) -> Plan:
    """``actions`` as a plan whose owners are known: each by its reference
    in ``refs``, its shard bucket named by its name, and its status after a
    failed write ``status_after(key, error, landed)``."""
    owners = {}
    for action in actions:
        key = action.owner
        rule = None if status_after is None else functools.partial(status_after, key)
        owners[key] = OwnerWrites((refs or {}).get(key), key.name, rule)
    return Plan(tuple(actions), owners=owners)


@dataclass(frozen=True)
class Fence:
    """A write fence that answers as ``may`` does for the bucket asked about."""

    may: Callable[[str | None], bool]

    def may_write(self, owner_uid: str | None = None) -> bool:
        return self.may(owner_uid)
