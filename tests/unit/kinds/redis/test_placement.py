"""Placement and resources: passed to the pods, checked, rolled, and never
compared on a running pod (admission changes them)."""

from __future__ import annotations

import dataclasses

import pytest

from reconciler.actions import CreatePod, DeletePod, PatchPodMetadata
from reconciler.kinds.base import settings_of
from reconciler.kinds.redis import placement as placement
from reconciler.kinds.redis.identity import FIELDS_HASH_ANNOTATION, TEMPLATE_HASH_ANNOTATION
from reconciler.kinds.redis.pods import spec_drift
from reconciler.kinds.redis.settings import DEFAULTS
from reconciler.kinds.redis.spec import validate_spec
from tests.unit.builders import CONFIG, NOW, plan_redis, pod, redis, removed

PLACED = {
    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
    "nodeSelector": {"disktype": "ssd"},
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "redis"}],
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                ]
            }
        }
    },
    "priorityClassName": "high",
}


def placed_redis(num: int = 1, **fields: object):
    return redis(num=num, spec={"port": 6379, "num": num, **fields})


def created(r) -> list[CreatePod]:
    return [a for a in plan_redis(r, [], CONFIG, NOW) if isinstance(a, CreatePod)]


def made_from(create: CreatePod, r, index: int):
    """The pod the apiserver would store for this create."""
    annotations = create.manifest["metadata"]["annotations"]
    p = pod(r, index, hash_=annotations[TEMPLATE_HASH_ANNOTATION])
    return dataclasses.replace(p, annotations=dict(annotations))


def test_every_field_reaches_the_pod_as_written():
    (create,) = created(placed_redis(**PLACED))
    spec = create.manifest["spec"]
    assert spec["containers"][0]["resources"] == PLACED["resources"]
    for name in ("nodeSelector", "tolerations", "affinity", "priorityClassName"):
        assert spec[name] == PLACED[name], name


def test_without_an_affinity_the_pods_prefer_different_nodes():
    (create,) = created(placed_redis())
    anti = create.manifest["spec"]["affinity"]["podAntiAffinity"]
    (term,) = anti["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["weight"] == 100
    assert term["podAffinityTerm"] == {
        "topologyKey": "kubernetes.io/hostname",
        "labelSelector": {
            "matchLabels": {"app.kubernetes.io/name": "redis", "app.kubernetes.io/instance": "r"}
        },
    }
    assert "resources" not in create.manifest["spec"]["containers"][0]


@pytest.mark.parametrize(
    "field,value",
    [
        ("nodeSelector", {"disktype": "hdd"}),
        ("tolerations", []),
        ("affinity", None),
        ("resources", {"requests": {"cpu": "200m"}}),
        ("priorityClassName", "low"),
    ],
)
def test_a_change_of_any_field_rolls_the_pods(field, value):
    r = placed_redis(num=2, **PLACED)
    pods = [made_from(c, r, i) for i, c in enumerate(created(r))]
    unchanged = plan_redis(r, pods, CONFIG, NOW)
    assert not [a for a in unchanged if isinstance(a, DeletePod | PatchPodMetadata)]
    changed = dict(r.spec)
    changed.pop(field)
    if value is not None:
        changed[field] = value
    moved = dataclasses.replace(r, spec=changed)
    deletes = [a for a in removed(plan_redis(moved, pods, CONFIG, NOW))]
    assert [d.name for d in deletes] == ["r-0"]
    assert deletes[0].why == "spec changed"


def test_what_admission_adds_to_the_fields_never_makes_a_pod_stale():
    """LimitRanger's defaults, DefaultTolerationSeconds's tolerations: the pod
    is compared by the hash it was made with, not by its fields."""
    r = placed_redis(**PLACED)
    (create,) = created(r)
    p = made_from(create, r, 0)
    spec = validate_spec(r.spec, settings_of(CONFIG, DEFAULTS).image).spec
    assert spec is not None and spec_drift(p, spec) is None


def test_a_fields_hash_edited_by_hand_is_put_back():
    r = placed_redis(**PLACED)
    (create,) = created(r)
    p = made_from(create, r, 0)
    edited = dataclasses.replace(p, annotations={**p.annotations, FIELDS_HASH_ANNOTATION: "x"})
    (repair,) = [a for a in plan_redis(r, [edited], CONFIG, NOW) if isinstance(a, PatchPodMetadata)]
    assert repair.annotations == {FIELDS_HASH_ANNOTATION: p.annotations[FIELDS_HASH_ANNOTATION]}


def test_a_pod_of_the_release_before_the_fields_is_rolled_once():
    """No fields hash: made before the template asked for the spread."""
    r = placed_redis(num=2)
    old = [pod(r, i, hash_="1f105b0566") for i in range(2)]
    old = [
        dataclasses.replace(p, annotations={TEMPLATE_HASH_ANNOTATION: "1f105b0566"}) for p in old
    ]
    deletes = [a.name for a in removed(plan_redis(r, old, CONFIG, NOW))]
    assert deletes == ["r-0"]


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("resources", "1Gi", "spec.resources: must be an object, got '1Gi'"),
        ("tolerations", {"key": "a"}, "spec.tolerations: must be a list, got {'key': 'a'}"),
        ("nodeSelector", {"disk": 1}, "spec.nodeSelector: every value must be a string"),
        ("priorityClassName", 5, "spec.priorityClassName: must be a string, got 5"),
    ],
)
def test_a_field_of_the_wrong_type_is_named(field, value, message):
    check = validate_spec({"num": 1, field: value}, "redis:6")
    assert check.spec is None
    assert [str(e) for e in check.errors] == [message]


def test_empty_fields_count_as_unset():
    assert placement.placement_of({"tolerations": [], "nodeSelector": {}}) == placement.NONE
