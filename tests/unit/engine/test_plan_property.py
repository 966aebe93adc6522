"""Properties: a plan does at once all that can be done before the kubelet
acts, so the next plan over its writes is empty; each pass of a multi-pass
process (rolling update, deletion) makes strict progress, and passes converge;
planning is pure."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from datetime import timedelta

from hypothesis import given
from hypothesis import strategies as st

from reconciler.actions import (
    Action,
    CreateChild,
    CreatePod,
    DeleteChild,
    DeletePod,
    EvictPod,
    PatchChild,
    PatchPodMetadata,
    PatchStatus,
)
from reconciler.buckets import bucket_of
from reconciler.children import EXPANSION_FIELD, storage_class_from_api
from reconciler.constants import LABEL_NAME
from reconciler.engine.plan import plan_pass
from reconciler.kinds.base import settings_of
from reconciler.kinds.order import BUCKET_LABEL_WHY
from reconciler.kinds.redis import disruption as redis_disruption
from reconciler.kinds.redis import kind as redis_kind
from reconciler.kinds.redis import network, storage
from reconciler.kinds.redis import service as redis_service
from reconciler.kinds.redis.child_plans import CHILDREN_UNKNOWN
from reconciler.kinds.redis.claims import earlier_owner, is_ours, requested
from reconciler.kinds.redis.identity import FINALIZER, TEMPLATE_HASH_ANNOTATION, owner_of
from reconciler.kinds.redis.pods import spec_drift
from reconciler.kinds.redis.repair import metadata_repair
from reconciler.kinds.redis.settings import DEFAULTS
from reconciler.kinds.redis.spec import validate_spec
from reconciler.model import LABEL_BUCKET, Container, ObjKey, PodCondition
from reconciler.snapshot import Snapshot
from tests.unit import sim
from tests.unit.builders import CONFIG, NOW, budget_of, pod, redis, service_of, snap, xca

NAMES = ("a", "b", "c")
# What a pod was made for (port, image): current or stale under each spec,
# and one whose pods crash (never Ready) under the kubelet of `sim`.
TEMPLATES = (
    (6379, "redis:5-alpine"),
    (6380, "redis:5-alpine"),
    (6379, "redis:4"),
    (6379, sim.CRASHING_IMAGE),
)
# The spec's image: the default, or one that crashes (the fix is a later spec).
IMAGES = (None, None, sim.CRASHING_IMAGE)


def sidecar(p):
    """A mesh's webhook: a second container beside ours."""
    return dataclasses.replace(p, containers=(*p.containers, Container("proxy", "mesh:1")))


def mirror(p):
    """A policy engine's webhook: every image from a mirror registry."""
    containers = tuple(
        dataclasses.replace(c, image=f"mirror.local/{c.image}") for c in p.containers
    )
    return dataclasses.replace(p, containers=containers)


ADMISSIONS = (None, sidecar, mirror)


def evicted(p):
    return dataclasses.replace(
        p,
        phase="Failed",
        reason="Evicted",
        message="The node was low on resource: memory.",
        conditions=(PodCondition("Ready", "False", "PodFailed"),),
    )


def lived(p, draw):
    """What the cluster did to a pod: admission at its creation, then an
    eviction, or a deletion a finalizer holds."""
    admit = draw(st.sampled_from(ADMISSIONS))
    p = admit(p) if admit else p
    fate = draw(st.integers(0, 7))
    if fate == 0:
        p = evicted(p)
    elif fate == 1 and p.terminating:
        p = dataclasses.replace(p, finalizers=("example.com/hold",))
    return p


