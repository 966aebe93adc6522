"""The pods a Redis wants and their names (kinds/redis/pods.py)."""

from __future__ import annotations

import pytest

from reconciler.actions import (
    CreatePod,
)
from reconciler.kinds.redis.pods import pod_manifest
from reconciler.kinds.redis.spec import validate
from tests.unit.builders import CONFIG, NOW, plan_redis, pod, redis
from tests.unit.kinds.redis.test_claims import plan, with_storage


@pytest.mark.parametrize(
    ("pod_name", "index"),
    [
        ("r-0", 0),
        ("r-12", 12),
        ("r-01", None),
        ("r-", None),
        ("r-x", None),
        ("rr-1", None),
        ("r-1-2", None),
        ("r-\u0661", None),
        ("r", None),
    ],
)
def test_pod_index_parsing(pod_name, index):
    from reconciler.kinds.redis.identity import pod_index

    assert pod_index("r", pod_name) == index


def test_template_hash_is_pinned():
    """Pods carry this hash; a new value would roll every pod on upgrade."""
    from reconciler.kinds.redis.pods import template_hash
    from reconciler.kinds.redis.spec import RedisSpec

    assert template_hash(RedisSpec(port=6379, num=3, image="redis:5-alpine")) == "f89818275d"
    assert template_hash(RedisSpec(port=6380, num=1, image="redis:7")) == "0e3ffb7eec"
    # num is not part of the pod template: scaling never rolls pods.
    assert template_hash(RedisSpec(6379, 1, "redis:5-alpine")) == "f89818275d"


def test_pod_index_needs_the_dash_right_after_the_name():
    from reconciler.kinds.redis.identity import pod_index

    assert pod_index("r", "rx1") is None
    assert pod_index("ab", "a-1") is None


def test_pod_at_the_recorded_count_is_a_scale_up_not_a_deletion_by_hand():
    r = redis(status={"replicas": 2})
    creates = [
        a for a in plan_redis(r, [pod(r, 0), pod(r, 1)], CONFIG, NOW) if isinstance(a, CreatePod)
    ]
    assert [c.event.message for c in creates] == ["Created pod r-2: scale up"]


def test_pod_manifest_is_what_the_create_of_each_pod_sends():
    r = with_storage(num=2)
    spec = validate(r, "redis:5-alpine").spec
    creates = [a for a in plan(r) if isinstance(a, CreatePod)]
    assert [c.name for c in creates] == ["r-0", "r-1"]
    for i, create in enumerate(creates):
        made = pod_manifest(r, spec, i)
        assert made == create.manifest
        assert made["metadata"]["name"] == f"r-{i}"
        (volume,) = made["spec"]["volumes"]
        assert volume["persistentVolumeClaim"]["claimName"] == f"data-r-{i}"
