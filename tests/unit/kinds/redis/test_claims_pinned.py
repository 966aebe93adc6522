"""claims.py's rules that a sampled mutation run found unpinned (issue 69,
point 6): why a Pending claim will stay so, in the status's own words; a
claim grown this pass named as growing; what a claim is made as, and its
event; claims of scaled-away indexes past another's."""

from __future__ import annotations

import dataclasses

from reconciler.actions import CreateChild, DeleteChild, PatchChild
from reconciler.constants import LABEL_INSTANCE
from reconciler.kinds.redis.claims import CREATED
from reconciler.kinds.redis.identity import COMPONENT, ref
from tests.unit.kinds.redis.helpers import cond, status_of
from tests.unit.kinds.redis.test_claims import claim, of, plan, stored, with_storage


def test_a_claim_without_a_class_where_there_is_no_default_is_named_with_why():
    r = with_storage(num=1)
    bare = claim(r, 0, phase="Pending", capacity=None)
    bare = dataclasses.replace(bare, spec={"resources": bare.spec["resources"]})
    message = status_of(plan(r, [], [bare], classes=())).status["message"]
    assert message == (
        "waiting for 1 of 1 pods to be Ready; claim data-r-0 is Pending: "
        "it names no storage class and the cluster has no default one"
    )


def test_a_claim_grown_this_pass_is_named_as_growing_in_the_same_status():
    """The patch that asks for the new size is written with a status that
    already says the claim grows: no pass in between claims it is done."""
    r = with_storage(num=1, size="2Gi")
    actions = plan(r, [stored(r, 0)], [claim(r, 0)])
    (patch,) = of(PatchChild, actions)
    assert patch.body == {"spec": {"resources": {"requests": {"storage": "2Gi"}}}}
    progressing = cond(status_of(actions).status, "Progressing")
    assert (progressing["status"], progressing["reason"]) == ("True", "ResizingClaims")
    assert progressing["message"] == "claims growing to 2Gi: data-r-0"


def test_a_claim_is_made_read_write_once_and_said_in_a_normal_event():
    """One pod mounts it (a StatefulSet's volumeClaimTemplates alike); the
    event is the Redis's, from its controller, and names the pod."""
    r = with_storage(num=1)
    (create,) = of(CreateChild, plan(r))
    assert create.manifest["spec"] == {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}},
    }
    event = create.event
    assert (event.involved, event.type, event.reason) == (ref(r), "Normal", CREATED)
    assert (event.component, event.message) == (
        COMPONENT,
        "Created claim data-r-0: the data of pod r-0",
    )


def test_a_claim_not_ours_beyond_num_is_skipped_and_ours_after_it_still_go():
    """Another's claim of a scaled-away index is never written, and does
    not keep ours of a higher index from being deleted."""
    r = with_storage(num=1, whenScaled="Delete")
    theirs = claim(r, 1, labels={LABEL_INSTANCE: "r"})  # no managed-by label
    claims = [claim(r, 0), theirs, claim(r, 2)]
    actions = plan(r, [stored(r, 0)], claims)
    (delete,) = of(DeleteChild, actions)
    assert (delete.owner, delete.target.name, delete.uid) == (r.key, "data-r-2", "pvc-2")
    assert delete.why == "scaled down below index 2 (whenScaled Delete)"
    assert not of(PatchChild, actions)
