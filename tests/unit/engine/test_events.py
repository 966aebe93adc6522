"""reconciler/engine/events.py: the queue that posts events beside the pass."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

from reconciler.actions import EventSpec, ObjRef
from reconciler.engine.apply import ApplyOptions, Executor
from reconciler.engine.events import EventQueue, EventSink
from reconciler.model import rfc3339
from tests.unit.builders import CONFIG, NOW, plan_redis, redis
from tests.unit.engine.executing import plan_of
from tests.unit.fakes import FakeKube
from tests.unit.stored import holding

REF = ObjRef("example.com/v1", "Redis", "ns", "r", "uid-r")


def spec(reason: str) -> EventSpec:
    return EventSpec(REF, "Normal", reason, f"{reason} happened", "redis-controller")


def hanging_events(kube: FakeKube) -> threading.Event:
    """Event POSTs hang until the returned gate opens; other writes do not.
    (Event names are "<object>.<digest>"; no pod name here has a dot.)"""
    gate = threading.Event()

    def on_call(verb: str, name: str) -> None:
        if verb == "POST" and "." in name:
            assert gate.wait(10), "the test never opened the gate"

    kube.on_call = on_call
    return gate


def posted(kube: FakeKube) -> list[dict[str, Any]]:
    return [body for (kind, _, _), body in kube.objects.items() if kind == "Event"]


def test_a_pass_ends_without_waiting_for_its_events() -> None:
    r = redis(num=2)
    kube = holding(r)
    gate = hanging_events(kube)
    queue = EventQueue(kube, clock=lambda: NOW)
    actions = plan_redis(r, [], CONFIG, NOW)
    sink = EventSink(kube, lambda: NOW, queue)
    Executor(kube, sink, ApplyOptions(concurrency=4)).run(plan_of(actions))
    # The pods and the status are written; the event still hangs in the queue.
    assert [w[:2] for w in kube.writes] == [("POST", "Pod"), ("POST", "Pod"), ("PATCH", "Redis")]
    assert posted(kube) == []
    gate.set()
    assert queue.flush(timeout=10) == 0
    assert [e["message"] for e in posted(kube)] == ["Created pods r-0, r-1: scale up"]


def test_events_are_posted_in_order_with_the_time_they_were_queued() -> None:
    kube = FakeKube()
    times = iter([NOW, NOW + timedelta(seconds=5)])
    queue = EventQueue(kube, clock=lambda: next(times))
    queue.put(spec("First"))
    queue.put(spec("Second"))
    assert queue.flush(timeout=10) == 0
    stamps = [(e["reason"], e["firstTimestamp"]) for e in posted(kube)]
    assert stamps == [("First", rfc3339(NOW)), ("Second", rfc3339(NOW + timedelta(seconds=5)))]


def test_a_flush_that_times_out_says_how_many_events_are_left() -> None:
    kube = FakeKube()
    gate = hanging_events(kube)
    queue = EventQueue(kube, clock=lambda: NOW)
    for reason in ("A", "B", "C"):
        queue.put(spec(reason))
    assert queue.flush(timeout=0.2) == 3  # one being posted, two queued
    gate.set()
    assert queue.flush(timeout=10) == 0
    assert len(posted(kube)) == 3


def test_a_full_queue_holds_the_pass_back_instead_of_growing() -> None:
    kube = FakeKube()
    gate = hanging_events(kube)
    queue = EventQueue(kube, clock=lambda: NOW, limit=1)
    queue.put(spec("A"))  # taken by the poster, which hangs
    queue.put(spec("B"))  # waits for A to be taken, then fills the queue
    third = threading.Thread(target=queue.put, args=(spec("C"),))
    third.start()
    third.join(timeout=0.3)
    assert third.is_alive(), "a put into a full queue returned"
    gate.set()
    third.join(timeout=10)
    assert queue.flush(timeout=10) == 0
    assert sorted(e["reason"] for e in posted(kube)) == ["A", "B", "C"]
