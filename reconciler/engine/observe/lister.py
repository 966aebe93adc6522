"""The LISTs of a pass: how each is asked for (media type, page size), one
over the scope or one per namespace, by a LIST of metadata alone when the
pass before decoded the kind (then only what changed is fetched), and what
a failed one means (`Lister.failed`): never raised, always recorded.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from reconciler.client.errors import (
    ApiError,
    Forbidden,
    NoCredentials,
    NotAList,
    NotFound,
    Unauthorized,
    Unreachable,
)
from reconciler.client.interface import Client
from reconciler.client.json_wire import pod_page
from reconciler.client.protowire import ACCEPT as POD_ACCEPT
from reconciler.client.protowire import META_ACCEPT, META_ACCEPT_JSON, UNREADABLE
from reconciler.client.streams import PodStream, VersionStream
from reconciler.config import Config
from reconciler.engine.observe.scope import Sorter
from reconciler.model import PODS, Known, Page, Pod, ResourceType, Version, version_key

log = logging.getLogger(__name__)


class _Versioned(Protocol):
    @property
    def uid(self) -> str: ...
    @property
    def resource_version(self) -> str: ...


T = TypeVar("T", bound=_Versioned)


def across(namespaces: Sequence[str], list_in: Callable[[str | None], list[T]]) -> list[T]:
    """The items of one LIST per scoped namespace, or of one cluster-wide LIST."""
    if not namespaces:
        return list_in(None)
    items: list[T] = []
    for ns in namespaces:
        items.extend(list_in(ns))
    return items


# One LIST of a kind's objects in full, in a namespace (None: cluster-wide).
ListIn = Callable[[str | None], list[Any]]


def _why(res: ResourceType, exc: Exception) -> str:
    kind = res.kind
    if isinstance(exc, NotFound) and res.group:
        return f"LIST {kind}: the {kind} CRD is not installed (404); apply crds/ (`make install`)"
    return f"LIST {kind}: {exc}"


def _refused(res: ResourceType, exc: ApiError | Unreachable) -> str | None:
    """Why the cluster cannot be used at all, if this error says so."""
    if isinstance(exc, NoCredentials):
        return f"unauthorized: no credentials: {exc}"
    if isinstance(exc, Unreachable):
        return f"cannot reach the cluster: {exc}"
    if isinstance(exc, Unauthorized):
        return f"unauthorized: the cluster does not accept these credentials ({exc})"
    if isinstance(exc, Forbidden):
        return f"forbidden: these credentials may not list {res.plural} ({exc})"
    return None


# Past this many objects added or changed since the last pass, one full LIST
# of the kind costs less than a GET for each.
FETCH_MAX = 50


# A LIST of metadata answered in JSON is held whole before it is decoded
# (streams.VersionStream): asked for as JSON, it comes in pages of this many
# items when metadata_page_size asks for one page.
JSON_METADATA_PAGE_SIZE = 2000


# The same for a LIST of whole objects in JSON (Redis, Xca, and pods with
# protobuf off) when page_size asks for one page; pods as protobuf are read as
# they arrive (streams.PodStream), in one page.
JSON_PAGE_SIZE = 500


@dataclass(frozen=True)
class Reuse(Generic[T]):
    """What a pass before decoded, and how to fetch one object anew."""

    known: Known[T]
    decode_one: Callable[[Mapping[str, Any]], T]


@dataclass(frozen=True)
class FullList:
    """How the LISTs of whole objects are asked for: pods as protobuf or not,
    and the page size (0: one page where the answer is read as it arrives)."""

    protobuf: bool
    page_size: int

    def pods(self, kube: Client, selector: str | None, known: Known[Pod]) -> ListIn:
        if self.protobuf:
            size = self.page_size
            return lambda ns: kube.list_streamed(
                PODS, ns, lambda: PodStream(known), POD_ACCEPT, size, selector
            )
        return self.held(kube, PODS, selector, pod_page)

    def held(
        self,
        kube: Client,
        res: ResourceType,
        selector: str | None,
        decode: Callable[[bytes], Page[Any]],
    ) -> ListIn:
        """A LIST in JSON, held a page at a time."""
        size = self.page_size or JSON_PAGE_SIZE
        return lambda ns: kube.list(res, ns, selector, decode, None, size)


@dataclass(frozen=True)
class MetaList:
    """How the LISTs of metadata alone are asked for: the media type, and the
    page size (0: one page, read as it arrives)."""

    accept: str
    page_size: int


@dataclass(frozen=True, kw_only=True)
class ListSettings:
    """The settings a pass's LISTs are asked with, picked out of `Config`
    here and nowhere else: pods (and metadata) as protobuf or not, and the
    page sizes of the LISTs of whole objects and of metadata alone."""

    protobuf: bool
    page_size: int
    metadata_page_size: int

    @classmethod
    def of(cls, config: Config) -> ListSettings:
        return cls(
            protobuf=config.protobuf,
            page_size=config.page_size,
            metadata_page_size=config.metadata_page_size,
        )

    def full(self) -> FullList:
        return FullList(self.protobuf, self.page_size)

    def meta(self) -> MetaList:
        if self.protobuf:
            return MetaList(META_ACCEPT, self.metadata_page_size)
        return MetaList(META_ACCEPT_JSON, self.metadata_page_size or JSON_METADATA_PAGE_SIZE)


@dataclass(frozen=True)
class Cheap(Generic[T]):
    """A kind read by a LIST of metadata: its objects, and how many of them
    were fetched (added or changed since the pass before)."""

    items: list[T]
    fetched: int


def _unchanged_or_fetched(
    kube: Client,
    res: ResourceType,
    namespaces: Sequence[str],
    reuse: Reuse[T],
    how: MetaList,
    selector: str | None,
    keep: Callable[[Version], bool] | None,
) -> Cheap[T] | None:
    """The objects of a kind from a LIST of their metadata alone: each one at
    a resourceVersion already decoded is reused, any other is fetched by GET
    (of those ``keep`` keeps: a sharded replica's, the others are dropped
    unread).
    None when that would not be cheaper than a full LIST (too many changed) or
    the apiserver refused it: then the kind is listed in full, and a failure
    is reported there. An unreachable cluster raises at once: a full LIST
    would only fail again, after its own retries."""
    try:
        versions = across(
            namespaces,
            lambda ns: kube.list_streamed(
                res,
                ns,
                lambda: VersionStream(keep is not None),
                how.accept,
                how.page_size,
                selector,
            ),
        )
        if keep is not None:
            versions = [v for v in versions if keep(v)]
        unknown = [v for v in versions if v.known_as not in reuse.known]
        if len(unknown) > FETCH_MAX:
            return None
        fetched = {
            v.known_as: get_one(kube, res, v.namespace, v.name, reuse.decode_one) for v in unknown
        }
    except ApiError:
        return None
    except UNREADABLE as exc:
        log.warning("LIST %s: metadata unreadable (%s); listing in full", res.kind, exc)
        return None
    found = (reuse.known.get(v.known_as) or fetched.get(v.known_as) for v in versions)
    return Cheap([obj for obj in found if obj is not None], len(unknown))


def get_one(
    kube: Client,
    res: ResourceType,
    namespace: str,
    name: str,
    decode: Callable[[Mapping[str, Any]], T],
) -> T | None:
    """One object as it is now; None if there is none (or no longer)."""
    try:
        return decode(kube.get(res, namespace, name))
    except NotFound:
        return None


# What a failed read raises: refused, unreachable, or an answer that cannot be read.
READ_FAILURES: tuple[type[Exception], ...] = (ApiError, Unreachable, *UNREADABLE)


class Lister:
    """LISTs of one pass: a failed LIST is recorded, never raised."""

    def __init__(
        self,
        kube: Client,
        namespaces: Sequence[str],
        meta: MetaList,
        sorter: Sorter,
        in_full: frozenset[str] = frozenset(),
    ) -> None:
        self.kube, self.namespaces, self.meta, self.sorter = kube, namespaces, meta, sorter
        # Kinds that moved past FETCH_MAX between the last two passes: listed
        # in full at once, their metadata LIST would only precede it.
        self.in_full = in_full
        # Of each kind read by a LIST of metadata alone, the objects fetched
        # by GET: its churn (churn.py), known without comparing snapshots.
        self.fetched: dict[str, int] = {}
        self.errors: list[str] = []
        # Of each kind whose LIST failed in a way the next pass will meet
        # again: why, in words that stay the same from pass to pass.
        self.lasting: dict[str, str] = {}
        self.attempts = 0
        self.failed_to_reach: list[str] = []
        self.counts: dict[str, int] = {}
        # Kinds whose LIST answered what was not the list asked for, and kinds
        # whose LIST did not show an object that exists (orphans.py): counted.
        self.malformed: list[str] = []
        self.stale: list[str] = []
        # Set by the first LIST that could not reach the cluster (a timeout, a
        # refused connection) or had no credentials to ask with (an exec
        # plugin that failed): the others of the pass fail with it unasked,
        # so a pass against a dead or dribbling apiserver, or with a plugin
        # that hangs, ends within one timeout and its retries, not one per kind.
        self.gave_up: Unreachable | None = None

    def list(
        self,
        res: ResourceType,
        selector: str | None,
        list_in: ListIn,
        reuse: Reuse[Any] | None = None,
        namespaces: Sequence[str] | None = None,
    ) -> tuple[Any, ...] | None:
        """One kind's LIST over the scope, or over ``namespaces`` when given."""
        self.attempts += 1
        if self.gave_up is not None:
            self.failed(res, self.gave_up)
            return None
        try:
            decoded = self._items(res, selector, list_in, reuse, namespaces)
        except READ_FAILURES as exc:
            self.failed(res, exc)
            if isinstance(exc, Unreachable):  # NoCredentials too
                self.gave_up = exc
            return None
        self.counts[res.kind] = len(decoded)
        log.info("listed %d %s", len(decoded), res.kind)
        return tuple(decoded)

    def failed(self, res: ResourceType, exc: Exception) -> None:
        """Record why reading ``res`` failed: for the pass's errors, for the
        statuses when the next pass will meet it again, and for telling an
        unreachable cluster apart."""
        if isinstance(exc, ApiError | Unreachable):
            self.errors.append(_why(res, exc))
            if isinstance(exc, ApiError) and exc.lasting:
                self.lasting[res.kind] = f"LIST {res.kind}: {exc}"
            refused = _refused(res, exc)
            if refused is not None:
                self.failed_to_reach.append(refused)
            return
        if isinstance(exc, NotAList):
            self.errors.append(f"LIST {res.kind}: {exc}")
            self.lasting[res.kind] = f"LIST {res.kind}: the answer is not a {res.kind}List"
            self.malformed.append(res.kind)
            return
        # Garbled by a proxy or a broken server: this read only.
        self.errors.append(f"LIST {res.kind}: the answer could not be read ({exc})")
        self.lasting[res.kind] = f"LIST {res.kind}: the answer could not be read"

    def _items(
        self,
        res: ResourceType,
        selector: str | None,
        list_in: ListIn,
        reuse: Reuse[Any] | None,
        namespaces: Sequence[str] | None,
    ) -> Sequence[Any]:
        """By a LIST of metadata when the pass before saw the kind and it has
        not been moving, else in full."""
        scope = self.namespaces if namespaces is None else namespaces
        if reuse is not None and res.kind not in self.in_full:
            keep = self.sorter.keep(res)
            cheap = _unchanged_or_fetched(self.kube, res, scope, reuse, self.meta, selector, keep)
            if cheap is not None:
                log.debug("%s: unchanged or fetched one by one", res.kind)
                self.fetched[res.kind] = self.fetched.get(res.kind, 0) + cheap.fetched
                return cheap.items
        elif reuse is not None:
            log.debug("%s: moving since the pass before, listed in full at once", res.kind)
        self.fetched.pop(res.kind, None)
        return across(scope, list_in)

    def was_stale(self, kind: str, why: str) -> None:
        """A LIST of ``kind`` that left out an object which exists: the kind
        is not seen this pass, as after a failed LIST."""
        self.errors.append(why)
        self.stale.append(kind)

    @property
    def unreachable(self) -> str | None:
        """Set only when every LIST failed to reach the cluster or was refused
        for the credentials: then nothing can be done at all."""
        everything_failed = len(self.failed_to_reach) == self.attempts
        return self.failed_to_reach[0] if everything_failed else None


def reuse_of(
    objects: Iterable[T] | None, decode_one: Callable[[Mapping[str, Any]], T]
) -> Reuse[T] | None:
    """What the pass before decoded of a kind; None if it did not list the kind."""
    if objects is None:
        return None
    return Reuse({version_key(o.uid, o.resource_version): o for o in objects}, decode_one)
