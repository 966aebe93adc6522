"""status.shard: the replica that holds an object's bucket, written only when it changes."""

from __future__ import annotations

import dataclasses

from reconciler.actions import PatchStatus
from reconciler.engine.plan import plan

from .builders import CONFIG, NOW, pod, redis, snap, xca


def status_patches(p):
    return {a.owner.name: a.status for a in p.actions if isinstance(a, PatchStatus)}


def converged_redis():
    r = redis(num=1)
    pods = [pod(r, 0)]
    (patch,) = status_patches(plan(snap([r], [], pods), CONFIG, NOW)).values()
    return dataclasses.replace(r, status=patch), pods


def test_a_holder_is_recorded_once_and_then_costs_nothing():
    r, pods = converged_redis()
    x = dataclasses.replace(xca(active=True), status={"active": True})
    first = plan(snap([r], [x], pods), CONFIG, NOW, holder="host-a")
    assert status_patches(first) == {
        "r": {**r.status, "shard": "host-a"},
        "x": {"backoff": None, "shard": "host-a"},
    }
    r = dataclasses.replace(r, status={**r.status, "shard": "host-a"})
    x = dataclasses.replace(x, status={**x.status, "shard": "host-a"})
    assert plan(snap([r], [x], pods), CONFIG, NOW, holder="host-a").actions == ()


def test_a_new_holder_is_written_and_an_unsharded_pass_removes_the_field():
    r, pods = converged_redis()
    r = dataclasses.replace(r, status={**r.status, "shard": "host-a"})
    moved = status_patches(plan(snap([r], [], pods), CONFIG, NOW, holder="host-b"))
    assert moved["r"]["shard"] == "host-b"
    unsharded = status_patches(plan(snap([r], [], pods), CONFIG, NOW))
    assert unsharded["r"]["shard"] is None


def test_unsharded_passes_never_mention_the_field():
    r, pods = converged_redis()
    assert "shard" not in r.status
    assert plan(snap([r], [], pods), CONFIG, NOW).actions == ()