def drifted(p, draw):
    """Hand edits: an annotation, a label, the controller reference, the image."""
    if draw(st.integers(0, 3)) == 0:
        p = dataclasses.replace(p, annotations={TEMPLATE_HASH_ANNOTATION: "edited"})
    if draw(st.integers(0, 3)) == 0:
        p = dataclasses.replace(p, labels={k: v for k, v in p.labels.items() if k != LABEL_NAME})
    if p.owner_refs and draw(st.integers(0, 3)) == 0:
        refs = (dataclasses.replace(p.owner_refs[0], block_owner_deletion=False),)
        p = dataclasses.replace(p, owner_refs=refs)
    if draw(st.integers(0, 5)) == 0:  # kubectl set image
        (mine, *others) = p.containers
        mine = dataclasses.replace(mine, image="redis:6-edited")
        p = dataclasses.replace(p, containers=(mine, *others), generation=p.generation + 1)
    return p


@st.composite
def services_of(draw, r):
    """None yet; ours as made; ours with what we set changed by hand (and
    labels of others added); or another's holding the name."""
    choice = draw(st.integers(0, 4))
    if choice == 0:
        return []
    made = service_of(r)
    if choice == 2:
        spec = {**made.spec, "selector": {"app": "other"}, "ports": []}
        made = dataclasses.replace(made, labels={"team": "x"}, spec=spec)
    elif choice == 3:
        made = dataclasses.replace(made, controller_uid="foreign")
    return [made]


@st.composite
def budgets_of(draw, r):
    """None yet; ours as made; ours with what we set changed by hand; or
    another's holding the name."""
    choice = draw(st.integers(0, 4))
    if choice == 0:
        return []
    made = budget_of(r)
    if choice == 2:
        selector = {"matchLabels": {**made.spec["selector"]["matchLabels"], "x": "y"}}
        spec = {"minAvailable": 2, "selector": selector}
        made = dataclasses.replace(made, labels={"team": "x"}, spec=spec)
    elif choice == 3:
        made = dataclasses.replace(made, controller_uid="foreign")
    return [made]


EARLIER_UID = "uid-earlier"  # an earlier Redis of the same name, deleted
CLASS = "standard"  # the class every claim is bound in; it may or may not expand
SIZES = ("1Gi", "2Gi")


@st.composite
def storage_specs(draw):
    policy = {
        key: draw(st.sampled_from([storage.RETAIN, storage.DELETE]))
        for key in ("whenDeleted", "whenScaled")
        if draw(st.booleans())
    }
    return {"size": draw(st.sampled_from(SIZES)), storage.POLICY_FIELD: policy}


@st.composite
def claims_of(draw, r):
    """Claims at some indexes, as a pass made them under some policy and
    size: bound, Pending, being deleted, another's of the same name, or
    owned by an earlier Redis of this name (the garbage collector's)."""
    found = []
    for i in draw(st.sets(st.integers(0, 5), max_size=4)):
        owned = draw(st.sampled_from(["none", "this", "this", "earlier"]))
        name = f"data-{r.name}-{i}"
        meta: dict = {"name": name, "namespace": r.namespace, "uid": f"pvc-{r.name}-{i}"}
        meta["labels"] = dict(owner_of(r).labels) if draw(st.integers(0, 5)) else {}
        if owned != "none":
            ref = dict(owner_of(r).owner_ref)
            meta["ownerReferences"] = [ref if owned == "this" else {**ref, "uid": EARLIER_UID}]
        if draw(st.integers(0, 5)) == 0:
            meta["deletionTimestamp"] = "2026-11-22T11:59:00Z"
        size = draw(st.sampled_from(SIZES))
        spec = {"storageClassName": CLASS, "resources": {"requests": {"storage": size}}}
        phase = draw(st.sampled_from(["Bound", "Bound", "Pending"]))
        status = {"phase": phase} | ({"capacity": {"storage": size}} if phase == "Bound" else {})
        made = {"metadata": {**meta, "resourceVersion": "4"}, "spec": spec, "status": status}
        found.append(storage.CHILD.decode(made))
    return found


PEERS = (
    [{"podSelector": {"matchLabels": {"app": "shop"}}}],
    [{"namespaceSelector": {}}, {"podSelector": {}}],
)


