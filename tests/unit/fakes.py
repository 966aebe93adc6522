"""A scripted stand-in for reconciler.client.kube.Kube, for tests of code above it.

It records calls and answers from a table of canned errors; it is not a model
of the API server (the e2e suite uses a real one).
"""

from __future__ import annotations

import builtins
import copy
import itertools
import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from reconciler.client.accounting import Stats
from reconciler.client.errors import ApiError, EvictionRefused
from reconciler.client.interface import UNFENCED, Client, WriteFence
from reconciler.model import Incremental, Page, ResourceType

T = TypeVar("T")


class FakeKube:
    def __init__(self, *, complete: bool = False) -> None:
        """``complete``: every object there is, is stored in ``objects`` (or in
        its kind's scripted LIST), so a write to any other is a 404, as the
        apiserver answers. Off, the fake holds a partial view: most tests
        script a snapshot, not the objects behind it, and their writes to
        objects it does not store are taken as written."""
        self.complete = complete
        self.calls: list[tuple[str, ...]] = []
        self.errors: dict[tuple[str, str], ApiError | Exception] = {}
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.lists: dict[str, list[dict[str, Any]] | Exception] = {}
        self.stats = Stats()
        self.patches: list[tuple[str, str, dict[str, Any], str]] = []
        self.on_call: Callable[[str, str], None] | None = None
        # Every write with all its arguments: (verb, kind, namespace, name, detail).
        self.writes: list[tuple[str, str, str | None, str, Any]] = []
        self.patch_answer: dict[str, Any] | None = None  # None: a new resourceVersion
        self.accepts: list[tuple[str, str | None]] = []  # (kind, Accept) of each LIST
        # (kind, page size asked) of each LIST; None: the page_size setting.
        self.page_sizes: list[tuple[str, int | None]] = []
        self.selectors: list[tuple[str, str | None]] = []  # (kind, label selector) of each LIST
        self.scopes: list[tuple[str, str | None]] = []  # (kind, namespace or None) of each LIST
        # The answer to a kind's LIST of metadata, byte for byte; else its objects as JSON.
        self.metadata_bodies: dict[str, bytes] = {}
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
        err = self.errors.get((verb, name))
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
        value = self.lists[res.kind] if res.kind in self.lists else self._stored(res.kind)
        if isinstance(value, Exception):
            raise value
        return [v for v in value if matches(v, selector) and _in(v, namespace)]

    def _stored(self, kind: str) -> builtins.list[dict[str, Any]]:
        """A kind with no scripted LIST answers with what it stores, as a server does."""
        return [copy.deepcopy(o) for (k, _, _), o in self.objects.items() if k == kind]

    def _missing(self, kind: str, namespace: str, name: str) -> bool:
        """In a complete world, neither stored nor in the kind's scripted LIST:
        not there (404)."""
        if not self.complete or (kind, namespace, name) in self.objects:
            return False
        listed = self.lists.get(kind)
        if isinstance(listed, builtins.list):
            return not any(
                (o.get("metadata") or {}).get("name") == name and _in(o, namespace) for o in listed
            )
        return True

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
        body = self.metadata_bodies.get(res.kind) if "PartialObjectMetadata" in accept else None
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
        meta.setdefault("uid", f"uid-{next(self._serial)}")
        meta["resourceVersion"] = str(next(self._serial))
        if namespace:
            meta["namespace"] = namespace
        self.objects[(res.kind, namespace, name)] = stored
        return copy.deepcopy(stored)

    def review(self, res: ResourceType, body: Mapping[str, Any]) -> dict[str, Any]:
        """A question: allowed, as the admin is (script ``errors`` to refuse)."""
        self._maybe_fail("REVIEW", res.kind)
        return {**body, "status": {"allowed": True}}

    def get(self, res: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        # A Service and a budget are named after their Redis: their GETs are told apart.
        children = {"Service": "service", "PodDisruptionBudget": "pdb"}
        self._maybe_fail("GET", f"{children[res.kind]}/{name}" if res.kind in children else name)
        if (res.kind, namespace, name) not in self.objects:
            raise ApiError(404, "NotFound", f"{name} not found")
        return self.objects[(res.kind, namespace, name)]

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
        if self._missing(res.kind, namespace, name):
            raise ApiError(404, "NotFound", f'{res.plural} "{name}" not found')
        stored = self.objects.get((res.kind, namespace, name))
        if stored is not None:
            _preconditions(stored, uid, resource_version)
        self.writes.append(("DELETE", res.kind, namespace, name, uid))
        self.objects.pop((res.kind, namespace, name), None)

    def evict(self, namespace: str, name: str, uid: str) -> None:
        self._maybe_fail("EVICT", name)
        pod = self.objects.get(("Pod", namespace, name))
        if pod is not None:
            _budgets_allow(
                pod,
                [
                    o
                    for (k, ns, _), o in self.objects.items()
                    if (k, ns) == ("PodDisruptionBudget", namespace)
                ],
            )
            _preconditions(pod, uid, None)  # after the budget, as the eviction API asks
        self.writes.append(("EVICT", "Pod", namespace, name, uid))
        self.objects.pop(("Pod", namespace, name), None)

    def replace(
        self, res: ResourceType, namespace: str, name: str, body: Mapping[str, Any]
    ) -> dict[str, Any]:
        self._maybe_fail("PUT", name)
        self.writes.append(("PUT", res.kind, namespace, name, None))
        self.objects[(res.kind, namespace, name)] = dict(body)
        return dict(body)

    def merge_patch(
        self, res: ResourceType, namespace: str, name: str, body: Mapping[str, Any], sub: str = ""
    ) -> dict[str, Any]:
        self._maybe_fail("PATCH" + (f"/{sub}" if sub else ""), name)
        if self._missing(res.kind, namespace, name):
            raise ApiError(404, "NotFound", f'{res.plural} "{name}" not found')
        stored = self.objects.get((res.kind, namespace, name))
        if stored is not None:
            _preconditions(stored, None, (body.get("metadata") or {}).get("resourceVersion"))
        self.patches.append((res.kind, name, dict(body), sub))
        self.writes.append(("PATCH", res.kind, namespace, name, sub))
        if stored is not None:
            return copy.deepcopy(self._patched(stored, body, sub))
        if self.patch_answer is not None:
            return self.patch_answer
        rv = str(int(body.get("metadata", {}).get("resourceVersion", "0") or 0) + 1)
        answer: dict[str, Any] = {"metadata": {"resourceVersion": rv}}
        if sub == "status":  # the apiserver returns the object, its status as stored
            answer["status"] = {k: v for k, v in body["status"].items() if v is not None}
        return answer

    def _patched(self, stored: dict[str, Any], body: Mapping[str, Any], sub: str) -> dict[str, Any]:
        """A JSON merge patch of a stored object, as the apiserver applies it:
        through ``status``, only the status; else everything but the status."""
        if sub == "status":
            part = {"status": body.get("status")}
        else:
            part = {k: v for k, v in body.items() if k != "status"}
        merged = _merge(stored, part)
        merged["metadata"]["resourceVersion"] = str(next(self._serial))
        stored.clear()
        stored.update(merged)
        return stored


def _merge(target: Any, patch: Any) -> Any:
    """RFC 7386: a mapping merges key by key, null removes, anything else replaces."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merge(out.get(key), value)
    return out


def _budgets_allow(pod: Mapping[str, Any], budgets: builtins.list[dict[str, Any]]) -> None:
    """The eviction API's answer: 429 when the one budget selecting the pod
    allows no disruption now, 500 when more than one selects it."""
    selecting = [b for b in budgets if matches(pod, _selector(b))]
    if len(selecting) > 1:
        raise EvictionRefused(
            500,
            "InternalError",
            "This pod has more than one PodDisruptionBudget, which the eviction subresource"
            " does not support.",
        )
    if selecting and not (selecting[0].get("status") or {}).get("disruptionsAllowed"):
        raise EvictionRefused(
            429,
            "TooManyRequests",
            "Cannot evict pod as it would violate the pod's disruption budget.",
        )


def _selector(budget: Mapping[str, Any]) -> str:
    wanted = ((budget.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    return ",".join(f"{k}={v}" for k, v in wanted.items())  # empty: every pod, as policy/v1


def _preconditions(stored: Mapping[str, Any], uid: str | None, rv: str | None) -> None:
    """A uid or resourceVersion that is not the stored one: 409, as the apiserver answers."""
    meta = stored.get("metadata") or {}
    if uid is not None and meta.get("uid") not in (None, uid):
        raise ApiError(409, "Conflict", f"Precondition failed: UID in precondition: {uid}")
    if rv is not None and meta.get("resourceVersion") not in (None, rv):
        raise ApiError(409, "Conflict", "the object has been modified")


if TYPE_CHECKING:
    # The fake answers to what the engine asks of the client (`make lint`).
    _checked: Client = FakeKube()


def conflict(msg: str = "the object has been modified") -> ApiError:
    return ApiError(409, "Conflict", msg)


def _in(obj: Any, namespace: str | None) -> bool:
    return namespace is None or (obj.get("metadata") or {}).get("namespace") == namespace


def _terms(selector: str) -> list[str]:
    """The selector's terms: split at the commas outside a set's parentheses."""
    terms, depth, start = [], 0, 0
    for i, ch in enumerate(selector):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            terms.append(selector[start:i])
            start = i + 1
    return [*terms, selector[start:]]


def _term_matches(labels: dict[str, str], term: str) -> bool:
    term = term.strip()
    if term.startswith("!"):
        return term[1:] not in labels
    if " notin (" in term:  # true also where the label is missing, as on the apiserver
        key, values = term.split(" notin (", 1)
        return labels.get(key.strip()) not in {v.strip() for v in values.rstrip(")").split(",")}
    if " in (" in term:
        key, values = term.split(" in (", 1)
        return labels.get(key.strip()) in {v.strip() for v in values.rstrip(")").split(",")}
    if "!=" in term:  # true also where the label is missing
        key, value = term.split("!=", 1)
        return labels.get(key.strip()) != value.strip()
    if "=" not in term:
        return term in labels  # a bare key: the label is there
    key, value = term.replace("==", "=").split("=", 1)
    return labels.get(key.strip()) == value.strip()


def matches(obj: Any, selector: str | None) -> bool:
    """Label selectors (``a=b``, ``k in (x,y)``, ``k notin (x,y)``, ``!k``, joined by commas), as
    the apiserver applies them."""
    if not selector:
        return True
    labels = ((obj.get("metadata") or {}).get("labels")) or {}
    return all(_term_matches(labels, t) for t in _terms(selector))
