"""What a pass asks of the apiserver, derived from what the kinds declare.

Each kind declares its resource, the types of object it makes (`Kind.children`),
whether it owns pods, and the order of its writes (`Kind.order`), whose steps
name every write it makes. From those alone come the verbs of the ClusterRole
that `reconciler manifests` prints and that `reconciler check` asks a
SelfSubjectAccessReview for, so a kind added to the registry is granted what
it writes and nothing more, with no table kept by hand beside it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.actions import (
    CreateChild,
    CreatePod,
    DeleteChild,
    DeletePod,
    EvictPod,
    PatchChild,
    PatchFinalizers,
    PatchLabels,
    PatchPodMetadata,
    PatchStatus,
)
from reconciler.children import STORAGE_CLASSES, ChildType
from reconciler.kinds.base import Kind
from reconciler.kinds.order import Step
from reconciler.model import NAMESPACES, PODS

Rule = tuple[str, str]  # (API group, resource)

EVENTS: Rule = ("", "events")
_EVICTION: Rule = (PODS.group, f"{PODS.plural}/eviction")
CRDS: Rule = ("apiextensions.k8s.io", "customresourcedefinitions")
READ = frozenset({"get", "list"})
# A write to the object itself (finalizers, labels) is a patch of it; its
# status one of the status subresource.
_ON_OBJECT = {PatchFinalizers: "", PatchLabels: "", PatchStatus: "/status"}
_ON_POD = {CreatePod: "create", DeletePod: "delete", PatchPodMetadata: "patch"}
_ON_CHILD = {CreateChild: "create", PatchChild: "patch", DeleteChild: "delete"}


@dataclass(frozen=True)
class Needs:
    """``plain``: (group, resource) -> verbs, in the order of the
    ClusterRole's rules. ``named``: the rules for some objects only, ->
    (verbs, names). ``cluster_scoped``: of ``plain``, the cluster-scoped
    resources, and what a pass limited to some namespaces (-n) asks of them."""

    plain: Mapping[Rule, frozenset[str]]
    named: Mapping[Rule, tuple[frozenset[str], frozenset[str]]]
    cluster_scoped: Mapping[Rule, frozenset[str]]

    @property
    def every_verb(self) -> frozenset[str]:
        return frozenset().union(*self.plain.values())


def needs(kinds: Iterable[Kind[Any]]) -> Needs:
    """The requests a pass over ``kinds`` makes: it LISTs and GETs each kind,
    our pods and each child type, writes what each kind's order names, sends
    events, and reads the namespaces in scope and each kind's CRD."""
    kinds = tuple(kinds)
    plain: dict[Rule, set[str]] = {}
    for kind in kinds:
        plain[_of(kind)] = set(READ)
    for kind in kinds:
        plain.setdefault(_of(kind, "/status"), set())
    for kind in kinds:
        if kind.owns_pods or kind.children:
            # Its pods and children carry a controller reference with
            # blockOwnerDeletion: true, which the OwnerReferencesPermissionEnforcement
            # admission plugin grants only with update on the owner's finalizers.
            plain[_of(kind, "/finalizers")] = {"update"}
    plain[(PODS.group, PODS.plural)] = set(READ)
    plain[_EVICTION] = set()  # kept only if some kind evicts
    children = _children(kinds)
    for child in children.values():
        plain[_res(child)] = set(READ)
        if child.reads_classes:
            plain[(STORAGE_CLASSES.group, STORAGE_CLASSES.plural)] = {"list"}
    for kind in kinds:
        for step in kind.order.steps:
            for rule, verb in _writes(kind, step, children):
                plain.setdefault(rule, set()).add(verb)
    plain = {rule: verbs for rule, verbs in plain.items() if verbs}
    plain[EVENTS] = {"create", "get", "patch"}
    plain[(NAMESPACES.group, NAMESPACES.plural)] = set(READ)
    crd_names = frozenset(kind.resource.crd_name for kind in kinds)
    scoped = {r: v for r, v in _CLUSTER_READS.items() if r in plain or r[1] == NAMESPACES.plural}
    return Needs(
        {rule: frozenset(verbs) for rule, verbs in plain.items()},
        {CRDS: (frozenset({"get"}), crd_names)},
        scoped,
    )


# Cluster-scoped: what a pass limited to some namespaces asks of them (it
# GETs each namespace in scope rather than LIST them all).
_CLUSTER_READS: Mapping[Rule, frozenset[str]] = {
    (STORAGE_CLASSES.group, STORAGE_CLASSES.plural): frozenset({"list"}),
    (NAMESPACES.group, NAMESPACES.plural): frozenset({"get"}),
}


def _writes(
    kind: Kind[Any], step: Step, children: Mapping[str, ChildType]
) -> list[tuple[Rule, str]]:
    """The (rule, verb) of each write ``step`` takes."""
    out: list[tuple[Rule, str]] = []
    for t in step.types:
        if t in _ON_OBJECT:
            out.append((_of(kind, _ON_OBJECT[t]), "patch"))
        elif not kind.owns_pods and (t in _ON_POD or t is EvictPod):
            continue  # the sharded replica's pod labels: none for a kind without pods
        elif t in _ON_POD:
            out.append(((PODS.group, PODS.plural), _ON_POD[t]))
        elif t is EvictPod:
            out.append((_EVICTION, "create"))
        elif t in _ON_CHILD:
            out.extend((_res(c), _ON_CHILD[t]) for c in _step_children(kind, step, children))
        else:
            raise TypeError(f"{kind.name} step {step.name}: no request known for {t.__name__}")
    return out


def _step_children(
    kind: Kind[Any], step: Step, children: Mapping[str, ChildType]
) -> list[ChildType]:
    """The child types a step writes: its own, or every one of its kind's."""
    if step.kind is None:
        return list(kind.children)
    if step.kind not in children:
        raise TypeError(f"{kind.name} step {step.name}: {step.kind} is none of its children")
    return [children[step.kind]]


def _children(kinds: tuple[Kind[Any], ...]) -> dict[str, ChildType]:
    return {c.kind: c for kind in kinds for c in kind.children}


def _of(kind: Kind[Any], sub: str = "") -> Rule:
    return (kind.resource.group, kind.resource.plural + sub)


def _res(child: ChildType) -> Rule:
    return (child.resource.group, child.resource.plural)
