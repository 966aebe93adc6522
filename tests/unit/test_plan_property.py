"""Property: applying a plan converges, and the next plan is empty except for
steps of a multi-pass process (rolling update, deletion), which must make
strict progress."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.actions import CreatePod, DeletePod, PatchFinalizers, PatchStatus
from reconciler.constants import FINALIZER
from reconciler.model import Snapshot
from reconciler.plan import plan, template_hash
from reconciler.spec import validate_redis_spec

from . import sim
from .builders import CONFIG, NOW, current_hash, pod, redis, xca

NAMES = ("a", "b", "c")
HASHES = (current_hash(6379), current_hash(6380), "stale00000")


@st.composite
def snapshots(draw):
    redises, pods = [], []
    for name in draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=3)):
        valid = draw(st.booleans()) or draw(st.booleans())
        spec = {"port": draw(st.sampled_from([6379, 6380])), "num": draw(st.integers(0, 4))}
        if not valid:
            spec = draw(st.sampled_from([{"port": 6399, "num": 2}, {"port": 6379, "num": "x"}]))
        r = redis(
            name,
            spec=spec,
            finalizers=draw(st.sampled_from([(), (FINALIZER,), ("x/y", FINALIZER)])),
            deleting=draw(st.integers(0, 4)) == 0,
        )
        if r.deletion_timestamp and not r.finalizers:
            r = dataclasses.replace(r, finalizers=("x/y",))
        redises.append(r)
        for i in draw(st.sets(st.integers(0, 5), max_size=6)):
            pods.append(
                pod(
                    r,
                    i,
                    ready=draw(st.booleans()),
                    hash_=draw(st.sampled_from(HASHES)),
                    terminating=draw(st.integers(0, 5)) == 0,
                    owner_uid="foreign" if draw(st.integers(0, 8)) == 0 else None,
                )
            )
    for i in range(draw(st.integers(0, 2))):
        pods.append(pod(None, i, name=f"orphan-{i}", owner_uid=f"dead-{i}"))
    xcas = tuple(
        xca(f"x{i}", active=draw(st.sampled_from([None, True, False])))
        for i in range(draw(st.integers(0, 2)))
    )
    return Snapshot(tuple(redises), xcas, tuple(pods))


def potential(snap: Snapshot) -> tuple[int, int, int]:
    """Work left: (objects being deleted, stale pods, missing or extra pods)."""
    deleting = stale = missing = 0
    for r in snap.redis or ():
        owned = [p for p in snap.pods or () if p.controller_uid == r.uid]
        if r.deletion_timestamp:
            deleting += 1 + len(owned)
            continue
        spec, _ = validate_redis_spec(r.spec, CONFIG.image)
        if spec is None:
            continue
        want = template_hash(spec)
        stale += sum(1 for p in owned if p.template_hash != want)
        missing += abs(spec.num - len([p for p in owned if not p.terminating]))
    return deleting, stale, missing


def is_progress_step(action) -> bool:
    """Actions that legitimately follow a previous pass's writes."""
    if isinstance(action, DeletePod):
        return action.why in ("spec changed", "Redis deleted")
    if isinstance(action, CreatePod):
        return action.event is not None and action.event.message.endswith("spec changed")
    return isinstance(action, PatchFinalizers) and FINALIZER not in action.finalizers


SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(snapshots())
def test_second_plan_holds_only_progress_steps(snap):
    first = plan(snap, CONFIG, NOW)
    after = sim.apply(snap, first.actions)
    second = plan(after, CONFIG, NOW)
    extra = [a for a in second.actions if not is_progress_step(a)]
    # A status write may accompany a progress step on the same object.
    progressing = {a.owner for a in second.actions if is_progress_step(a)}
    extra = [a for a in extra if not (isinstance(a, PatchStatus) and a.owner in progressing)]
    assert extra == [], "\n".join(a.describe() for a in extra)
    if second.actions:
        assert (
            potential(after) < potential(snap)
            or any(isinstance(a, DeletePod) and a.why == "spec changed" for a in first.actions)
            or any(isinstance(a, PatchFinalizers) for a in first.actions)
        )


@SETTINGS
@given(snapshots())
def test_plan_apply_converges_to_an_empty_plan(snap):
    now = NOW
    seen = []
    for _ in range(40):
        result = plan(snap, CONFIG, now)
        # Converged: nothing to do, and nothing left for the kubelet either.
        if not result.actions and not any(p.terminating for p in snap.pods):
            break
        seen.append(potential(snap))
        snap = sim.kubelet(sim.apply(snap, result.actions))
        now += timedelta(seconds=30)
    else:
        raise AssertionError(f"no convergence; potentials {seen}")
    # Converged: every valid live Redis has exactly its desired, current pods.
    for r in snap.redis or ():
        owned = sorted(p.name for p in snap.pods if p.controller_uid == r.uid and not p.terminating)
        if r.deletion_timestamp:  # held only by someone else's finalizer now
            assert FINALIZER not in r.finalizers and owned == []
            continue
        spec, _ = validate_redis_spec(r.spec, CONFIG.image)
        if spec is None:
            continue
        foreign = {p.name for p in snap.pods if p.controller_uid != r.uid}
        want = sorted(f"{r.name}-{i}" for i in range(spec.num) if f"{r.name}-{i}" not in foreign)
        assert owned == want
        assert FINALIZER in r.finalizers
        assert r.status["replicas"] == len(want)
    live_uids = {r.uid for r in snap.redis or ()}
    assert all(
        p.controller_uid in live_uids or p.controller_uid == "foreign" for p in snap.pods
    )  # no orphans
    assert all(x.status.get("active") is True for x in snap.xcas)


@SETTINGS
@given(snapshots())
def test_plan_is_deterministic_and_pure(snap):
    assert plan(snap, CONFIG, NOW) == plan(snap, CONFIG, NOW)