@st.composite
def server_fields(draw):
    """Some of the server's fields: a password, directives, a restart, an
    exporter, a network policy."""
    fields = {}
    if draw(st.integers(0, 3)) == 0:
        fields["auth"] = {"passwordSecret": {"name": draw(st.sampled_from(["s1", "s2"]))}}
    if draw(st.integers(0, 3)) == 0:
        fields["config"] = draw(st.sampled_from([["maxmemory 1mb"], ["appendonly yes", 'save ""']]))
    if draw(st.integers(0, 4)) == 0:
        fields["restartedAt"] = draw(st.sampled_from(["2026-11-22T10:00:00Z", "now"]))
    if draw(st.integers(0, 3)) == 0:
        fields["exporter"] = {}
    if draw(st.integers(0, 2)) == 0:
        policy = {"allowFrom": draw(st.sampled_from(PEERS))}
        if draw(st.booleans()):
            policy["metricsFrom"] = draw(st.sampled_from(PEERS))
        fields[network.FIELD] = policy
    return fields


@st.composite
def policies_of(draw, r):
    """None; ours as some spec made it (this one's, another's, or none
    wanted now); drifted by hand; or another's holding the name."""
    choice = draw(st.integers(0, 4))
    if choice == 0:
        return []
    peers = draw(st.sampled_from(PEERS))
    access = network.Access(json.dumps(peers, sort_keys=True))
    want = network.desired_spec(owner_of(r), access, 6379, draw(st.booleans()))
    made = network.CHILD.decode(network.manifest(owner_of(r), want))
    made = dataclasses.replace(made, uid=f"np-{r.uid}", resource_version="1")
    if choice == 2:
        spec = {**made.spec, "podSelector": {}, "ingress": []}
        made = dataclasses.replace(made, labels={"team": "x"}, spec=spec)
    elif choice == 3:
        made = dataclasses.replace(made, controller_uid="foreign", owner_refs=())
    return [made]


@st.composite
def snapshots(draw):
    redises, pods, services, budgets, claims, policies = [], [], [], [], [], []
    for name in draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=3)):
        valid = draw(st.booleans()) or draw(st.booleans())
        spec = {"port": draw(st.sampled_from([6379, 6380])), "num": draw(st.integers(0, 4))}
        spec_image = draw(st.sampled_from(IMAGES))
        if spec_image is not None:
            spec["image"] = spec_image
        if draw(st.integers(0, 5)) == 0:
            spec["paused"] = True
        if draw(st.booleans()):
            spec["storage"] = draw(storage_specs())
        spec.update(draw(server_fields()))
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
        found = draw(policies_of(r))
        if found and found[0].controller_uid == r.uid:
            r = dataclasses.replace(r, status={network.FIELD: r.name})
        redises.append(r)
        policies.extend(found)
        claims.extend(draw(claims_of(r)))
        services.extend(draw(services_of(r)))
        budgets.extend(draw(budgets_of(r)))
        for i in draw(st.sets(st.integers(0, 5), max_size=6)):
            port, image = draw(st.sampled_from(TEMPLATES))
            made = pod(
                r,
                i,
                ready=draw(st.booleans()),
                port=port,
                image=image,
                terminating=draw(st.integers(0, 5)) == 0,
                owner_uid="foreign" if draw(st.integers(0, 8)) == 0 else None,
            )
            made = sim.crash_loop(made) if sim.crashes(made) else made
            pods.append(drifted(lived(made, draw), draw))
    for i in range(draw(st.integers(0, 2))):
        pods.append(pod(None, i, name=f"orphan-{i}", owner_uid=f"dead-{i}"))
    xcas = tuple(
        xca(f"x{i}", active=draw(st.sampled_from([None, True, False])))
        for i in range(draw(st.integers(0, 2)))
    )
    expands = draw(st.booleans())
    classes = (storage_class_from_api({"metadata": {"name": CLASS}, EXPANSION_FIELD: expands}),)
    return snap(
        tuple(redises),
        xcas,
        tuple(pods),
        tuple(services),
        tuple(budgets),
        claims,
        classes,
        policies,
    )


