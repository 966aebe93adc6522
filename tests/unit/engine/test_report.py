"""The pod report: added, phase and condition transitions, deleted; partial
conditions never break it (seed 000 indexed conditions blindly)."""

from __future__ import annotations

import dataclasses

from reconciler.client.pod_dict import pod_from_api
from reconciler.engine.report import diff, views
from reconciler.model import PodCondition
from tests.unit.builders import pod


def lines(prev, cur):
    return [(line.pod, line.message) for line in diff(prev, cur)]


def test_first_run_reports_everything_as_added():
    assert lines(None, views([pod(None, 0, name="p")])) == [("default/p", "added, phase Running")]


def test_phase_and_condition_transitions():
    before = pod(None, 0, name="p", ready=False)
    after = dataclasses.replace(
        before,
        phase="Running",
        conditions=(
            PodCondition("PodScheduled", "True"),
            PodCondition("Initialized", "True"),
            PodCondition("ContainersReady", "True"),
            PodCondition("Ready", "True"),
        ),
    )
    out = lines(views([before]), views([after]))
    assert out == [
        ("default/p", "phase Pending -> Running"),
        ("default/p", "condition Initialized absent -> True"),
        ("default/p", "condition ContainersReady absent -> True"),
        ("default/p", "condition Ready False -> True"),
    ]


def test_reason_is_reported():
    before = pod(None, 0, name="p")
    after = pod(None, 0, name="p", ready=False)
    assert ("default/p", "condition Ready True -> False (ContainersNotReady)") in lines(
        views([before]), views([after])
    )


def test_deleted_pod_reports_last_phase():
    assert lines(views([pod(None, 0, name="p")]), {}) == [
        ("default/p", "does not exist anymore (last phase Running)")
    ]


def test_no_change_no_lines():
    v = views([pod(None, 0, name="p")])
    assert lines(v, v) == []


def test_pods_without_status_or_with_partial_conditions_decode():
    bare = pod_from_api({"metadata": {"name": "p", "namespace": "n"}})
    assert bare.phase == "Unknown" and bare.conditions == ()
    odd = pod_from_api(
        {
            "metadata": {"name": "q", "namespace": "n"},
            "status": {
                "phase": "Pending",
                "conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"},
                    {"bogus": 1},
                    "junk",
                ],
            },
        }
    )
    assert odd.conditions == (PodCondition("PodScheduled", "False", "Unschedulable"),)
    assert lines(views([bare]), views([bare])) == []
    assert lines({}, views([bare, odd]))[1] == ("n/q", "added, phase Pending")


def test_alike_pods_share_one_view() -> None:
    """A view each held 0.5 kB a pod between passes; most pods are alike."""
    ready = [pod(None, i) for i in range(3)]
    waiting = pod(None, 3, ready=False)
    seen = views([*ready, waiting])
    assert len(seen) == 4
    assert len({id(v) for v in seen.values()}) == 2
    assert seen["default/x-0"] is seen["default/x-2"]
    assert seen["default/x-3"] != seen["default/x-0"]
