"""Objects settled in one pass are not planned again in the next: the plan a
pass makes with the previous pass's ``settled`` is the plan it makes without.

The in-memory cluster (`sim`) gives every written object a new
resourceVersion, as the apiserver does; a hand edit here does the same."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from hypothesis import given
from hypothesis import strategies as st

from reconciler.config import Config
from reconciler.engine.plan import plan_pass
from reconciler.health import Health
from reconciler.kinds.redis.settings import RedisSettings
from reconciler.settled import NOTHING_SETTLED, Settled
from reconciler.snapshot import Snapshot
from tests.unit.engine.test_plan_property import snapshots

from . import sim
from .builders import CONFIG, NOW, failing, pod, redis, snap, xca

SENTINEL = Health("FromTheSettledRecord", "reused, not planned")


def edited(snapshot: Snapshot, draw: st.DrawFn) -> Snapshot:
    """A hand edit between two passes: a pod deleted or made unready, a spec
    changed, a namespace put into deletion. Each gives a new resourceVersion."""
    pods = list(snapshot.pods or ())
    redises = list(sim.redises(snapshot))
    what = draw(st.sampled_from(["none", "delete pod", "unready pod", "scale", "closing"]))
    if what in ("delete pod", "unready pod") and pods:
        i = draw(st.integers(0, len(pods) - 1))
        if what == "delete pod":
            del pods[i]
        else:
            pods[i] = sim.bumped(dataclasses.replace(pods[i], conditions=()))
    elif what == "scale" and redises:
        i = draw(st.integers(0, len(redises) - 1))
        r = redises[i]
        spec = {**r.spec, "num": draw(st.integers(0, 4))}
        redises[i] = sim.bumped(dataclasses.replace(r, spec=spec, generation=r.generation + 1))
    out = snap(tuple(redises), sim.xcas(snapshot), tuple(pods))
    if what == "closing":
        out = dataclasses.replace(out, terminating=frozenset({"default"}))
    return out


@given(snapshots(), st.data())
def test_a_pass_given_what_settled_plans_as_a_fresh_pass_does(snapshot, data):
    """Through convergence, hand edits and time: never a different plan, health
    or settled record, only less work."""
    settled, now = NOTHING_SETTLED, NOW
    for _ in range(12):
        fresh = plan_pass(snapshot, CONFIG, now)
        reusing = plan_pass(snapshot, CONFIG, now, settled)
        assert reusing == fresh
        settled = reusing.settled
        snapshot = edited(sim.kubelet(sim.apply(snapshot, fresh.actions)), data.draw)
        now += timedelta(seconds=data.draw(st.sampled_from([1, 30, 3600])))


def converged() -> Snapshot:
    r = redis(num=2)
    s = snap((r,), (xca(active=True),), (pod(r, 0), pod(r, 1)))
    for _ in range(3):
        s = sim.kubelet(sim.apply(s, plan_pass(s, CONFIG, NOW).actions))
    assert plan_pass(s, CONFIG, NOW).actions == ()
    return s


def marked(settled: Settled) -> Settled:
    """The same record with a health no planner makes: seen again only if reused."""
    objects = {k: dataclasses.replace(v, health=SENTINEL) for k, v in settled.objects.items()}
    return Settled(settled.config, objects)


def test_a_converged_object_is_taken_from_the_record_and_not_planned():
    s = converged()
    record = marked(plan_pass(s, CONFIG, NOW).settled)
    assert {k.kind for k in record.objects} == {"Redis", "Xca"}
    again = plan_pass(s, CONFIG, NOW + timedelta(hours=1), record)
    assert set(again.health.values()) == {SENTINEL}
    assert again.actions == ()


def test_a_pod_at_a_new_version_makes_its_owner_planned_again():
    s = converged()
    record = marked(plan_pass(s, CONFIG, NOW).settled)
    first, *rest = s.pods
    s2 = dataclasses.replace(s, pods=(sim.bumped(dataclasses.replace(first, conditions=())), *rest))
    again = plan_pass(s2, CONFIG, NOW, record)
    redis_key = next(k for k in again.health if k.kind == "Redis")
    assert again.health[redis_key] != SENTINEL
    assert [a.owner for a in again.actions] == [redis_key]  # readyReplicas drops to 1


def test_a_foreign_pod_taking_a_desired_name_makes_its_owner_planned_again():
    s = converged()
    record = marked(plan_pass(s, CONFIG, NOW).settled)
    r = sim.redises(s)[0]
    foreign = pod(None, 1, name="r-1", owner_uid="someone-else")
    s2 = dataclasses.replace(s, pods=(*(p for p in s.pods if p.name != "r-1"), foreign))
    again = plan_pass(s2, CONFIG, NOW, record)
    assert again.health[r.key].state == "PodConflict"


def test_nothing_is_reused_under_another_config():
    s = converged()
    record = marked(plan_pass(s, CONFIG, NOW).settled)
    other = Config(kind_settings=(RedisSettings(image="redis:6-alpine"),))
    assert SENTINEL not in plan_pass(s, other, NOW, record).health.values()


def test_an_object_with_a_failure_record_is_never_settled():
    """Its backoff gate reads the clock: its plan can change with time alone."""
    from reconciler.backoff import Failure

    s = converged()
    x = failing(sim.xcas(s)[0], Failure(5, "boom", "Conflict", NOW.timestamp() + 60))
    s2 = snap(sim.redises(s), (x,), s.pods)
    assert x.key not in plan_pass(s2, CONFIG, NOW).settled.objects