def admission_record(action) -> bool:
    """The one write that follows admission: its rewritten image recorded."""
    return isinstance(action, PatchPodMetadata) and action.why == "changed at admission"


def ended_or_stale(p, spec) -> bool:
    return p.ended or spec_drift(p, spec) is not None


Work = tuple[int, int, int, int, int, int, int]
NONE_LEFT: Work = (0, 0, 0, 0, 0, 0, 0)


def work_left(snap: Snapshot) -> dict[ObjKey, Work]:
    """What is left for the planner to do, per object that plans act on (a
    Redis, or an orphan pod), most important first: (our finalizer and the pods
    of a Redis being deleted, stale desired pods, pods beyond the desired set,
    desired names without a pod, a missing finalizer or an orphan, pods whose
    metadata was changed by hand, its Service missing or drifted). Terminating
    pods count for nothing: they are the kubelet's work, not ours."""
    left: dict[ObjKey, Work] = {}
    uids = {r.uid for r in sim.redises(snap)}
    pods = [p for p in snap.pods or () if not p.terminating]
    for p in pods:
        if p.controller_uid and p.controller_uid not in uids:
            left[p.key] = (0, 0, 0, 0, 1, 0, 0)
    for r in sim.redises(snap):
        owned = [p for p in pods if p.controller_uid == r.uid]
        if r.deletion_timestamp:
            left[r.key] = ((FINALIZER in r.finalizers) + len(owned), 0, 0, 0, 0, 0, 0)
            continue
        unguarded = int(FINALIZER not in r.finalizers)
        spec = validate_spec(r.spec, settings_of(CONFIG, DEFAULTS).image).spec
        if spec is None or spec.paused:
            left[r.key] = (0, 0, 0, 0, unguarded, 0, 0)
            continue
        names = {f"{r.name}-{i}" for i in range(spec.num)}
        desired = [p for p in owned if p.name in names]
        stale = sum(1 for p in desired if ended_or_stale(p, spec))
        extra = sum(1 for p in owned if p.name not in names)
        absent = len(names - {p.name for p in owned})
        edited = sum(1 for p in desired if metadata_repair(r, spec, p) is not None)
        children = (
            service_work(snap, r, spec)
            + budget_work(snap, r, spec)
            + claim_work(snap, r, spec)
            + policy_work(snap, r, spec)
        )
        left[r.key] = (0, stale, extra, absent, unguarded, edited, children)
    return left


def service_work(snap: Snapshot, r, spec) -> int:
    """1 while its Service is missing, or ours and drifted."""
    found = next((c for c in snap.all_children() if c.kind == "Service" and c.name == r.name), None)
    if found is None:
        return 1
    if found.controller_uid != r.uid:
        return 0  # another's: left alone
    metrics = spec.server.exporter is not None
    return int(bool(redis_service.drift(owner_of(r), found, spec.port, metrics)))


def policy_work(snap: Snapshot, r, spec) -> int:
    """1 while its policy is wanted and missing or drifted, or ours and
    not wanted."""
    found = next((c for c in snap.children.get(network.KIND) or () if c.name == r.name), None)
    if found is not None and found.controller_uid != r.uid:
        return 0  # another's: left alone
    if spec.access is None:
        return int(found is not None)
    exporter = spec.server.exporter is not None
    want = network.desired_spec(owner_of(r), spec.access, spec.port, exporter)
    return int(found is None or bool(network.drift(owner_of(r), found, want)))


