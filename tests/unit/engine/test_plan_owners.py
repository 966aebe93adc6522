"""What a plan keeps of each object it writes for (`Plan.owners`): the
bucket the write fence is asked about, and the status rule the executor
runs after one of its writes failed."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from reconciler.actions import PatchPodMetadata, PatchStatus
from reconciler.backoff import STATUS_FIELD, Failure, WriteError
from reconciler.buckets import bucket_of
from reconciler.engine.plan import plan_pass
from reconciler.model import LABEL_BUCKET
from tests.unit.builders import CONFIG, NOW, failing, pod, redis, snap, xca

BOOM = WriteError("500 InternalError: etcd", "ReconcileError")


def rule_of(plan, key):
    rule = plan.owners[key].status_after
    assert rule is not None
    return rule


def test_an_object_planned_without_its_pods_is_fenced_by_its_own_bucket():
    r = redis()
    blind = dataclasses.replace(snap((r,), (), None), pods_error="LIST Pod: 403 Forbidden")
    plan = plan_pass(blind, CONFIG, NOW, holder="host-a")
    assert plan.owners[r.key].owner_uid == r.uid


def test_an_xcas_status_after_a_failure_records_it():
    """Its one write is its status: after that write fails, the status
    written once more holds the failure record the next pass reads back."""
    x = xca(active=None)
    plan = plan_pass(snap((), (x,), ()), CONFIG, NOW)
    (patch,) = rule_of(plan, x.key)(BOOM, [])
    assert isinstance(patch, PatchStatus)
    assert patch.status[STATUS_FIELD]["failures"] == 1
    assert patch.status[STATUS_FIELD]["reason"] == "ReconcileError"


def test_a_redis_backing_off_has_a_status_rule_too():
    """Held, it writes only its status; if that write fails, the failure is
    counted in the status written after it."""
    held = Failure(3, "boom", "ReconcileError", (NOW + timedelta(minutes=5)).timestamp())
    r = failing(redis(num=1), held)
    plan = plan_pass(snap((r,), (), ()), CONFIG, NOW)
    assert r.key in plan.backing_off
    (patch,) = rule_of(plan, r.key)(BOOM, [])
    assert patch.status[STATUS_FIELD]["failures"] == 4


def test_a_status_after_a_failure_leaves_out_the_fields_the_crd_prunes():
    r = redis(num=1)
    pruned = dataclasses.replace(snap((r,), (), ()), pruned={"Redis": frozenset({"state"})})
    (patch,) = rule_of(plan_pass(pruned, CONFIG, NOW), r.key)(BOOM, [])
    assert "state" not in patch.status and "conditions" in patch.status


def test_a_pod_whose_labels_are_put_back_gets_its_bucket_label_in_the_same_patch():
    r = redis(num=1)
    r = dataclasses.replace(r, bucket_label=str(bucket_of(r.uid, CONFIG.shard_buckets)))
    edited = dataclasses.replace(pod(r, 0), labels={})
    plan = plan_pass(snap((r,), (), (edited,)), CONFIG, NOW, holder="host-a")
    (repair,) = [a for a in plan.actions if isinstance(a, PatchPodMetadata)]
    assert repair.labels[LABEL_BUCKET] == r.bucket_label
    assert len(repair.labels) > 1  # ours put back too, in one write


def test_an_orphan_pods_delete_is_fenced_by_its_gone_owners_bucket():
    """A sharded replica may delete an orphan only for a bucket it holds:
    the one of the owner that is gone, not any bucket."""
    orphan = pod(None, 0, name="gone-0", owner_uid="uid-gone")
    plan = plan_pass(snap((), (), (orphan,)), CONFIG, NOW)
    (delete,) = plan.actions
    assert plan.owners[delete.owner].owner_uid == "uid-gone"


def test_a_write_of_a_kind_without_a_status_rule_leaves_none_to_run(monkeypatch):
    """A kind whose plan has no status rule after a failure (`Planned`
    without one) gets none from the plan: the executor writes no status."""
    from reconciler.kinds import registry
    from reconciler.kinds import xca as xca_kind
    from reconciler.kinds.base import Planned

    def bare(obj, inp):
        return Planned(xca_kind.plan(obj, inp))

    bare_kind = dataclasses.replace(xca_kind.KIND, plan=bare)
    monkeypatch.setattr(registry, "KINDS", (registry.KINDS[0], bare_kind))
    x = xca(active=None)
    plan = plan_pass(snap((), (x,), ()), CONFIG, NOW)
    assert plan.actions and plan.owners[x.key].status_after is None


def test_a_status_patch_without_a_pruned_field_is_planned_as_its_kind_made_it():
    """Only a status patch that holds a field the CRD prunes is remade;
    another passes as it was planned (its fields named as the kind named them)."""
    x = xca(active=None)
    plain = plan_pass(snap((), (x,), ()), CONFIG, NOW)
    pruned = dataclasses.replace(snap((), (x,), ()), pruned={"Xca": frozenset({"elsewhere"})})
    assert plan_pass(pruned, CONFIG, NOW).actions == plain.actions
