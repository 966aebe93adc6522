"""What `run/manager.py` wires: the write fence each cluster's client and
passes ask, built from the settings and handed in, never set on a client."""

from __future__ import annotations

from types import SimpleNamespace

from reconciler.client.interface import UNFENCED
from reconciler.config import Config
from reconciler.engine.sync import Mode
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
    assert manager.LeaderFence(SimpleNamespace(is_leader=True)).may_write()  # type: ignore[arg-type]


def test_a_sharded_replica_is_its_passes_holder_and_fence_and_names_itself_in_its_requests():
    kube = FakeKube()
    parts = manager.assemble(kube, Config(shard=True), None)
    member = parts.member
    assert member is not None and member.base
    assert parts.setup.holder is member and parts.fence is member
    assert parts.setup.fence is UNFENCED  # the member travels once: as the holder
    assert parts.kube.fence is member  # type: ignore[attr-defined]
    assert parts.kube.user_agent == f"reconciler/test ({member.base})"  # type: ignore[attr-defined]


def test_each_cluster_s_passes_run_with_one_setup_of_its_settings():
    """Its mode from the settings, its events queued on the fenced client."""
    parts = manager.assemble(FakeKube(), Config(dry_run=True, leader_elect=True), None)
    setup = parts.setup
    assert setup.mode is Mode.DRY_RUN and setup.holder is None
    assert setup.events is not None and setup.events.kube is parts.kube
    assert manager.loop(parts).turns.one_pass.setup is setup  # type: ignore[attr-defined]


def test_a_cluster_s_loop_stands_by_while_its_passes_fence_lets_it_write_nothing():
    """Not yet the leader, or holding no bucket yet: the loop ticks without a pass."""
    lead = manager.assemble(FakeKube(), Config(leader_elect=True), None)
    assert manager.loop(lead).turns.standby() == "not the leader"
    shard = manager.assemble(FakeKube(), Config(shard=True), None)
    assert manager.loop(shard).turns.standby() == "sharded: no bucket held"
    alone = manager.assemble(FakeKube(), Config(), None)
    assert manager.loop(alone).turns.standby() is None