def budget_work(snap: Snapshot, r, spec) -> int:
    """1 while its budget is missing (two pods or more), drifted, or there
    when it should not be (fewer)."""
    found = next(
        (c for c in snap.all_children() if c.kind == "PodDisruptionBudget" and c.name == r.name),
        None,
    )
    if found is not None and found.controller_uid != r.uid:
        return 0  # another's: left alone
    if spec.num < redis_disruption.MIN_PODS:
        return int(found is not None)
    return int(found is None or bool(redis_disruption.drift(owner_of(r), found, spec.num)))


def claim_work(snap: Snapshot, r, spec) -> int:
    """Each claim of a desired index missing, each of ours with owner
    references the policy does not want or smaller than the spec when its
    class lets it grow, and each of ours scaled away under whenScaled Delete
    whose pod is gone."""
    if spec.storage is None:
        return 0
    claims = {
        c.name: c for c in snap.children.get(storage.KIND) or () if c.namespace == r.namespace
    }
    expands = any(c.spec.get(EXPANSION_FIELD) for c in snap.children.get("StorageClass") or ())
    pods = {p.name for p in snap.pods or ()}
    left = 0
    for i in range(6):
        c = claims.get(f"data-{r.name}-{i}")
        if i < spec.num and (c is None or earlier_owner(owner_of(r), c) is not None):
            left += 1  # to make (once the garbage collector took the earlier one)
        if c is None or c.terminating or not is_ours(owner_of(r), c):
            continue
        owned = [ref.uid for ref in c.owner_refs if ref.kind == "Redis"]
        left += owned != ([r.uid] if spec.storage.when_deleted == storage.DELETE else [])
        small = (requested(c) or 0) < spec.storage.size_bytes
        left += i < spec.num and expands and small
        gone = i >= spec.num and f"{r.name}-{i}" not in pods
        left += gone and spec.storage.when_scaled == storage.DELETE
    return left


def claims_deleted_safely(snap: Snapshot, actions) -> None:
    """No plan deletes a claim under whenScaled Retain, or the claim of an
    index below num, or one that is not ours."""
    by_key = {r.key: r for r in sim.redises(snap)}
    claims = {c.key: c for c in snap.children.get(storage.KIND) or ()}
    for a in actions:
        if not (isinstance(a, DeleteChild) and a.kind == storage.KIND):
            continue
        r = by_key[a.owner]
        spec = validate_spec(r.spec, settings_of(CONFIG, DEFAULTS).image).spec
        index = int(a.target.name.rsplit("-", 1)[1])
        assert spec.storage.when_scaled == storage.DELETE and index >= spec.num, a.describe()
        assert is_ours(owner_of(r), claims[a.target]), a.describe()


def potential(snap: Snapshot) -> list[int]:
    """All the work left, for messages."""
    return [sum(column) for column in zip(NONE_LEFT, *work_left(snap).values(), strict=True)]


HOLDERS = st.sampled_from([None, "replica-a"])  # unsharded, or a sharded replica


def label_only(action) -> bool:
    """A sharded replica's bucket label on an object or a pod: no progress
    of the object's own, and written once."""
    return getattr(action, "why", None) == BUCKET_LABEL_WHY


