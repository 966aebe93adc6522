"""The images a Redis may run (`allowed_images`), and what its pods are not
given: creating a Redis is not creating any pod."""

from __future__ import annotations

import dataclasses

import pytest

from reconciler.actions import CreatePod, DeletePod, EvictPod
from reconciler.kinds.redis import images
from reconciler.kinds.redis.settings import RedisSettings
from tests.unit.builders import CONFIG, NOW, plan_redis, pod, redis
from tests.unit.kinds.redis.helpers import cond, status_of

SHIPPED = ("redis", "oliver006/redis_exporter")


@pytest.mark.parametrize(
    ("image", "entries", "allowed"),
    [
        ("redis:7", SHIPPED, True),
        ("redis", SHIPPED, True),
        ("docker.io/library/redis:7@sha256:" + "a" * 64, SHIPPED, True),
        ("index.docker.io/library/redis:7", SHIPPED, True),
        ("oliver006/redis_exporter:v1.62.0", SHIPPED, True),
        ("docker.io/oliver006/redis_exporter", SHIPPED, True),
        ("evil/redis:7", SHIPPED, False),
        ("redis-evil:7", SHIPPED, False),
        ("ghcr.io/library/redis:7", SHIPPED, False),
        ("oliver006/redis_exporter_evil:1", SHIPPED, False),
        ("registry.local:5000/redis:7", ("registry.local:5000/redis",), True),
        ("registry.local:5000/redis:7", ("registry.local/redis",), False),
        ("registry.local/team/redis:7", ("registry.local/team/",), True),
        ("registry.local/team-evil/redis:7", ("registry.local/team/",), False),
        ("registry.local/redis:7", ("registry.local/",), True),
        ("registry.local.evil/redis:7", ("registry.local/",), False),
        ("team/app:1", ("team/",), True),
        ("team/app:1", ("docker.io/team/",), True),
        ("teamx/app:1", ("team/",), False),
        ("localhost/redis:7", ("localhost/",), True),
        ("anything/at:all", (), True),
    ],
)
def test_an_image_is_allowed_by_its_repository(image, entries, allowed):
    assert images.allowed(image, entries) is allowed


def with_allowed(*entries: str):
    return dataclasses.replace(CONFIG, kind_settings=(RedisSettings(allowed_images=entries),))


def test_an_image_outside_the_list_makes_no_pod_and_says_so():
    r = redis(num=2, image="evil.example/exfil:1")
    actions = plan_redis(r, [], with_allowed(*SHIPPED), NOW)
    assert not [a for a in actions if isinstance(a, CreatePod | DeletePod | EvictPod)]
    degraded = cond(status_of(actions).status, "Degraded")
    assert degraded["status"] == "True" and degraded["reason"] == images.REASON
    assert degraded["message"].startswith(
        "spec.image: evil.example/exfil:1 is not from a repository the setting "
        f"{images.SETTING} lists (redis, oliver006/redis_exporter)"
    )  # the list as it is set, for the user to compare


def test_an_exporter_image_outside_the_list_replaces_no_pod():
    spec = {"num": 1, "port": 6379, "exporter": {"image": "evil/exfil:1"}}
    r = redis(num=1, spec=spec)
    stale = [pod(redis(num=1), 0)]  # made before the exporter was asked for
    actions = plan_redis(r, stale, with_allowed(*SHIPPED), NOW)
    assert not [a for a in actions if isinstance(a, CreatePod | DeletePod | EvictPod)]
    message = cond(status_of(actions).status, "Degraded")["message"]
    assert "spec.exporter.image: evil/exfil:1" in message and "spec.image" not in message


def test_images_of_the_list_are_planned_as_before():
    r = redis(num=1, image="redis:7")
    allowed = plan_redis(r, [], with_allowed(*SHIPPED), NOW)
    assert allowed == plan_redis(r, [], CONFIG, NOW)
    assert any(isinstance(a, CreatePod) for a in allowed)


def test_a_redis_pod_gets_no_token_and_no_service_variables():
    r = redis(num=1)
    create = next(a for a in plan_redis(r, [], CONFIG, NOW) if isinstance(a, CreatePod))
    assert create.manifest["spec"]["automountServiceAccountToken"] is False
    assert create.manifest["spec"]["enableServiceLinks"] is False
