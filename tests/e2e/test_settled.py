"""Passes that share one State (the daemon, `sync --wait`) skip the work the
previous pass already did, on the real apiserver: objects at the same
resourceVersion are not decoded again, settled objects are not planned again,
and a change by hand to any of them is still seen at the next pass."""

from __future__ import annotations

from reconciler.actions import CreatePod
from reconciler.client.kube import Kube
from reconciler.config import Config
from reconciler.engine.state import State
from reconciler.engine.sync import PassSetup, pass_once

from .conftest import Kubectl, wait_for
from .test_pass import XCA
from .test_redis import redis_yaml, settled


def converge(kube: Kube, config: Config, state: State, kubectl: Kubectl, ns: str) -> None:
    def done() -> bool:
        return not pass_once(PassSetup(kube=kube, config=config), state).plan.actions and settled(
            kubectl, ns
        )

    wait_for(done, what="convergence", timeout=60)


def test_settled_objects_are_reused_and_a_change_by_hand_still_counts(
    kubectl: Kubectl, cluster, ns: str
) -> None:
    kube = Kube(Config(kubeconfig=str(cluster.kubeconfig)))
    config = Config(namespaces=(ns,))
    state = State()
    kubectl.apply(redis_yaml(ns, num=2))
    kubectl.apply(XCA.format(name="xca-sample", ns=ns))
    converge(kube, config, state, kubectl, ns)

    before = state.seen
    quiet = pass_once(PassSetup(kube=kube, config=config), state)
    assert quiet.writes == 0 and not quiet.plan.actions
    assert {k.kind for k in quiet.plan.settled.objects} == {"Redis", "Xca"}
    # The same objects, not copies: nothing was decoded again.
    assert before is not None and state.seen is not None
    assert all(a is b for a, b in zip(before.pods or (), state.seen.pods or (), strict=True))
    for kind in ("Redis", "Xca"):
        assert all(
            a is b for a, b in zip(before.of(kind) or (), state.seen.of(kind) or (), strict=True)
        )

    kubectl.run("delete", "pod", "redis-sample-1", "-n", ns, "--wait=false")
    kubectl.apply(redis_yaml(ns, num=3))
    back = pass_once(PassSetup(kube=kube, config=config), state)
    created = sorted(a.target.name for a in back.plan.actions if isinstance(a, CreatePod))
    # redis-sample-1 may still be terminating (kwok): then it comes next pass.
    assert "redis-sample-2" in created
    converge(kube, config, state, kubectl, ns)
    names = sorted(p["metadata"]["name"] for p in kubectl.json("get", "pods", "-n", ns)["items"])
    assert names == ["redis-sample-0", "redis-sample-1", "redis-sample-2"]
