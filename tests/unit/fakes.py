"""A scripted stand-in for reconciler.client.kube.Kube, for tests of code above it.

It records calls and answers from a table of canned errors; it is not a model
of the API server (the e2e suite uses a real one).
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from reconciler.client.accounting import Stats
from reconciler.client.errors import ApiError
from reconciler.client.interface import Client
from reconciler.model import Incremental, Page, ResourceType

T = TypeVar("T")


class FakeKube:
    def __init__(self) -> None:
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
        self.still_writing: Callable[[], bool] | None = None

    def with_budget(self, qps: float, burst: int, max_retries: int) -> FakeKube:
        """As `Kube.with_budget`: the same fake (its calls recorded together)."""
        return self

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
        value = self.lists.get(res.kind, [])
        if isinstance(value, Exception):
            raise value
        return [v for v in value if _matches(v, selector) and _in(v, namespace)]

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

    def create(self, res: ResourceType, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
        name = body["metadata"]["name"]
        self._maybe_fail("POST", name)
        self.writes.append(("POST", res.kind, namespace, name, None))
        self.objects[(res.kind, namespace, name)] = dict(body)
        return dict(body)

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
        self.writes.append(("DELETE", res.kind, namespace, name, uid))
        self.objects.pop((res.kind, namespace, name), None)

    def evict(self, namespace: str, name: str, uid: str) -> None:
        self._maybe_fail("EVICT", name)
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
        self.patches.append((res.kind, name, dict(body), sub))
        self.writes.append(("PATCH", res.kind, namespace, name, sub))
        if self.patch_answer is not None:
            return self.patch_answer
        rv = str(int(body.get("metadata", {}).get("resourceVersion", "0") or 0) + 1)
        answer: dict[str, Any] = {"metadata": {"resourceVersion": rv}}
        if sub == "status":  # the apiserver returns the object, its status as stored
            answer["status"] = {k: v for k, v in body["status"].items() if v is not None}
        return answer


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
    key, value = term.split("=", 1)
    return labels.get(key) == value


def _matches(obj: Any, selector: str | None) -> bool:
    """Label selectors (``a=b``, ``k in (x,y)``, ``k notin (x,y)``, ``!k``, joined by commas), as
    the apiserver applies them."""
    if not selector:
        return True
    labels = ((obj.get("metadata") or {}).get("labels")) or {}
    return all(_term_matches(labels, t) for t in _terms(selector))
