"""reconciler/engine/sync.py: one pass over a fake client."""

from __future__ import annotations

import gc
import sys
import time
from types import SimpleNamespace
from typing import Any

import pytest

from reconciler.config import Config
from reconciler.engine import sync
from reconciler.engine.observe.lister import FETCH_MAX, ListSettings
from reconciler.engine.state import State
from reconciler.engine.sync import Mode, PassSetup, pass_once
from reconciler.result import Result
from tests.unit.engine.observe.world import redis_obj
from tests.unit.fakes import FakeKube


def test_objects_the_pass_before_saw_and_this_one_did_not_reuse_are_freed_before_planning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At scale, the last snapshot and the new one alive together while the
    plan is built set the peak memory of a converging pass."""
    kube, state, config = FakeKube(), State(), Config()
    kube.held["Redis"] = [redis_obj("r0")]
    pass_once(PassSetup(kube=kube, config=config, mode=Mode.DRY_RUN), state)  # type: ignore[arg-type]
    assert state.seen is not None
    # Objects have slots and no weak references: count the references to
    # it instead, ours and the call's being 2.
    old = state.seen.of("Redis")[0]
    assert sys.getrefcount(old) > 2
    kube.held["Redis"] = [redis_obj("r0", "2")]
    kube.objects[("Redis", "a", "r0")] = redis_obj("r0", "2")
    alive_while_planning: list[bool] = []
    make_plan = sync.plan_pass

    def planning(*args: Any) -> Any:
        gc.collect()
        alive_while_planning.append(sys.getrefcount(old) > 2)
        return make_plan(*args)

    monkeypatch.setattr(sync, "plan_pass", planning)
    pass_once(PassSetup(kube=kube, config=config, mode=Mode.DRY_RUN), state)  # type: ignore[arg-type]
    assert alive_while_planning == [False]
    assert state.seen is not None and state.seen.of("Redis")[0].resource_version == "2"


def test_a_pass_says_what_looking_cost_apart_from_its_writes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The daemon's pace budgets the looking (observe and plan), not the
    writes: a pass whose writes are slow still looked for no longer than it
    took to plan."""
    kube, state, config = FakeKube(), State(), Config()
    kube.held["Redis"] = [redis_obj("r0")]
    apply = sync._apply

    def slow_writes(*args: Any) -> Any:
        spent = time.process_time()
        while time.process_time() - spent < 0.05:  # writes that cost CPU, too
            pass
        return apply(*args)

    monkeypatch.setattr(sync, "_apply", slow_writes)
    result = pass_once(PassSetup(kube=kube, config=config), state)  # type: ignore[arg-type]
    assert 0 < result.look_wall < result.duration - 0.05
    assert 0 < result.look_cpu < 0.05


def test_the_cyclic_collector_is_held_off_while_a_pass_looks_and_on_for_its_writes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At scale, collections inside observe and plan walk the whole snapshot
    again and again (`reconciler.engine.heap`)."""
    kube, state, config = FakeKube(), State(), Config()
    kube.held["Redis"] = [redis_obj("r0")]
    seen: dict[str, bool] = {}
    make_plan, apply = sync.plan_pass, sync._apply

    def planning(*args: Any, **kwargs: Any) -> Any:
        seen["plan"] = gc.isenabled()
        return make_plan(*args, **kwargs)

    def writing(*args: Any) -> Any:
        seen["apply"] = gc.isenabled()
        return apply(*args)

    monkeypatch.setattr(sync, "plan_pass", planning)
    monkeypatch.setattr(sync, "_apply", writing)
    assert gc.isenabled()
    pass_once(PassSetup(kube=kube, config=config), state)  # type: ignore[arg-type]
    assert seen == {"plan": False, "apply": True}
    assert gc.isenabled()


def test_a_kind_the_pass_wrote_past_fetch_max_is_listed_in_full_at_once_by_the_next() -> None:
    """The pass that creates the pods knows the next one will find them all
    new: their LIST of metadata would only precede the full one."""
    kube, state, config = FakeKube(), State(), Config(protobuf=False)
    kube.held["Redis"] = [redis_obj("r", num=FETCH_MAX + 1)]
    kube.held["Pod"] = []
    first = pass_once(PassSetup(kube=kube, config=config), state)  # type: ignore[arg-type]
    assert first.applied.counts()[("Pod", "create", Result.OK)] == FETCH_MAX + 1
    assert state.seen is not None and state.seen.churn["Pod"] == FETCH_MAX + 1
    kube.accepts.clear()
    pass_once(PassSetup(kube=kube, config=config), state)  # type: ignore[arg-type]
    assert next(accept for kind, accept in kube.accepts if kind == "Pod") is None


def test_a_sharded_pass_is_fenced_by_its_holder_and_by_no_other_fence() -> None:
    """The shard member travels once: a second fence beside it could disagree."""
    holder, lead = SimpleNamespace(may_write=lambda owner_uid=None: False), SimpleNamespace()
    setup = PassSetup(kube=FakeKube(), config=Config(), holder=holder)  # type: ignore[arg-type]
    assert setup.fenced_by is holder
    assert PassSetup(kube=FakeKube(), config=Config(), fence=lead).fenced_by is lead  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="fenced by its holder"):
        PassSetup(kube=FakeKube(), config=Config(), fence=lead, holder=holder)  # type: ignore[arg-type]


def test_a_pass_lists_with_the_settings_picked_from_its_config() -> None:
    config = Config(protobuf=False, page_size=7, metadata_page_size=9)
    lists = PassSetup(kube=FakeKube(), config=config).lists  # type: ignore[arg-type]
    assert lists == ListSettings(protobuf=False, page_size=7, metadata_page_size=9)