@given(snapshots(), st.sampled_from(ADMISSIONS), HOLDERS)
def test_second_plan_over_our_own_writes_is_empty(snap, admit, holder):
    """Only our own writes have landed, and they unblock no step of a
    multi-pass process: a rolling update waits for the replacement pod to be
    Ready, a deletion for the pods to be gone, and only the kubelet does either.
    So any action in the second plan is one the first plan should have taken,
    or a repeat of a write the planner did not see (status too: it is planned
    as it will be once the pass's writes land). The garbage collector has
    done its part before: a claim an earlier Redis of the same name owns,
    which a pod waits on, goes by its hand, as a pod stops by the kubelet's."""
    snap = sim.apply(snap, ())
    first = plan_pass(snap, CONFIG, NOW, holder=holder)
    after = sim.apply(snap, first.actions, admit)
    second = plan_pass(after, CONFIG, NOW, holder=holder)
    # What admission made of a create is seen, at the earliest, in the pass
    # after it: a rewritten image is recorded on the pod once, and then the
    # plan is empty. Nothing else is planned (a sidecar is not even that).
    recorded = [a for a in second.actions if admission_record(a)]
    assert all(admit is mirror and a.verb == "patch-metadata" for a in recorded)
    if recorded:
        after = sim.apply(after, recorded)
        second = plan_pass(after, CONFIG, NOW, holder=holder)
    # What a budget holds comes in the passes after: a budget patch waits
    # for a pass that changes none of its Redis's pods (the disruption
    # controller writes the budget's status as they change, so the patch
    # would meet a 409), and a pass asks no more evictions than our budget
    # allows. Each is made then, each pod evicted once, and then nothing
    # is left.
    previous = first.actions
    for _ in range(len(snap.pods or ()) + 1):
        if not second.actions or not _held_by_budget(second.actions, previous):
            break
        after = sim.apply(after, second.actions)
        previous, second = second.actions, plan_pass(after, CONFIG, NOW, holder=holder)
    done = {(a.verb, a.target) for a in first.actions}
    lines = [
        a.describe() + (" (again)" if (a.verb, a.target) in done else "") for a in second.actions
    ]
    assert second.actions == (), "first plan:\n  {}\nsecond plan:\n  {}".format(
        "\n  ".join(a.describe() for a in first.actions), "\n  ".join(lines)
    )


def _held_by_budget(actions: Sequence[Action], previous: Sequence[Action]) -> bool:
    """Each Redis planned for changed its pods in the pass before, and now
    makes what its budget held: its budget's patch, or another pod's
    eviction (with the status that counts it)."""
    by_owner: dict[ObjKey, list[Action]] = {}
    for a in actions:
        by_owner.setdefault(a.owner, []).append(a)
    for owner, planned in by_owner.items():
        changed = [a for a in previous if isinstance(a, POD_CHANGES) and a.owner == owner]
        evicted = {a.name for a in changed if isinstance(a, EvictPod)}
        held = [
            a
            for a in planned
            if (isinstance(a, EvictPod) and evicted and a.name not in evicted)
            or (isinstance(a, PatchChild) and a.kind == "PodDisruptionBudget")
        ]
        rest = [a for a in planned if a not in held and not isinstance(a, PatchStatus)]
        if not changed or not held or rest:
            return False
    return True


POD_CHANGES = (CreatePod, DeletePod, EvictPod)


def paused_pods(snap: Snapshot) -> dict[str, set[str]]:
    """The uids of the live pods of each paused Redis."""
    out: dict[str, set[str]] = {}
    for r in sim.redises(snap):
        spec = validate_spec(r.spec, settings_of(CONFIG, DEFAULTS).image).spec
        if spec is not None and spec.paused and not r.deletion_timestamp:
            out[r.uid] = {
                p.uid for p in snap.pods or () if p.controller_uid == r.uid and not p.terminating
            }
    return out


