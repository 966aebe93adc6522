"""reconciler/engine/plan.py: what the planner of a pass hands each kind."""

from __future__ import annotations

import dataclasses

import pytest

from reconciler.actions import CreatePod, DeletePod, PatchStatus
from reconciler.backoff import Failure
from reconciler.config import Config
from reconciler.engine.plan import plan_pass, unpruned
from reconciler.kinds import base
from reconciler.kinds.redis import settings as redis_settings
from reconciler.kinds.redis.settings import RedisSettings
from tests.unit.builders import CONFIG, NOW, redis, snap


def test_a_kind_s_settings_are_found_once_a_pass_and_reach_its_rules(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each object's rules read them from their input, not from the config."""
    calls: list[object] = []
    real = base.settings_of

    def counted(config: Config, defaults: object) -> object:
        calls.append(defaults)
        return real(config, defaults)

    monkeypatch.setattr(base, "settings_of", counted)
    monkeypatch.setattr(redis_settings, "settings_of", counted)
    config = Config(kind_settings=(RedisSettings(image="mirror.local/redis:5"),))
    objects = [redis(f"r{i}", num=1) for i in range(3)]
    plan = plan_pass(snap(objects), config, NOW)
    images = {
        a.manifest["spec"]["containers"][0]["image"]
        for a in plan.actions
        if isinstance(a, CreatePod)
    }
    assert images == {"mirror.local/redis:5"}
    assert len(calls) == 1
    calls.clear()
    unseen = dataclasses.replace(snap(objects, (), None), pods_error="LIST Pod: 403 Forbidden")
    assert plan_pass(unseen, config, NOW).actions  # each says why
    assert len(calls) == 1


# ------------------------------------------------------------ objects planned without their pods

WHY = "LIST Pod: 403 Forbidden: pods is forbidden"


def blind(*objects, pruned=None):
    """A snapshot whose pod LIST was refused, lastingly."""
    s = dataclasses.replace(snap(objects, (), None), pods_error=WHY)
    return s if pruned is None else dataclasses.replace(s, pruned=pruned)


def test_an_object_planned_without_its_pods_is_held_while_it_backs_off():
    failure = Failure(CONFIG.backoff.threshold, "boom", retry_at=NOW.timestamp() + 60)
    waiting, due = redis("w"), redis("d")
    waiting = dataclasses.replace(waiting, failure=failure)
    due = dataclasses.replace(due, failure=dataclasses.replace(failure, retry_at=0.0))
    plan = plan_pass(blind(waiting, due), CONFIG, NOW)
    assert plan.backing_off == {waiting.key}


def test_without_its_pods_the_status_leaves_out_what_the_crd_prunes():
    plain = plan_pass(blind(redis()), CONFIG, NOW).actions
    ((patch,),) = [[a for a in plain if isinstance(a, PatchStatus)]]
    assert "state" in patch.status
    pruned = plan_pass(blind(redis(), pruned={"Redis": frozenset({"state"})}), CONFIG, NOW)
    ((kept,),) = [[a for a in pruned.actions if isinstance(a, PatchStatus)]]
    assert "state" not in kept.status and "message" in kept.status


def test_a_status_with_nothing_left_to_change_is_dropped_and_the_rest_kept():
    r = redis(status={"replicas": 3})
    status = PatchStatus(r.key, r.resource_version, {"replicas": 3, "dropped": 1})
    delete = DeletePod(r.key, "default", "r-5", "uid-5", "scale down")
    assert unpruned(r, [status, delete], frozenset({"dropped"})) == [delete]
    assert unpruned(r, [status, delete], None) == [status, delete]
