"""The rolling update (kinds/redis/rollout.py)."""

from __future__ import annotations

import pytest

from reconciler.actions import (
    DeletePod,
    EvictPod,
)
from tests.unit.builders import (
    CONFIG,
    NOW,
    current_hash,
    plan_redis,
    pod,
    redis,
    removed,
)
from tests.unit.kinds.redis.helpers import (
    cond,
    crashing,
    ended,
    image_pull_backoff,
    pod_unready,
    status_of,
)


def test_stale_pod_replaced_when_all_others_ready():
    r = redis(port=6380)
    stale = current_hash(6379)
    pods = [pod(r, i, hash_=stale) for i in range(3)]
    actions = plan_redis(r, pods, CONFIG, NOW)
    deletes = [a for a in actions if isinstance(a, DeletePod | EvictPod)]
    assert [(d.name, d.why) for d in deletes] == [("r-0", "spec changed")]
    st = status_of(actions).status
    assert cond(st, "Progressing")["reason"] == "RollingUpdate"
    assert st["updatedReplicas"] == 0


def test_rollout_waits_while_another_pod_is_not_ready():
    r = redis(port=6380)
    old = current_hash(6379)
    pods = [pod(r, 0, hash_=old), pod(r, 1, ready=False, port=6380), pod(r, 2, port=6380)]
    actions = plan_redis(r, pods, CONFIG, NOW)
    assert not [a for a in actions if isinstance(a, DeletePod | EvictPod)]


def test_rollout_waits_while_a_pod_is_missing_or_terminating():
    r = redis(port=6380)
    old = current_hash(6379)
    for others in ([pod(r, 1)], [pod(r, 1), pod(r, 2, terminating=True)]):
        pods = [pod(r, 0, hash_=old), *others]
        deletes = [a for a in removed(plan_redis(r, pods, CONFIG, NOW))]
        assert deletes == []


def test_rollout_resumes_with_next_stale_pod():
    r = redis(port=6380)
    old = current_hash(6379)
    pods = [pod(r, 0, port=6380), pod(r, 1, hash_=old), pod(r, 2, hash_=old)]
    deletes = [a for a in removed(plan_redis(r, pods, CONFIG, NOW))]
    assert [d.name for d in deletes] == ["r-1"]


def test_a_fix_rolls_to_pods_that_all_crash():
    """Every pod crashes on the old spec: none will be Ready, so waiting for
    the others before replacing one would wait forever. All go in one pass."""
    r = redis(num=3, image="redis:6")
    pods = [crashing(pod(r, i, image="redis:5-alpine")) for i in range(3)]
    actions = plan_redis(r, pods, CONFIG, NOW)
    deletes = [a for a in actions if isinstance(a, DeletePod | EvictPod)]
    assert [d.name for d in deletes] == ["r-0", "r-1", "r-2"]
    assert {d.why for d in deletes} == {"spec changed; not Ready, so replaced without waiting"}
    st = status_of(actions).status
    assert (st["replicas"], st["updatedReplicas"]) == (0, 0)
    assert cond(st, "Progressing")["reason"] == "RollingUpdate"


def test_unready_stale_pods_go_first_while_ready_ones_wait():
    """r-0 cannot pull the bad image and r-2 came back on it after a deletion
    by hand; once the image is fixed both go at once, and the Ready r-1,
    stale too, waits until the others are Ready again."""
    r = redis(num=3, image="redis:5-alpine")
    bad = dict(image="redis:does-not-exist")
    pods = [
        image_pull_backoff(pod_unready(pod(r, 0, **bad))),
        pod(r, 1, image="redis:4"),
        image_pull_backoff(pod_unready(pod(r, 2, **bad))),
    ]
    deletes = [a.name for a in removed(plan_redis(r, pods, CONFIG, NOW))]
    assert deletes == ["r-0", "r-2"]
    pods = [pod(r, 0), pod(r, 1, image="redis:4"), pod(r, 2, ready=False)]
    assert not [a for a in removed(plan_redis(r, pods, CONFIG, NOW))]
    pods = [pod(r, 0), pod(r, 1, image="redis:4"), pod(r, 2)]
    deletes = [a.name for a in removed(plan_redis(r, pods, CONFIG, NOW))]
    assert deletes == ["r-1"]


def test_an_unready_pod_on_the_current_spec_is_left_to_its_kubelet():
    """Only stale pods are replaced: a crash on the current spec is not ours to fix."""
    r = redis(num=2)
    pods = [crashing(pod(r, 0)), pod(r, 1)]
    assert not [a for a in removed(plan_redis(r, pods, CONFIG, NOW))]


def test_an_ended_pod_does_not_block_the_rollout_of_the_others():
    """The ended pod is replaced first; its replacement is made for the new
    spec, and once it is Ready the stale pods roll one at a time."""
    r = redis(num=3, image="redis:6")
    old = dict(image="redis:5-alpine")
    pods = [pod(r, 0, **old), ended(pod(r, 1, **old)), pod(r, 2, **old)]
    actions = plan_redis(r, pods, CONFIG, NOW)
    assert [a.name for a in actions if isinstance(a, DeletePod | EvictPod)] == ["r-1"]
    pods = [pod(r, 0, **old), pod(r, 1, image="redis:6"), pod(r, 2, **old)]
    deletes = [a.name for a in removed(plan_redis(r, pods, CONFIG, NOW))]
    assert deletes == ["r-0"]


def test_a_terminating_pod_is_neither_ready_nor_updated_nor_replaced_in_a_rollout():
    r = redis(num=2, image="redis:6")
    pods = [pod(r, 0, terminating=True, image="redis:6"), pod(r, 1)]
    st = status_of(plan_redis(r, pods, CONFIG, NOW)).status
    assert (st["replicas"], st["readyReplicas"], st["updatedReplicas"]) == (1, 1, 0)
    # r-1 is stale, but r-0 is going: replacing r-1 now would leave no pod.
    assert not [a for a in removed(plan_redis(r, pods, CONFIG, NOW))]


# ------------------------------------------------ which stale pod rolls


@pytest.mark.parametrize(
    ("num", "stale", "first"),
    [(3, (2, 1, 0), "r-0"), (3, (2, 1), "r-1"), (11, (10, 2), "r-2")],
)
def test_of_several_ready_stale_pods_the_lowest_index_rolls_first(num, stale, first):
    """Listed in any order (the apiserver's is by name: r-10 before r-2)."""
    r = redis(num=num, image="redis:6")
    fresh = [pod(r, i, image="redis:6") for i in range(num) if i not in stale]
    pods = [pod(r, i, image="redis:5-alpine") for i in stale] + fresh
    assert [a.name for a in removed(plan_redis(r, pods, CONFIG, NOW))] == [first]
