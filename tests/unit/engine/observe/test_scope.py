"""Observe, a sharded replica (engine/observe/scope.py): its buckets, what
is not labelled, and labels changed by hand."""

from __future__ import annotations

from datetime import UTC, datetime

from reconciler.buckets import Scope
from reconciler.config import Config
from reconciler.constants import MANAGED_POD_SELECTOR
from reconciler.engine.observe import observe
from reconciler.engine.observe.lister import ListSettings
from reconciler.engine.plan import plan_pass
from reconciler.model import LABEL_BUCKET
from tests.unit.engine.observe.world import (
    FULL,
    PAGE,
    bucketed,
    names,
    pod_obj,
    sharded_cluster,
    sharded_pass,
)


def test_a_sharded_replica_lists_its_buckets_and_what_is_not_labelled_in_one_list_a_kind():
    kube, true = sharded_cluster()
    held = frozenset({true["r7"], (true["r7"] + 1) % 4})
    seen = sharded_pass(kube, Scope(4, held, select=True))
    others = ",".join(str(b) for b in range(4) if b not in held)
    assert kube.selectors == [
        ("Pod", f"{MANAGED_POD_SELECTOR},{LABEL_BUCKET} notin ({others})"),
        ("Redis", f"{LABEL_BUCKET} notin ({others})"),
        ("Xca", f"{LABEL_BUCKET} notin ({others})"),
        ("Service", MANAGED_POD_SELECTOR),  # of every bucket: kept by their controller
        ("PodDisruptionBudget", MANAGED_POD_SELECTOR),
        ("Namespace", None),
    ]
    ours = {n for n, b in true.items() if b in held and n != "r6"}
    assert "r7" in ours  # not labelled yet, and listed
    assert {r.name for r in seen.snapshot.of("Redis")} == ours
    # r6's pod, if in these buckets, is left out with its owner: no orphan.
    assert names(seen.snapshot.pods) == sorted(f"{n}-0" for n in ours)


def test_the_pod_of_an_object_whose_label_was_changed_by_hand_is_no_orphan():
    kube, true = sharded_cluster()
    held = frozenset({true["r6"]})
    seen = sharded_pass(kube, Scope(4, held, select=True))
    assert "r6-0" not in names(seen.snapshot.pods)
    the_plan = plan_pass(seen.snapshot, Config(), datetime(2026, 11, 25, tzinfo=UTC))
    assert not [a for a in the_plan.actions if getattr(a, "why", "") == "owner gone"]


def test_what_carries_the_label_of_a_held_bucket_not_its_own_is_reported_not_kept():
    kube, true = sharded_cluster()
    label = (true["r6"] + 1) % 4  # r6's label, changed by hand
    held = frozenset({label}) - {true["r6"]}
    seen = sharded_pass(kube, Scope(4, held, select=True))
    assert "r6" not in {r.name for r in seen.snapshot.of("Redis")}
    assert seen.mislabelled == {true["r6"]}
    # Nothing is reported where labels and buckets agree.
    honest = sharded_pass(kube, Scope(4, frozenset({true["r6"]}), select=True))
    assert honest.mislabelled == frozenset()


def test_a_pod_under_the_label_of_a_held_bucket_not_its_controllers_is_reported():
    kube, true = sharded_cluster()
    wrong = (true["r1"] + 1) % 4
    kube.held["Pod"] = [
        bucketed(pod_obj("r1-0", labelled=True, owner="uid-r1"), wrong),
    ]
    seen = sharded_pass(kube, Scope(4, frozenset({wrong}), select=True))
    assert "r1-0" not in names(seen.snapshot.pods)
    assert seen.mislabelled == {true["r1"]}


def test_a_full_pass_finds_an_object_whose_label_was_changed_by_hand():
    kube, true = sharded_cluster()
    held = frozenset({true["r6"]})
    selected = sharded_pass(kube, Scope(4, held, select=True))
    assert "r6" not in {r.name for r in selected.snapshot.of("Redis")}
    kube.selectors.clear()
    full = sharded_pass(kube, Scope(4, held, select=False))
    assert kube.selectors[:2] == [("Pod", MANAGED_POD_SELECTOR), ("Redis", None)]
    assert "r6" in {r.name for r in full.snapshot.of("Redis")}
    assert {r.name for r in full.snapshot.of("Redis")} == {n for n, b in true.items() if b in held}


def test_a_full_pass_after_a_selected_one_reads_metadata_and_gets_only_what_it_holds():
    """Listing everything costs a LIST of metadata: what is in scope and new
    is fetched by name, what is not is dropped unread."""
    kube, true = sharded_cluster()
    held = frozenset({true["r6"]})
    selected = sharded_pass(kube, Scope(4, held, select=True))
    got: list[tuple[str, str]] = []
    kube.on_call = lambda verb, name: got.append((verb, name))
    kube.streamed.clear()
    full = observe(
        kube,
        (),
        MANAGED_POD_SELECTOR,
        ListSettings(protobuf=False, page_size=FULL, metadata_page_size=PAGE),
        scope=Scope(4, held, select=False),
        previous=selected.snapshot,
    )
    # metadata only: no full LIST
    assert kube.streamed == ["Pod", "Redis", "Xca", "Service", "PodDisruptionBudget"]
    mine = {n for n, b in true.items() if b in held}
    # No Service exists yet: each one in scope is looked up by name.
    services = [f"service/{n}" for n in mine]
    assert sorted(n for verb, n in got if verb == "GET") == sorted(["r6", "r6-0", *services])
    assert {r.name for r in full.snapshot.of("Redis")} == mine