@given(snapshots(), st.sampled_from(ADMISSIONS), HOLDERS)
def test_plan_apply_converges_to_an_empty_plan(snap, admit, holder):
    """Whatever admission does to the pods we create: a pass never fights it."""
    now = NOW
    seen = []
    kept = paused_pods(snap)
    for _ in range(40):
        result = plan_pass(snap, CONFIG, now, holder=holder)
        # Converged: nothing to do, and nothing left for the kubelet either.
        if not result.actions and not any(p.terminating for p in snap.pods):
            break
        seen.append(potential(snap))
        claims_deleted_safely(snap, result.actions)
        after = sim.apply(snap, result.actions, admit)
        # Each object written to (more than its status) makes strict progress:
        # a multi-pass process (rolling update, deletion) moves one step.
        before, left = work_left(snap), work_left(after)
        written = (
            a for a in result.actions if not isinstance(a, PatchStatus) and not label_only(a)
        )
        for key in {a.owner for a in written}:
            assert left.get(key, NONE_LEFT) < before.get(key, NONE_LEFT), "\n".join(
                a.describe() for a in result.actions if a.owner == key
            )
        snap = sim.kubelet(after)
        now += timedelta(seconds=30)
    else:
        raise AssertionError(f"no convergence; potentials {seen}")
    # Converged: every valid live Redis has exactly its desired, current pods.
    for r in sim.redises(snap):
        owned = sorted(p.name for p in snap.pods if p.controller_uid == r.uid and not p.terminating)
        if r.deletion_timestamp:  # held only by someone else's finalizer now
            assert FINALIZER not in r.finalizers and owned == []
            continue
        spec = validate_spec(r.spec, settings_of(CONFIG, DEFAULTS).image).spec
        if spec is None:
            continue
        if spec.paused:  # its live pods left as they were, and the status says so
            assert kept[r.uid] <= {p.uid for p in snap.pods}
            conflicts = ("PodConflict", "ServiceConflict", network.CONFLICT)
            assert r.status["state"] in ("Paused", *conflicts)
            continue
        foreign = {p.name for p in snap.pods if p.controller_uid != r.uid}
        want = sorted(f"{r.name}-{i}" for i in range(spec.num) if f"{r.name}-{i}" not in foreign)
        mine = [p for p in snap.pods if p.controller_uid == r.uid]
        kept_up = [p for p in mine if p.name in set(owned) - set(want)]
        if kept_up:  # only a spec whose pods crash: our budget keeps a Ready pod serving
            assert spec.image == sim.CRASHING_IMAGE and all(p.ready for p in kept_up)
            ready = sum(1 for p in mine if p.ready and not p.terminating)
            assert ready <= spec.num - redis_disruption.MAX_UNAVAILABLE
            ready_cond = next(c for c in r.status["conditions"] if c["type"] == "Ready")
            assert ready_cond["status"] == "False"
        assert [n for n in owned if n not in {p.name for p in kept_up}] == want
        assert not any(p.ended for p in mine)
        stale = [p for p in mine if spec_drift(p, spec) is not None and p not in kept_up]
        if stale:  # only a spec whose pods crash: the Ready stale pods keep serving
            assert spec.image == sim.CRASHING_IMAGE
            assert all(p.ready for p in stale) and any(not p.ready for p in mine)
            progressing = next(c for c in r.status["conditions"] if c["type"] == "Progressing")
            assert progressing["reason"] in ("RollingUpdate", "ProgressDeadlineExceeded")
        assert all(metadata_repair(r, spec, p) is None for p in mine if p not in kept_up)
        assert FINALIZER in r.finalizers
        assert r.status["replicas"] == len(want)
        assert service_work(snap, r, spec) == 0
        assert budget_work(snap, r, spec) == 0
        assert claim_work(snap, r, spec) == 0
    live_uids = {r.uid for r in sim.redises(snap)}
    assert all(
        p.controller_uid in live_uids or p.controller_uid == "foreign" for p in snap.pods
    )  # no orphans
    assert all(x.status.get("active") is True for x in sim.xcas(snap))
    if holder is not None:  # every live object and pod of ours carries its bucket
        live = [*sim.redises(snap), *sim.xcas(snap)]
        bucket = {o.uid: str(bucket_of(o.uid, CONFIG.shard_buckets)) for o in live}
        assert all(o.bucket_label == bucket[o.uid] for o in live if not o.deletion_timestamp)
        assert all(
            p.labels.get(LABEL_BUCKET) == bucket[p.controller_uid]
            for p in snap.pods
            if p.controller_uid in bucket and not p.terminating
        )


@given(snapshots())
def test_plan_is_deterministic_and_pure(snap):
    first, again = plan_pass(snap, CONFIG, NOW), plan_pass(snap, CONFIG, NOW)
    assert first == again

    def owners(plan):
        return {k: (o.ref, o.owner_uid, o.status_after is None) for k, o in plan.owners.items()}

    assert owners(first) == owners(again)
    assert set(first.owners) == {a.owner for a in first.actions}


