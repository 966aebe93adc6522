"""Owners confirmed gone before their pods are deleted as orphans.

A LIST of a kind that answered an empty or partial list while its objects
exist (a stale read from the apiserver's watch cache, a proxy that answers
oddly) would make every pod of theirs look orphaned. So a pass that finds
pods whose owner is missing from the LIST asks for each such owner by name:
only a 404, or an object of that name with another uid, lets its pods go.
An owner that is there says the LIST was not the view it claimed to be: the
kind is then not seen this pass, as if its LIST had failed.

An owner reference is written by whoever made the pod, and the apiserver
checks neither its name nor its apiVersion. So an owner is asked for only
when the reference is to our kind's group and its name could be the name
of one of its objects (`Kind.name_valid`); any other pod is left alone and
named (`Refused`): a name is never asked for that could be more than a name.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.client.errors import ApiError, NotFound, Unreachable
from reconciler.client.interface import Client
from reconciler.kinds.base import Kind
from reconciler.model import Pod
from reconciler.untrusted import shown

log = logging.getLogger(__name__)


# Owners asked for in one pass; the pods of any others wait for the next.
CONFIRM_MAX = 50


@dataclass(frozen=True)
class Missing:
    """An owner of our pods that its kind's LIST did not show."""

    kind: str
    namespace: str
    name: str
    uid: str


@dataclass(frozen=True)
class Confirmed:
    """What the GETs found: owners gone, and kinds whose LIST was stale
    (each with the line that says so)."""

    gone: frozenset[str]
    stale: Mapping[str, str]
    errors: tuple[str, ...]


@dataclass(frozen=True)
class Refused:
    """A pod of ours whose controller reference could not name an object of
    ``kind``: its owner is never asked for, and the pod is left alone."""

    kind: str
    pod: Pod
    why: str

    def __str__(self) -> str:
        return (
            f"[{self.pod.namespace}/{self.pod.name}] its controller reference {self.why}: "
            f"the {self.kind} is not looked up, and the pod is left alone"
        )


@dataclass(frozen=True)
class Owners:
    """The owners to confirm gone, and the pods whose owner is never asked for."""

    missing: list[Missing]
    refused: list[Refused]


def missing_owners(
    kinds: Iterable[Kind[Any]],
    objects: Mapping[str, Sequence[Any] | None],
    pods: Sequence[Pod] | None,
) -> Owners:
    """Owners of our live pods, of a kind that owns pods, absent from that
    kind's LIST; a kind not listed has none (nothing is deleted for it)."""
    if pods is None:
        return Owners([], [])
    found: dict[str, Missing] = {}
    refused: list[Refused] = []
    for kind in kinds:
        listed = objects.get(kind.name)
        if not kind.owns_pods or listed is None:
            continue
        uids = {obj.uid for obj in listed}
        for pod in pods:
            if not kind.orphaned(pod, uids) or pod.controller_uid in found:
                continue
            name, why = _owner_of(kind, pod)
            if why is not None:
                refused.append(Refused(kind.name, pod, why))
                continue
            found[pod.controller_uid or ""] = Missing(
                kind.name, pod.namespace, name, pod.controller_uid or ""
            )
    return Owners(sorted(found.values(), key=lambda m: (m.kind, m.namespace, m.name)), refused)


def _owner_of(kind: Kind[Any], pod: Pod) -> tuple[str, str | None]:
    """The controller's name, and why it cannot be asked for (or None)."""
    ref = next((r for r in pod.owner_refs if r.uid == pod.controller_uid), None)
    if ref is None:
        return "", "has no name"
    group = kind.resource.group
    if ref.api_version.rpartition("/")[0] != group:
        return ref.name, f"has apiVersion {shown(ref.api_version)}, not of {group}"
    if not kind.name_valid(ref.name):
        return ref.name, f"names {shown(ref.name)}, which is not a {kind.name}'s name"
    return ref.name, None


def confirm(kube: Client, kinds: Mapping[str, Kind[Any]], missing: Sequence[Missing]) -> Confirmed:
    """GET each missing owner, at most CONFIRM_MAX of them: a 404 or another
    uid is gone; the same uid makes its kind's LIST stale, and nothing of
    that kind is deleted. A GET that fails leaves its owner unconfirmed."""
    gone: set[str] = set()
    stale: dict[str, str] = {}
    errors: list[str] = []
    if len(missing) > CONFIRM_MAX:
        log.info("%d owners to confirm gone; %d this pass", len(missing), CONFIRM_MAX)
    for owner in missing[:CONFIRM_MAX]:
        if owner.kind in stale:
            continue
        res = kinds[owner.kind].resource
        where = f"[{owner.namespace}/{owner.name}] GET {owner.kind}"
        try:
            answer = kube.get(res, owner.namespace, owner.name)
        except NotFound:
            gone.add(owner.uid)
            continue
        except ApiError as exc:
            errors.append(f"{where}: {exc}")
            continue
        except Unreachable as exc:  # the others would each wait as long
            errors.append(f"{where}: {exc}")
            break
        uid = _uid_of(answer, owner.kind)
        if uid is None:  # a proxy's answer, not the object: no proof of anything
            said = answer.get("kind")
            errors.append(f"{where}: the answer is not a {owner.kind} (kind {said!r})")
            continue
        if uid != owner.uid:
            gone.add(owner.uid)
            continue
        stale[owner.kind] = (
            f"LIST {owner.kind}: stale: it did not show {owner.namespace}/{owner.name} "
            f"(uid {owner.uid}), which exists; nothing of this kind is written this pass"
        )
    return Confirmed(frozenset(gone), stale, tuple(errors))


def _uid_of(answer: Mapping[str, Any], kind: str) -> str | None:
    """The uid of the object answered, if the answer is one of ``kind``."""
    meta = answer.get("metadata")
    uid = meta.get("uid") if isinstance(meta, dict) else None
    return uid if answer.get("kind") == kind and isinstance(uid, str) and uid else None
