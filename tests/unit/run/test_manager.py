"""What `run/manager.py` wires: the write fence each cluster's client and
passes ask, built from the settings and handed in, never set on a client."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

from reconciler.client.interface import UNFENCED
from reconciler.config import Config
from reconciler.run import manager
from tests.unit.fakes import FakeKube


def test_without_a_lease_every_write_may_go():
    kube = FakeKube()
    parts = manager.assemble(kube, Config(), None)
    assert parts.fence is UNFENCED and parts.kube is kube
    assert parts.elector is None and parts.member is None


def test_a_leader_writes_only_while_it_leads():
    parts = manager.assemble(FakeKube(), Config(leader_elect=True), None)
    assert isinstance(parts.fence, manager.LeaderFence)
    assert parts.kube.fence is parts.fence  # type: ignore[attr-defined]
    elector = parts.elector
    assert elector is not None and not elector.is_leader
    assert not parts.fence.may_write() and not parts.fence.may_write("any-uid")
    parts = replace(parts, fence=manager.LeaderFence(SimpleNamespace(is_leader=True)))  # type: ignore[arg-type]
    assert parts.fence.may_write()


def test_a_shard_writes_for_the_buckets_it_holds_and_retries_while_it_holds_any():
    held: set[str] = set()
    member = SimpleNamespace(held=lambda: held, holds=lambda uid: uid in held)
    fence = manager.ShardFence(member)  # type: ignore[arg-type]
    assert not fence.may_write() and not fence.may_write("a")
    held.add("a")
    assert fence.may_write() and fence.may_write("a") and not fence.may_write("b")


def test_a_sharded_replica_names_itself_in_its_requests():
    kube = FakeKube()
    parts = manager.assemble(kube, Config(shard=True), None)
    assert isinstance(parts.fence, manager.ShardFence)
    assert parts.member is not None and parts.member.base
    assert parts.kube.user_agent == f"reconciler/test ({parts.member.base})"  # type: ignore[attr-defined]
