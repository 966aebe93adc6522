"""spec.paused: a Redis whose pods are left as they are, and said to be."""

from __future__ import annotations

import dataclasses

from reconciler.actions import PatchStatus, Plan
from reconciler.cli.render import plan_text
from reconciler.health import PAUSED, Health
from reconciler.kinds.redis.kind import health
from reconciler.kinds.redis.spec import validate_spec
from reconciler.model import ObjKey
from tests.unit.builders import CONFIG, NOW, plan_redis, pod, redis, removed


def paused_redis(num: int = 3, image: str = "redis:6", **kw: object) -> object:
    spec = {"port": 6379, "num": num, "image": image, "paused": True}
    return redis(num=num, spec=spec, **kw)  # type: ignore[arg-type]


def statuses(actions):
    return [a for a in actions if isinstance(a, PatchStatus)]


def cond(status, type_):
    return next(c for c in status["conditions"] if c["type"] == type_)


def test_a_paused_redis_creates_deletes_and_replaces_nothing():
    """Missing r-2, stale r-0 (another image), surplus r-3, ended r-1: every
    one of them left as it is, and the status says why nothing moves."""
    r = paused_redis()
    pods = [
        pod(r, 0, image="redis:5-alpine"),
        dataclasses.replace(pod(r, 1, image="redis:6"), phase="Failed"),
        pod(r, 3, image="redis:6"),
    ]
    actions = plan_redis(r, pods, CONFIG, NOW)
    assert [type(a).__name__ for a in actions] == ["PatchStatus"]
    st = actions[0].status
    assert st["state"] == PAUSED
    assert cond(st, "Progressing")["status"] == "False"
    assert cond(st, "Progressing")["reason"] == PAUSED
    assert st["message"].startswith("paused (spec.paused): no pod is created, deleted or replaced")
    assert "2/3 pods exist, 1/3 updated to the current spec" in st["message"]
    assert health(r, actions).state == PAUSED


def test_a_paused_redis_plans_nothing_once_its_status_says_so():
    r = paused_redis()
    pods = [pod(r, 0, image="redis:5-alpine")]
    status = statuses(plan_redis(r, pods, CONFIG, NOW))[0].status
    assert plan_redis(dataclasses.replace(r, status=status), pods, CONFIG, NOW) == []


def test_a_ready_paused_redis_still_shows_paused():
    r = paused_redis(image="redis:5-alpine")
    pods = [pod(r, i) for i in range(3)]
    st = statuses(plan_redis(r, pods, CONFIG, NOW))[0].status
    assert st["state"] == PAUSED
    assert cond(st, "Ready")["status"] == "True"


def test_deleting_a_paused_redis_deletes_its_pods():
    r = paused_redis(deleting=True)
    pods = [pod(r, i, image="redis:6") for i in range(2)]
    deletes = [a.name for a in removed(plan_redis(r, pods, CONFIG, NOW))]
    assert deletes == ["r-0", "r-1"]


def test_unpaused_the_rollout_goes_on():
    r = paused_redis()
    r = dataclasses.replace(r, spec={**r.spec, "paused": False})
    pods = [pod(r, i, image="redis:5-alpine") for i in range(3)]
    deletes = [a.name for a in removed(plan_redis(r, pods, CONFIG, NOW))]
    assert deletes == ["r-0"]


def test_paused_must_be_a_boolean():
    check = validate_spec({"num": 1, "paused": "yes"}, "redis:6")
    assert check.spec is None
    assert [str(e) for e in check.errors] == ["spec.paused: must be true or false, got 'yes'"]


def test_plan_lists_paused_objects_apart():
    key = ObjKey("Redis", "default", "r")
    other = ObjKey("Redis", "default", "s")
    text = plan_text(
        Plan(
            health={
                key: Health(PAUSED, "paused (spec.paused): …"),
                other: Health("ScalingUp", "1/3 pods exist", progressing=True),
            }
        )
    )
    assert "Not Ready yet:\n  Redis default/s: ScalingUp: 1/3 pods exist" in text
    assert "Paused (spec.paused: their pods are left as they are):\n" in text
    assert "  Redis default/r: paused (spec.paused): …" in text
