"""Observe (engine/observe/observation.py): why a kind of child was not
seen, when the next pass will meet it again (`Snapshot.unlisted`), for the
statuses of the objects that need it to say."""

from __future__ import annotations

import pytest

from reconciler.client.errors import ApiError, Unreachable
from reconciler.constants import LABEL_MANAGED_BY, MANAGED_BY
from reconciler.engine.observe import observe
from reconciler.engine.observe.lister import ListSettings
from tests.unit.engine.observe.world import FULL, PAGE, redis_obj
from tests.unit.fakes import FakeKube

FORBIDDEN = ApiError(403, "Forbidden", "persistentvolumeclaims is forbidden")
CHILD_KINDS = ("PersistentVolumeClaim", "Service", "PodDisruptionBudget", "NetworkPolicy")


def wanting_every_kind() -> dict:
    """A Redis whose pass lists each kind of child: two pods (a budget),
    storage (claims) and a network policy."""
    r = redis_obj("r0", num=2)
    r["spec"] |= {"storage": {"size": "1Gi"}, "networkPolicy": {"allowFrom": []}}
    return r


def claim_obj(name: str) -> dict:
    meta = {"name": name, "namespace": "a", "uid": f"uid-{name}", "resourceVersion": "1"}
    meta["labels"] = {LABEL_MANAGED_BY: MANAGED_BY}
    return {"metadata": meta, "spec": {"storageClassName": "standard"}, "status": {}}


def observed(kube: FakeKube):
    return observe(
        kube, (), None, ListSettings(protobuf=False, page_size=FULL, metadata_page_size=PAGE)
    )


@pytest.mark.parametrize("kind", CHILD_KINDS)
@pytest.mark.parametrize(
    ("error", "lasting"),
    [
        (FORBIDDEN, True),
        (ApiError(401, "Unauthorized", "Unauthorized"), True),
        (ApiError(500, "InternalError", "etcd timed out"), False),
        (ApiError(429, "TooManyRequests", "slow down"), False),
        (Unreachable("timed out"), False),
    ],
)
def test_only_a_child_list_refusal_that_will_last_is_told_to_the_statuses(kind, error, lasting):
    kube = FakeKube()
    kube.held["Redis"] = [wanting_every_kind()]
    kube.scripted_errors[("LIST", kind)] = error
    snapshot = observed(kube).snapshot
    assert snapshot.children[kind] is None
    assert snapshot.unlisted == ({kind: f"LIST {kind}: {error}"} if lasting else {})
    if not isinstance(error, Unreachable):  # which fails the LISTs after it unasked
        assert all(snapshot.children[k] is not None for k in CHILD_KINDS if k != kind)


def test_storage_classes_refused_are_told_only_once_a_claim_is_seen():
    kube = FakeKube()
    kube.scripted_errors[("LIST", "StorageClass")] = FORBIDDEN
    kube.held["Redis"] = [wanting_every_kind()]
    assert observed(kube).snapshot.unlisted == {}  # no claim of ours: not asked
    kube.held["PersistentVolumeClaim"] = [claim_obj("data-r0-0")]
    assert observed(kube).snapshot.unlisted == {"StorageClass": f"LIST StorageClass: {FORBIDDEN}"}


def test_a_kind_no_object_wants_is_neither_listed_nor_told():
    """Claims are listed on demand: without a Redis with storage, a role
    without them meets no 403 and no status says anything."""
    kube = FakeKube()
    kube.held["Redis"] = [redis_obj("r0")]
    kube.scripted_errors[("LIST", "PersistentVolumeClaim")] = FORBIDDEN
    snapshot = observed(kube).snapshot
    assert snapshot.children["PersistentVolumeClaim"] is None
    assert snapshot.unlisted == {}
