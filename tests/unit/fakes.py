"""The apiserver as the code above the client meets it, in memory, for the
unit tests: one store of objects that every call reads and writes, answering
as the apiserver does. tests/client_contract.py holds it to the real one
(tests/unit/client/test_contract.py here, tests/e2e/test_client_contract.py
there), as controller-runtime tests its fake client.

What no apiserver does is asked for under a name that says so:
``scripted_errors`` (a verb on a name fails), ``scripted_patch_answer`` (a
patch answered otherwise than stored, as by a CRD that prunes a field) and
``scripted_metadata_bodies`` (a LIST's bytes, byte for byte). It runs no
controller: no kubelet (a pod deleted is gone at once, unless a finalizer
holds it), no garbage collector, no disruption controller.
"""

from __future__ import annotations

import builtins
import copy
import itertools
import json
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from reconciler.client.accounting import Stats
from reconciler.client.errors import ApiError
from reconciler.client.interface import UNFENCED, Client, WriteFence
from reconciler.model import Incremental, Page, ResourceType
from tests.unit.fake_rules import budgets_allow, in_namespace, matches, merge, preconditions

__all__ = ["FakeKube", "conflict", "matches"]

T = TypeVar("T")
Key = tuple[str, str, str]  # (kind, namespace, name); namespace "" when cluster-scoped
DELETED_AT = "2026-11-22T12:00:00Z"  # the deletionTimestamp a held delete sets


class Held:
    """``kube.held[kind] = objects``: the cluster holds exactly these of the
    kind (copies, as the apiserver stores what it is sent); read back, the
    stored objects themselves, for a test to change one in place."""

    def __init__(self, kube: FakeKube) -> None:
        self._kube = kube

    def __setitem__(self, kind: str, objs: Iterable[dict[str, Any]]) -> None:
        if isinstance(objs, Exception):
            raise TypeError(f"a failed LIST is scripted: scripted_errors[('LIST', {kind!r})]")
        store = self._kube.objects
        for key in [k for k in store if k[0] == kind]:
            del store[key]
        for obj in objs:
            meta = obj.get("metadata") or {}
            store[(kind, meta.get("namespace") or "", meta["name"])] = copy.deepcopy(obj)

    def add(self, kind: str, namespace: str, name: str, uid: str, version: str) -> None:
        """One more object of ``kind``, of this uid and resourceVersion."""
        meta = {"name": name, "namespace": namespace, "uid": uid, "resourceVersion": version}
        self._kube.objects[(kind, namespace, name)] = {"metadata": meta}

    def __getitem__(self, kind: str) -> builtins.list[dict[str, Any]]:
        return [o for (k, _, _), o in self._kube.objects.items() if k == kind]


