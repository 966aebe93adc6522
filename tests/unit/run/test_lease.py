"""The typed Lease: decoded once, written back with what it does not model."""

from __future__ import annotations

from dataclasses import replace

from reconciler.run.lease import Lease

READ = {
    "apiVersion": "coordination.k8s.io/v1",
    "kind": "Lease",
    "metadata": {
        "name": "reconciler",
        "namespace": "ops",
        "resourceVersion": "41",
        "uid": "u-1",
        "labels": {"team": "storage"},
        "finalizers": ["example.com/keep"],
    },
    "spec": {
        "holderIdentity": "a",
        "leaseDurationSeconds": 15,
        "acquireTime": "2026-01-01T00:00:00.000000Z",
        "renewTime": "2026-01-01T00:00:10.000000Z",
        "leaseTransitions": 3,
        "preferredHolder": "b",
    },
}


def test_a_lease_read_and_written_unchanged_is_the_object_read():
    assert Lease.decode(READ).encode("ops") == READ


def test_a_renewal_changes_the_renew_time_and_keeps_the_rest():
    lease = Lease.decode(READ).held_by("a", "2026-01-01T00:00:12.000000Z", 15)
    body = lease.encode("ops")
    assert body["spec"] == {**READ["spec"], "renewTime": "2026-01-01T00:00:12.000000Z"}
    assert body["metadata"] == READ["metadata"]


def test_a_takeover_is_a_new_acquisition_and_one_more_transition():
    lease = Lease.decode(READ).held_by("b", "2026-01-01T00:01:00.000000Z", 20)
    spec = lease.encode("ops")["spec"]
    assert (spec["holderIdentity"], spec["leaseTransitions"], spec["leaseDurationSeconds"]) == (
        "b",
        4,
        20,
    )
    assert spec["acquireTime"] == spec["renewTime"] == "2026-01-01T00:01:00.000000Z"
    assert spec["preferredHolder"] == "b"


def test_a_released_lease_says_nobody_holds_it():
    body = replace(Lease.decode(READ), holder="").encode("ops")
    assert body["spec"]["holderIdentity"] == ""


def test_a_new_lease_carries_only_what_was_set():
    body = Lease(name="probe").encode("ops")
    assert body == {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "probe", "namespace": "ops"},
        "spec": {},
    }


def test_fields_that_are_not_numbers_read_as_unset():
    lease = Lease.decode({"metadata": {"name": "x"}, "spec": {"leaseDurationSeconds": "soon"}})
    assert lease.duration is None and lease.duration_or(15) == 15.0
    assert lease.holder == "" and lease.version == ""