def test_a_failed_list_of_one_kind_leaves_the_others_planned():
    x = xca(active=False)
    assert [a.owner for a in plan_pass(snap(None, (x,), ()), CONFIG, NOW).actions] == [x.key]


def test_pods_controlled_by_a_kind_that_owns_none_are_never_orphans():

    r = redis(num=0)
    stray = pod(None, 0, name="stray", owner_uid="gone")
    stray = dataclasses.replace(stray, controller_kind="Xca")
    actions = plan_pass(snap((sim_converged(r),), (), (stray,)), CONFIG, NOW).actions
    assert actions == ()


def sim_converged(r):
    """r with the status the planner wants when it has no pods."""
    first = plan_pass(snap((r,), (), ()), CONFIG, NOW)
    return sim.redis_named(sim.apply(snap((r,), (), ()), first.actions), r.name)


def test_a_status_patch_is_dropped_when_only_pruned_fields_would_change():
    from reconciler.actions import PatchStatus
    from reconciler.engine.plan import unpruned
    from tests.unit.builders import redis

    r = redis(num=1, status={"replicas": 1, "state": "Ready"})
    only_pruned = PatchStatus(r.key, "10", {"replicas": 1, "lastProgressTime": "t"})
    assert unpruned(r, [only_pruned], frozenset({"lastProgressTime"})) == []
    more = PatchStatus(r.key, "10", {"replicas": 2, "lastProgressTime": "t"})
    (kept,) = unpruned(r, [more], frozenset({"lastProgressTime"}))
    assert dict(kept.status) == {"replicas": 2}
    assert unpruned(r, [only_pruned], None) == [only_pruned]


REFUSABLE = (storage.KIND, redis_service.KIND, redis_disruption.KIND, network.KIND, "StorageClass")


def refused(snap: Snapshot, kinds) -> Snapshot:
    """``snap`` as a pass sees it when the LIST of ``kinds`` is refused."""
    children = {**snap.children, **dict.fromkeys(kinds)}
    why = {k: f"LIST {k}: 403 Forbidden: {k} is forbidden" for k in kinds}
    return dataclasses.replace(snap, children=children, unlisted=why)


@given(snapshots(), st.sets(st.sampled_from(REFUSABLE), min_size=1))
def test_a_refused_kind_is_never_written_and_each_redis_that_needs_it_says_so_once(snap, kinds):
    """No write of a kind not seen; Degraded on each valid live Redis that
    makes a child of it (its `child_names`), ChildrenUnknown on none that
    reads nothing of it; said once, not each pass."""
    blind = refused(snap, kinds)
    first = plan_pass(blind, CONFIG, NOW)
    children = (CreateChild, PatchChild, DeleteChild)
    assert not [a for a in first.actions if isinstance(a, children) and a.kind in kinds]
    after = dataclasses.replace(sim.apply(blind, first.actions), unlisted=blind.unlisted)
    for r in sim.redises(after):
        spec = validate_spec(r.spec, settings_of(CONFIG, DEFAULTS).image).spec
        if r.deletion_timestamp or spec is None:
            continue
        makes = {kind for kind, _ in redis_kind.child_names(r)}
        reads = makes | ({"StorageClass"} if spec.storage is not None else set())
        degraded = next(c for c in r.status["conditions"] if c["type"] == "Degraded")
        if makes & kinds:
            assert degraded["status"] == "True", (kinds, degraded)
        if degraded["reason"] == CHILDREN_UNKNOWN:
            assert reads & kinds, (kinds, degraded)
    second = plan_pass(after, CONFIG, NOW + timedelta(seconds=30))
    again = [
        e for a in second.actions if isinstance(a, PatchStatus) for e in a.events
        if e.reason == CHILDREN_UNKNOWN
    ]  # fmt: skip
    assert again == []
