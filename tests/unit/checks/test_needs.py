"""What a pass asks of the apiserver, derived from the kinds' declarations:
the same rules the hand-kept table had for Redis and Xca, nothing for what a
kind does not declare, and a write no rule is known for refused."""

from __future__ import annotations

from dataclasses import replace

import pytest

from reconciler.actions import CreateChild, PatchStatus
from reconciler.checks.needs import needs
from reconciler.kinds import xca
from reconciler.kinds.order import Step, sharded
from reconciler.kinds.redis import kind as redis

R, X = "myapp.demo.kubebuilder.io", "apps.xca.k8s.kb.cx"
# The table kept by hand before it was derived (0.2.0's checks/access.py),
# in the order of the shipped ClusterRole's rules.
BY_HAND = {
    (R, "redis"): {"get", "list", "patch"},
    (X, "xcas"): {"get", "list", "patch"},
    (R, "redis/status"): {"patch"},
    (X, "xcas/status"): {"patch"},
    (R, "redis/finalizers"): {"update"},
    ("", "pods"): {"get", "list", "create", "delete", "patch"},
    ("", "pods/eviction"): {"create"},
    ("", "services"): {"get", "list", "create", "patch"},
    ("policy", "poddisruptionbudgets"): {"get", "list", "create", "patch", "delete"},
    ("", "persistentvolumeclaims"): {"get", "list", "create", "patch", "delete"},
    ("storage.k8s.io", "storageclasses"): {"list"},
    ("networking.k8s.io", "networkpolicies"): {"get", "list", "create", "patch", "delete"},
    ("", "events"): {"create", "get", "patch"},
    ("", "namespaces"): {"get", "list"},
}


def test_redis_and_xca_need_what_the_hand_kept_table_granted_in_its_order():
    found = needs((redis.KIND, xca.KIND))
    assert list(found.plain) == list(BY_HAND)
    assert {rule: set(verbs) for rule, verbs in found.plain.items()} == BY_HAND
    crds = ("apiextensions.k8s.io", "customresourcedefinitions")
    assert found.named == {
        crds: (
            frozenset({"get"}),
            frozenset({"redis.myapp.demo.kubebuilder.io", "xcas.apps.xca.k8s.kb.cx"}),
        )
    }
    assert found.cluster_scoped == {
        ("storage.k8s.io", "storageclasses"): {"list"},
        ("", "namespaces"): {"get"},
    }


def test_a_kind_that_owns_nothing_needs_its_own_objects_pods_read_and_no_more():
    found = needs((xca.KIND,))
    assert {rule: set(verbs) for rule, verbs in found.plain.items()} == {
        (X, "xcas"): {"get", "list", "patch"},
        (X, "xcas/status"): {"patch"},
        ("", "pods"): {"get", "list"},  # every pass LISTs our pods
        ("", "events"): {"create", "get", "patch"},
        ("", "namespaces"): {"get", "list"},
    }
    assert found.cluster_scoped == {("", "namespaces"): {"get"}}


def test_a_verb_a_kind_drops_from_its_order_is_no_longer_granted():
    """The role follows the steps: a Redis order without its budget's
    delete grants no delete of budgets."""
    steps = [s for s in redis.ORDER.steps[1:-1] if s.name != "budget"]
    steps.append(Step("budget", (CreateChild,), "PodDisruptionBudget"))
    found = needs((replace(redis.KIND, order=sharded(*steps)),))
    assert found.plain[("policy", "poddisruptionbudgets")] == {"get", "list", "create", "patch"}


def test_a_step_of_a_child_the_kind_does_not_declare_is_refused():
    order = sharded(Step("status", (PatchStatus,)), Step("x", (CreateChild,), "ConfigMap"))
    with pytest.raises(TypeError, match="ConfigMap is none of its children"):
        needs((replace(xca.KIND, order=order),))


def test_a_write_no_request_is_known_for_is_refused():
    order = sharded(Step("status", (PatchStatus,)), Step("odd", (int,)))
    with pytest.raises(TypeError, match="no request known for int"):
        needs((replace(xca.KIND, order=order),))
