"""tests/unit/sim.py lands a plan as FakeKube does, and so as the apiserver
does: FakeKube is held to the apiserver by the client contract
(tests/client_contract.py); sim, which applies a plan's actions to a
snapshot's values for the convergence properties (hundreds of plans a run,
where the executor and a store of API objects would cost several times
more), is held to FakeKube here, over the same snapshots: each action of
the same plan is sent to the fake as the executor's writer sends it
(engine/writes.py, the resourceVersion threaded through an object's
writes), every action tried whatever the one before met, as sim lands them.

Only the apiserver's part is compared: sim's controllers (kubelet,
disruption controller, provisioner) run in other steps, and its garbage
collector is applied to both sides. StorageClasses, read and never
written, are left out. A pod deleted is left out of both: sim
keeps it terminating until its kubelet runs, the fake (no kubelet) drops it.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given

from reconciler.client.pod_dict import pod_from_api
from reconciler.engine.failures import WriteFailed, WriteRefused, WriteThrottled
from reconciler.engine.plan import plan_pass
from reconciler.engine.writes import ObjectRun, Writer
from reconciler.kinds import registry
from reconciler.kinds.redis.identity import from_api as redis_from_api
from reconciler.kinds.xca import from_api as xca_from_api
from reconciler.snapshot import Snapshot
from tests.unit import sim
from tests.unit.builders import CONFIG, NOW
from tests.unit.engine.test_plan_property import HOLDERS, snapshots
from tests.unit.fakes import FakeKube
from tests.unit.stored import holding

View = dict[str, dict[Any, Any]]


def _view(redis: list, xcas: list, pods: list, children: dict[str, list]) -> View:
    live = {r.uid for r in redis}
    return {
        "Redis": {r.key: (dict(r.status), tuple(r.finalizers), r.bucket_label) for r in redis},
        "Xca": {x.key: (dict(x.status), x.bucket_label) for x in xcas},
        "Pod": {
            p.key: (dict(p.labels), dict(p.annotations), p.controller_uid)
            for p in pods
            if not p.terminating
        },
        **{
            kind: {
                c.key: (dict(c.labels), dict(c.spec), c.controller_uid)
                for c in found
                if c.controller_uid in live | {"foreign"} or not (c.controller_uid or c.owner_refs)
            }
            for kind, found in children.items()
        },
    }


def of_sim(s: Snapshot) -> View:
    listed = {k: list(v) for k, v in s.children.items() if v is not None and k != "StorageClass"}
    return _view(list(sim.redises(s)), list(sim.xcas(s)), list(s.pods or ()), listed)


def of_fake(kube: FakeKube, listed: set[str]) -> View:
    stored: dict[str, list[dict[str, Any]]] = {}
    for (kind, _, _), obj in kube.objects.items():
        stored.setdefault(kind, []).append(obj)
    redis = [redis_from_api(o) for o in stored.get("Redis", [])]
    return _view(
        [r for r in redis if not (r.deletion_timestamp and not r.finalizers)],
        [xca_from_api(o) for o in stored.get("Xca", [])],
        [pod_from_api(o) for o in stored.get("Pod", [])],
        {k: [registry.child_types()[k].decode(o) for o in stored.get(k, [])] for k in listed},
    )


def sent(kube: FakeKube, actions) -> list[str]:
    """Each action's request, as the writer sends it; a refusal is the
    request's answer, not the end of the object's writes. The answers."""
    writer, runs, answers = Writer(kube, lambda events: None), {}, []
    for action in actions:
        try:
            result = writer.do(action, runs.setdefault(action.owner, ObjectRun()))
        except (WriteFailed, WriteRefused, WriteThrottled) as exc:
            result = exc
        answers.append(f"{action.describe()}: {result}")
    return answers


def held(s: Snapshot) -> FakeKube:
    children = [c for found in s.children.values() for c in found or ()]
    return holding(*sim.redises(s), *sim.xcas(s), *(s.pods or ()), *children)


@given(snapshots(), HOLDERS)
def test_sim_lands_a_plan_as_the_fake_does(snap, holder):
    listed = {k for k, v in snap.children.items() if v is not None and k != "StorageClass"}
    kube = held(snap)
    plan = plan_pass(snap, CONFIG, NOW, holder=holder)
    answers = sent(kube, plan.actions)
    by_sim, by_fake = of_sim(sim.apply(snap, plan.actions)), of_fake(kube, listed)
    assert by_sim == by_fake, "\n".join(answers + list(_differences(by_sim, by_fake)))


def _differences(by_sim: View, by_fake: View):
    for kind in sorted(set(by_sim) | set(by_fake)):
        ours, theirs = by_sim.get(kind, {}), by_fake.get(kind, {})
        for key in sorted(set(ours) | set(theirs), key=str):
            if ours.get(key) != theirs.get(key):
                yield f"{key}:\n  sim  {ours.get(key)}\n  fake {theirs.get(key)}"
