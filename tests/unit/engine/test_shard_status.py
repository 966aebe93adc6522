"""Sharded plans: status.shard names the replica that holds an object's
bucket, and the bucket label is on the object and its pods; each written
only when it changes."""

from __future__ import annotations

import dataclasses

from reconciler.actions import PatchStatus
from reconciler.engine.plan import plan_pass
from reconciler.model import LABEL_BUCKET
from tests.unit import sim
from tests.unit.builders import CONFIG, NOW, pod, redis, snap, xca


def status_patches(p):
    return {a.owner.name: a.status for a in p.actions if isinstance(a, PatchStatus)}


def converged_redis():
    r = redis(num=1)
    pods = [pod(r, 0)]
    (patch,) = status_patches(plan_pass(snap([r], [], pods), CONFIG, NOW)).values()
    return dataclasses.replace(r, status=patch), pods


def test_a_holder_and_the_bucket_labels_are_written_once_and_then_cost_nothing():
    r, pods = converged_redis()
    x = dataclasses.replace(xca(active=True), status={"active": True})
    first = plan_pass(snap([r], [x], pods), CONFIG, NOW, holder="host-a")
    assert status_patches(first) == {
        "r": {**r.status, "shard": "host-a"},
        "x": {"backoff": None, "shard": "host-a"},
    }
    verbs = sorted((a.verb, a.target.name) for a in first.actions)
    assert verbs == [
        ("patch-labels", "r"),
        ("patch-labels", "x"),
        ("patch-metadata", "r-0"),
        ("patch-status", "r"),
        ("patch-status", "x"),
    ]
    after = sim.apply(snap([r], [x], pods), first.actions)
    (labelled,) = after.pods
    assert labelled.labels[LABEL_BUCKET] == sim.redises(after)[0].bucket_label
    assert plan_pass(after, CONFIG, NOW, holder="host-a").actions == ()


def test_a_new_holder_is_written_and_a_sync_beside_the_replicas_leaves_it_alone():
    """`reconciler sync` (unsharded) next to sharded daemons must not undo
    what they write: a null from it, the holder back from them, forever."""
    r, pods = converged_redis()
    r = dataclasses.replace(r, status={**r.status, "shard": "host-a"})
    after = sim.apply(
        snap([r], [], pods), plan_pass(snap([r], [], pods), CONFIG, NOW, holder="host-a").actions
    )
    (r,), pods = sim.redises(after), list(after.pods)
    moved = status_patches(plan_pass(snap([r], [], pods), CONFIG, NOW, holder="host-b"))
    assert moved["r"]["shard"] == "host-b"
    after = sim.apply(
        snap([r], [], pods), plan_pass(snap([r], [], pods), CONFIG, NOW, holder="host-b").actions
    )
    (r,), pods = sim.redises(after), list(after.pods)
    assert plan_pass(snap([r], [], pods), CONFIG, NOW).actions == ()  # status and labels stay


def test_unsharded_passes_never_mention_the_field():
    r, pods = converged_redis()
    assert "shard" not in r.status
    assert plan_pass(snap([r], [], pods), CONFIG, NOW).actions == ()
