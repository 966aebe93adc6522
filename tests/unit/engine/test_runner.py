"""engine/runner.py: what happens around a pass, for every command."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import SimpleNamespace

import pytest

from reconciler.client.errors import Unreachable
from reconciler.config import Config
from reconciler.engine.runner import Passes, mode_of
from reconciler.engine.sync import Mode, PassSetup
from tests.unit.engine.observe.world import redis_obj
from tests.unit.fakes import FakeKube


def down() -> FakeKube:
    """A cluster no LIST reaches."""
    kube = FakeKube()
    for kind in ("Pod", "Redis", "Xca", "Service", "PodDisruptionBudget"):
        kube.scripted_errors[("LIST", kind)] = Unreachable("connection refused")
    return kube


def written(path: Path) -> bool:
    return path.exists() and json.loads(path.read_text())["version"] == 1


@pytest.mark.parametrize(
    ("mode", "saved"), [(Mode.APPLY, True), (Mode.DRY_RUN, False), (Mode.PLAN, False)]
)
def test_the_state_file_is_written_after_a_pass_that_could_write(
    tmp_path: Path, mode: Mode, saved: bool
):
    path = tmp_path / "state.json"
    kube = FakeKube()
    kube.held["Redis"] = [redis_obj("r0")]
    passes = Passes(PassSetup(kube=kube, config=Config(state_file=str(path)), mode=mode))
    passes()
    assert written(path) is saved


def test_a_pass_that_did_not_reach_the_cluster_keeps_the_state_file_as_it_was(tmp_path: Path):
    path = tmp_path / "state.json"
    setup = PassSetup(kube=down(), config=Config(state_file=str(path)))
    assert Passes(setup)().unreachable
    assert not path.exists()


def test_the_daemon_logs_an_unreachable_cluster_and_a_one_shot_leaves_it_to_its_output(
    caplog: pytest.LogCaptureFixture,
):
    kube = down()
    with caplog.at_level(logging.ERROR, logger="reconciler"):
        Passes(PassSetup(kube=kube, config=Config(), mode=Mode.APPLY))()
        assert not [r for r in caplog.records if "connection refused" in r.getMessage()]
        Passes(PassSetup(kube=kube, config=Config(), mode=Mode.APPLY), daemon=True)()
    assert [r for r in caplog.records if "connection refused" in r.getMessage()]


def test_the_daemon_names_lagging_crds_in_its_first_pass_only(caplog: pytest.LogCaptureFixture):
    kube = FakeKube()  # no CRD stored: each GET is a 404, which the pass itself reports
    kube.objects[("CustomResourceDefinition", "", "redis.myapp.demo.kubebuilder.io")] = {
        "metadata": {"labels": {"app.kubernetes.io/version": "0.0.1"}}
    }
    passes = Passes(PassSetup(kube=kube, config=Config(), mode=Mode.APPLY), daemon=True)
    with caplog.at_level(logging.WARNING, logger="reconciler"):
        passes()
        passes()
    lagging = [r for r in caplog.records if "release 0.0.1's" in r.getMessage()]
    assert len(lagging) == 1
    assert passes.lagging_crds() == [lagging[0].getMessage()]


def test_a_dry_run_setting_makes_a_dry_run_pass():
    assert mode_of(Config(dry_run=True)) is Mode.DRY_RUN
    assert mode_of(Config()) is Mode.APPLY


def test_a_replica_whose_fence_lets_it_write_nothing_stands_by():
    """The daemon asks at each tick: the leader's fence, or the shard
    member's (its holder), asked for any write at all."""
    leads = SimpleNamespace(may_write=lambda owner_uid=None: True)
    follows = SimpleNamespace(may_write=lambda owner_uid=None: False)
    holds_none = SimpleNamespace(may_write=lambda owner_uid=None: False)

    def standby(**kw: object) -> str | None:
        return Passes(PassSetup(kube=FakeKube(), config=Config(), **kw)).standby()  # type: ignore[arg-type]

    assert standby() is None and standby(fence=leads) is None
    assert standby(fence=follows) == "not the leader"
    assert standby(holder=holds_none) == "sharded: no bucket held"