class FakeKube:
    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []
        # Scripted: (verb, name) -> what that call raises, as no apiserver would by itself.
        self.scripted_errors: dict[tuple[str, str], ApiError | Exception] = {}
        self.objects: dict[Key, dict[str, Any]] = {}  # the store
        self.held = Held(self)
        self.stats = Stats()
        self.patches: list[tuple[str, str, dict[str, Any], str]] = []
        self.on_call: Callable[[str, str], None] | None = None
        # Every write with all its arguments: (verb, kind, namespace, name, detail).
        self.writes: list[tuple[str, str, str | None, str, Any]] = []
        # Scripted: every patch answered with this instead of the object as stored.
        self.scripted_patch_answer: dict[str, Any] | None = None
        self.accepts: list[tuple[str, str | None]] = []  # (kind, Accept) of each LIST
        # (kind, page size asked) of each LIST; None: the page_size setting.
        self.page_sizes: list[tuple[str, int | None]] = []
        self.selectors: list[tuple[str, str | None]] = []  # (kind, label selector) of each LIST
        self.scopes: list[tuple[str, str | None]] = []  # (kind, namespace or None) of each LIST
        # Scripted: the answer to a kind's LIST of metadata, byte for byte.
        self.scripted_metadata_bodies: dict[str, bytes] = {}
        self.streamed: list[str] = []  # the kind of each LIST read as it arrives
        self.user_agent = "reconciler/test"
        self.fence: WriteFence = UNFENCED
        self._serial = itertools.count(1000)

    def with_budget(self, qps: float, burst: int, max_retries: int) -> FakeKube:
        """As `Kube.with_budget`: the same fake (its calls recorded together)."""
        return self

    def fenced(self, fence: WriteFence, name: str = "") -> FakeKube:
        """As `Kube.fenced`: a copy sharing what the fake records and stores."""
        other = copy.copy(self)
        other.fence = fence
        if name:
            other.user_agent = f"{self.user_agent} ({name})"
        return other

    def _maybe_fail(self, verb: str, name: str) -> None:
        self.calls.append((verb, name))
        self.stats.record(verb, "200", 0)
        if self.on_call is not None:
            self.on_call(verb, name)
        err = self.scripted_errors.get((verb, name))
        if err is not None:
            raise err

    def _listed(
        self,
        res: ResourceType,
        namespace: str | None,
        selector: str | None,
        accept: str | None,
        page_size: int | None,
    ) -> list[dict[str, Any]]:
        self.accepts.append((res.kind, accept))
        self.page_sizes.append((res.kind, page_size))
        self.selectors.append((res.kind, selector))
        self.scopes.append((res.kind, namespace))
        self._maybe_fail("LIST", res.kind)
        return [
            copy.deepcopy(o)
            for (k, _, _), o in self.objects.items()
            if k == res.kind and matches(o, selector) and in_namespace(o, namespace)
        ]

    def _stored(self, res: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        """The stored object, or the apiserver's 404."""
        stored = self.objects.get((res.kind, namespace, name))
        if stored is None:
            raise ApiError(404, "NotFound", f'{res.plural} "{name}" not found')
        return stored

    def list(
        self,
        res: ResourceType,
        namespace: str | None = None,
        selector: str | None = None,
        decode: Callable[[bytes], Page[T]] | None = None,
        accept: str | None = None,
        page_size: int | None = None,
    ) -> builtins.list[T]:
        value = self._listed(res, namespace, selector, accept, page_size)
        if decode is None:
            return value  # type: ignore[return-value]  # the objects as dicts, as Kube gives them
        # As the wire carries it: the page decoders read bytes.
        return decode(json.dumps({"metadata": {}, "items": value}).encode()).items

    def list_streamed(
        self,
        res: ResourceType,
        namespace: str | None,
        start: Callable[[], Incremental[T]],
        accept: str,
        page_size: int | None = None,
        selector: str | None = None,
    ) -> builtins.list[T]:
        """list, with the answer fed to the decoder a few bytes at a time."""
        items = self._listed(res, namespace, selector, accept, page_size)
        self.streamed.append(res.kind)
        scripted = self.scripted_metadata_bodies.get(res.kind)
        body = scripted if scripted is not None and "PartialObjectMetadata" in accept else None
        if body is None:
            body = json.dumps({"metadata": {}, "items": items}).encode()
        stream = start()
        for at in range(0, len(body), 7):
            stream.feed(body[at : at + 7])
        return stream.close().items

    def create(
        self, res: ResourceType, namespace: str, body: Mapping[str, Any], *, dry_run: bool = False
    ) -> dict[str, Any]:
        name = body["metadata"]["name"]
        self._maybe_fail("POST", name)
        if dry_run:
            return copy.deepcopy(dict(body))
        if (res.kind, namespace, name) in self.objects:
            raise ApiError(409, "AlreadyExists", f'{res.plural} "{name}" already exists')
        self.writes.append(("POST", res.kind, namespace, name, None))
        stored = copy.deepcopy(dict(body))
        meta = stored.setdefault("metadata", {})
        meta["uid"] = f"uid-{next(self._serial)}"  # the apiserver's, whatever was sent
        meta["resourceVersion"] = str(next(self._serial))
        if "spec" in stored:  # as for our CRDs: a spec has generations
            meta["generation"] = 1
        if namespace:
            meta["namespace"] = namespace
        self.objects[(res.kind, namespace, name)] = stored
        return copy.deepcopy(stored)

    def review(self, res: ResourceType, body: Mapping[str, Any]) -> dict[str, Any]:
        """A question: allowed, as the admin is (script ``scripted_errors`` to refuse)."""
        self._maybe_fail("REVIEW", res.kind)
        return {**body, "status": {"allowed": True}}

    def get(self, res: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        # A Service and a budget are named after their Redis: their GETs are told apart.
        children = {"Service": "service", "PodDisruptionBudget": "pdb"}
        self._maybe_fail("GET", f"{children[res.kind]}/{name}" if res.kind in children else name)
        return copy.deepcopy(self._stored(res, namespace, name))

    def delete(
        self,
        res: ResourceType,
        namespace: str,
        name: str,
        uid: str | None = None,
        *,
        resource_version: str | None = None,
    ) -> None:
        self._maybe_fail("DELETE", name)
        stored = self._stored(res, namespace, name)
        preconditions(stored, uid, resource_version)
        self.writes.append(("DELETE", res.kind, namespace, name, uid))
        self._delete((res.kind, namespace, name))

    def _delete(self, key: Key) -> None:
        """Gone, unless a finalizer holds it: then marked deleted, and gone
        once a patch takes its last finalizer away."""
        meta = self.objects[key]["metadata"]
        if not meta.get("finalizers"):
            del self.objects[key]
        elif not meta.get("deletionTimestamp"):
            meta["deletionTimestamp"] = DELETED_AT
            meta["resourceVersion"] = str(next(self._serial))

    def evict(self, namespace: str, name: str, uid: str) -> None:
        self._maybe_fail("EVICT", name)
        pod = self.objects.get(("Pod", namespace, name))
        if pod is None:
            raise ApiError(404, "NotFound", f'pods "{name}" not found')
        budgets_allow(
            pod,
            [
                o
                for (k, ns, _), o in self.objects.items()
                if (k, ns) == ("PodDisruptionBudget", namespace)
            ],
        )
        preconditions(pod, uid, None)  # after the budget, as the eviction API asks
        self.writes.append(("EVICT", "Pod", namespace, name, uid))
        self._delete(("Pod", namespace, name))

    def replace(
        self, res: ResourceType, namespace: str, name: str, body: Mapping[str, Any]
    ) -> dict[str, Any]:
        self._maybe_fail("PUT", name)
        stored = self._stored(res, namespace, name)
        preconditions(stored, None, (body.get("metadata") or {}).get("resourceVersion"))
        self.writes.append(("PUT", res.kind, namespace, name, None))
        new = copy.deepcopy(dict(body))
        meta = new.setdefault("metadata", {})
        meta["uid"] = stored["metadata"].get("uid")
        meta["resourceVersion"] = str(next(self._serial))
        self.objects[(res.kind, namespace, name)] = new
        return copy.deepcopy(new)

    def merge_patch(
        self, res: ResourceType, namespace: str, name: str, body: Mapping[str, Any], sub: str = ""
    ) -> dict[str, Any]:
        self._maybe_fail("PATCH" + (f"/{sub}" if sub else ""), name)
        stored = self._stored(res, namespace, name)
        self.patches.append((res.kind, name, dict(body), sub))  # as sent, landed or not
        preconditions(stored, None, (body.get("metadata") or {}).get("resourceVersion"))
        self.writes.append(("PATCH", res.kind, namespace, name, sub))
        patched = self._patched(stored, body, sub)
        meta = patched["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            del self.objects[(res.kind, namespace, name)]  # its last finalizer gone
        if self.scripted_patch_answer is not None:
            return self.scripted_patch_answer
        return copy.deepcopy(patched)

    def _patched(self, stored: dict[str, Any], body: Mapping[str, Any], sub: str) -> dict[str, Any]:
        """A JSON merge patch of a stored object, as the apiserver applies it:
        through ``status``, only the status; else everything but the status."""
        if sub == "status":
            part = {"status": body.get("status")}
        else:
            part = {k: v for k, v in body.items() if k != "status"}
        merged = merge(stored, part)
        meta = merged["metadata"]
        meta["resourceVersion"] = str(next(self._serial))
        if meta.get("generation") and merged.get("spec") != stored.get("spec"):
            meta["generation"] += 1  # the spec changed: a new generation
        stored.clear()
        stored.update(merged)
        return stored


if TYPE_CHECKING:
    # The fake answers to what the engine asks of the client (`make lint`).
    _checked: Client = FakeKube()


def conflict(msg: str = "the object has been modified") -> ApiError:
    return ApiError(409, "Conflict", msg)
