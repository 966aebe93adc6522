"""reconciler/engine/plan.py: what the planner of a pass hands each kind."""

from __future__ import annotations

import pytest

from reconciler.actions import CreatePod
from reconciler.config import Config
from reconciler.engine.plan import plan_pass
from reconciler.kinds import base
from reconciler.kinds.redis import settings as redis_settings
from reconciler.kinds.redis.settings import RedisSettings
from tests.unit.builders import NOW, redis, snap


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
