"""Observe: one LIST per kind (per namespace when scoped) into a Snapshot.

Pods are listed before our objects: an owner always exists before its pods,
so every owner of a listed pod is in the later LIST of its kind, and a pod is
never mistaken for an orphan because its owner appeared mid-pass.

Only the pods that carry our label are listed, so that the pods of others
in a shared cluster cost the pass (almost) nothing. Two kinds of pod matter
without our label: a foreign pod holding a desired name (the object says so
and nothing is created), and ours with its labels removed by hand (they are
put back). Both hold a name the object wants, so once the objects are listed,
each desired name that the labelled pods do not show is looked up: by GET
while they are few, else by one LIST of every pod, of which only those names
are kept (`_named`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from reconciler.buckets import Scope, bucket_of
from reconciler.children import CHILD_TYPES, decoder
from reconciler.client.errors import (
    ApiError,
    Forbidden,
    NoCredentials,
    NotFound,
    Unauthorized,
    Unreachable,
)
from reconciler.client.interface import Client
from reconciler.client.protowire import ACCEPT as POD_ACCEPT
from reconciler.client.protowire import (
    META_ACCEPT,
    META_ACCEPT_JSON,
    UNREADABLE,
    PodStream,
    VersionStream,
)
from reconciler.constants import MANAGED_POD_SELECTOR
from reconciler.kinds.base import Kind
from reconciler.kinds.registry import KINDS
from reconciler.model import (
    LABEL_BUCKET,
    NAMESPACES,
    PODS,
    Child,
    Known,
    Page,
    Pod,
    ResourceType,
    Version,
    mapping,
    meta_of,
    page_of,
    pod_from_api,
    pod_page,
    version_key,
)
from reconciler.snapshot import Snapshot

log = logging.getLogger(__name__)


class _Versioned(Protocol):
    @property
    def uid(self) -> str: ...
    @property
    def resource_version(self) -> str: ...


T = TypeVar("T", bound=_Versioned)


@dataclass(frozen=True)
class Observation:
    snapshot: Snapshot
    report_pods: tuple[Pod, ...] | None
    errors: tuple[str, ...] = ()
    unreachable: str | None = None  # set when no LIST could reach the cluster
    counts: dict[str, int] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()  # worth a look, but no object failed: a typo in the scope
    mislabelled: frozenset[int] = frozenset()  # see Sorter


def _across(namespaces: Sequence[str], list_in: Callable[[str | None], list[T]]) -> list[T]:
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
# (protowire.VersionStream): asked for as JSON, it comes in pages of this many
# items when metadata_page_size asks for one page.
JSON_METADATA_PAGE_SIZE = 2000
# The same for a LIST of whole objects in JSON (Redis, Xca, and pods with
# protobuf off) when page_size asks for one page; pods as protobuf are read as
# they arrive (protowire.PodStream), in one page.
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


def _unchanged_or_fetched(
    kube: Client,
    res: ResourceType,
    namespaces: Sequence[str],
    reuse: Reuse[T],
    how: MetaList,
    selector: str | None,
    keep: Callable[[Version], bool] | None,
) -> list[T] | None:
    """The objects of a kind from a LIST of their metadata alone: each one at
    a resourceVersion already decoded is reused, any other is fetched by GET
    (of those ``keep`` keeps: a sharded replica's, the others are dropped
    unread).
    None when that would not be cheaper than a full LIST (too many changed) or
    the apiserver refused it: then the kind is listed in full, and a failure
    is reported there. An unreachable cluster raises at once: a full LIST
    would only fail again, after its own retries."""
    try:
        versions = _across(
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
            v.known_as: _get(kube, res, v.namespace, v.name, reuse.decode_one) for v in unknown
        }
    except ApiError:
        return None
    except UNREADABLE as exc:
        log.warning("LIST %s: metadata unreadable (%s); listing in full", res.kind, exc)
        return None
    found = (reuse.known.get(v.known_as) or fetched.get(v.known_as) for v in versions)
    return [obj for obj in found if obj is not None]


def _get(
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
_READ_FAILURES: tuple[type[Exception], ...] = (ApiError, Unreachable, *UNREADABLE)


class _Lister:
    """LISTs of one pass: a failed LIST is recorded, never raised."""

    def __init__(
        self, kube: Client, namespaces: Sequence[str], meta: MetaList, sorter: Sorter
    ) -> None:
        self.kube, self.namespaces, self.meta, self.sorter = kube, namespaces, meta, sorter
        self.errors: list[str] = []
        # Of each kind whose LIST failed in a way the next pass will meet
        # again: why, in words that stay the same from pass to pass.
        self.lasting: dict[str, str] = {}
        self.attempts = 0
        self.failed_to_reach: list[str] = []
        self.counts: dict[str, int] = {}

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
        try:
            decoded = self._items(res, selector, list_in, reuse, namespaces)
        except _READ_FAILURES as exc:
            self.failed(res, exc)
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
        """By a LIST of metadata when the pass before saw the kind, else in full."""
        scope = self.namespaces if namespaces is None else namespaces
        if reuse is not None:
            keep = self.sorter.keep(res)
            cheap = _unchanged_or_fetched(self.kube, res, scope, reuse, self.meta, selector, keep)
            if cheap is not None:
                log.debug("%s: unchanged or fetched one by one", res.kind)
                return cheap
        return _across(scope, list_in)

    @property
    def unreachable(self) -> str | None:
        """Set only when every LIST failed to reach the cluster or was refused
        for the credentials: then nothing can be done at all."""
        everything_failed = len(self.failed_to_reach) == self.attempts
        return self.failed_to_reach[0] if everything_failed else None


@dataclass(frozen=True)
class Namespaces:
    terminating: frozenset[str]
    warnings: tuple[str, ...]


def _terminating(obj: Mapping[str, Any]) -> bool:
    phase = mapping(obj.get("status")).get("phase")
    return phase == "Terminating" or bool(meta_of(obj).get("deletionTimestamp"))


def _namespaces(kube: Client, scope: Sequence[str]) -> Namespaces:
    """Which namespaces are being deleted (nothing can be created there), and
    which configured ones do not exist (a typo must not pass in silence).

    Read from the namespaces themselves rather than learnt from refused
    creates: a pass then never plans a write it knows will be refused, and the
    same read checks the scope. One LIST, or one GET per configured namespace.
    """
    try:
        if not scope:
            found: list[dict[str, Any]] = kube.list(NAMESPACES, page_size=JSON_PAGE_SIZE)
            return Namespaces(
                frozenset(n["metadata"]["name"] for n in found if _terminating(n)), ()
            )
        terminating, missing = set(), []
        for ns in scope:
            try:
                if _terminating(kube.get(NAMESPACES, "", ns)):
                    terminating.add(ns)
            except NotFound:
                missing.append(f"namespace {ns} does not exist (is it a typo in the scope?)")
        return Namespaces(frozenset(terminating), tuple(missing))
    except (ApiError, Unreachable) as exc:
        why = (
            f"cannot read namespaces ({exc}); creates are not held back in namespaces being deleted"
        )
        return Namespaces(frozenset(), (why,))


def _holders(
    lister: _Lister, full: FullList, missing: set[tuple[str, str]], reuse: Reuse[Pod] | None
) -> list[Pod]:
    """The pods holding these names: a GET each while they are few, else one
    LIST of every pod in scope, of which only these names are kept."""
    if len(missing) <= FETCH_MAX:
        got = (_get(lister.kube, PODS, ns, name, pod_from_api) for ns, name in sorted(missing))
        return [pod for pod in got if pod is not None]
    everything = _across(
        lister.namespaces, full.pods(lister.kube, None, reuse.known if reuse else {})
    )
    return [p for p in everything if (p.namespace, p.name) in missing]


def _missing_names(
    objects: Mapping[str, tuple[Any, ...] | None], labelled: tuple[Pod, ...]
) -> set[tuple[str, str]]:
    """The desired pod names, of every kind that has them, that no labelled
    pod holds. Asked every pass, so it avoids building a set of every name."""
    held: dict[str, set[str]] = {}
    for pod in labelled:
        held.setdefault(pod.namespace, set()).add(pod.name)
    missing: set[tuple[str, str]] = set()
    for kind in KINDS:
        found = objects.get(kind.name)
        if kind.pod_names is None or found is None:
            continue
        for obj in found:
            names = held.get(obj.namespace, _NONE)
            for name in kind.pod_names(obj):
                if name not in names:
                    missing.add((obj.namespace, name))
    return missing


_NONE: frozenset[str] = frozenset()


def _named(
    lister: _Lister,
    full: FullList,
    labelled: tuple[Pod, ...],
    objects: Mapping[str, tuple[Any, ...] | None],
    reuse: Reuse[Pod] | None,
) -> tuple[Pod, ...] | None:
    """The labelled pods, and those holding a desired name the labelled ones
    do not show. None, as for a failed LIST, when the lookup fails: a pass
    never plans on a view it knows to be partial.

    These pods are read after the objects: one whose controller is one of
    our kinds but not an object just listed is left out of this pass, since
    its owner may be newer than the LIST (the next pass sees both)."""
    missing = _missing_names(objects, labelled)
    if not missing:
        return labelled
    lister.attempts += 1  # a read like a LIST: counted for telling an unreachable cluster
    try:
        found = _holders(lister, full, missing, reuse)
    except _READ_FAILURES as exc:
        lister.failed(PODS, exc)
        return None
    late = _owner_listed(found, objects)
    if late:
        log.info("found %d pod(s) holding a desired name without our label", len(late))
    return labelled + late


def _owner_listed(
    pods: Iterable[Pod], objects: Mapping[str, tuple[Any, ...] | None]
) -> tuple[Pod, ...]:
    """The pods whose controller, if one of our kinds, is an object listed."""
    ours = {kind.name: {o.uid for o in objects.get(kind.name) or ()} for kind in KINDS}
    return tuple(
        p
        for p in pods
        if not (p.controller_kind in ours and p.controller_uid not in ours[p.controller_kind])
    )


def _list_pods(
    lister: _Lister,
    full: FullList,
    selector: str | None,
    reuse: Reuse[Pod] | None,
    namespaces: Sequence[str] | None = None,
) -> tuple[Pod, ...] | None:
    """Pods as protobuf when asked for (a JSON answer still decodes)."""
    known = reuse.known if reuse else {}
    list_in = full.pods(lister.kube, selector, known)
    return lister.list(PODS, selector, list_in, reuse, namespaces)


# Past this many namespaces holding our objects, one LIST of our pods across
# all namespaces is kept rather than one LIST in each.
PER_NAMESPACE_MAX = 20


def pod_namespaces(scope: Sequence[str], previous: Snapshot | None) -> Sequence[str] | None:
    """Where to LIST our pods when the scope is every namespace (-A): in each
    namespace where the pass before saw our objects or pods, if they are few.
    The apiserver's watch cache then walks only those namespaces' pods, not
    every pod of every team, to find ours (a label selector does not spare
    it that walk). A pod in a namespace new since then is of an object new
    since then, and found by name like any desired pod the LIST does not show
    (`_named`). None: the scope as it is."""
    if scope or previous is None or previous.pods is None:
        return None
    seen: set[str] = {p.namespace for p in previous.pods}
    for kind in KINDS:
        objects = previous.of(kind.name)
        if objects is None:
            return None
        seen.update(o.namespace for o in objects)
    if not seen or len(seen) > PER_NAMESPACE_MAX:
        return None
    return sorted(seen)


def _list_kind(
    lister: _Lister,
    full: FullList,
    kind: Kind[Any],
    before: Snapshot | None,
    selector: str | None,
) -> tuple[Any, ...] | None:
    """The kind's objects, None if the LIST failed."""
    reuse = _reuse(None if before is None else before.of(kind.name), kind.decode)
    decode = page_of(kind.decode, reuse.known if reuse else {})
    res = kind.resource
    return lister.list(res, selector, full.held(lister.kube, res, selector, decode), reuse)


def _list_children(
    lister: _Lister,
    full: FullList,
    kind: str,
    before: Snapshot | None,
    sorter: Sorter,
    objects: Mapping[str, tuple[Any, ...] | None],
) -> tuple[Child, ...] | None:
    """The child objects of ``kind`` that carry our label, and those holding
    a name our objects want that the LIST does not show (another's, or ours
    with its labels removed). None if a read failed.

    Listed over the scope as it is, unlike pods (`pod_namespaces`): with
    every namespace in scope, one LIST across the cluster. The watch cache
    then walks every Service of every team to find ours, but a cluster holds
    far fewer Services and budgets than pods, and at 10,000 Redis in 20
    namespaces, one LIST of each costs less than 20: one request rather than
    20, each with its own round trip and its own answer to read."""
    res, decode_one = CHILD_TYPES[kind], decoder(kind)
    reuse = _reuse(None if before is None else before.children.get(kind), decode_one)
    decode = page_of(decode_one, reuse.known if reuse else {})
    selector = MANAGED_POD_SELECTOR
    list_in = full.held(lister.kube, res, selector, decode)
    labelled = sorter.children(lister.list(res, selector, list_in, reuse))
    if labelled is None:
        return None
    shown = {(c.namespace, c.name) for c in labelled}
    missing = {key for key in _wanted_children(kind, objects) if key not in shown}
    if not missing:
        return labelled
    lister.attempts += 1
    try:
        if len(missing) <= FETCH_MAX:
            got = (_get(lister.kube, res, ns, name, decode_one) for ns, name in sorted(missing))
            found = [c for c in got if c is not None]
        else:
            every = _across(
                lister.namespaces, full.held(lister.kube, res, None, page_of(decode_one))
            )
            found = [c for c in every if (c.namespace, c.name) in missing]
    except _READ_FAILURES as exc:
        lister.failed(res, exc)
        return None
    return labelled + tuple(found)


def _wanted_children(
    kind: str, objects: Mapping[str, tuple[Any, ...] | None]
) -> set[tuple[str, str]]:
    """(namespace, name) of each child of ``kind`` our listed objects want."""
    wanted: set[tuple[str, str]] = set()
    for our_kind in KINDS:
        found = objects.get(our_kind.name)
        if our_kind.child_names is None or found is None:
            continue
        for obj in found:
            wanted.update((obj.namespace, n) for k, n in our_kind.child_names(obj) if k == kind)
    return wanted


@dataclass(frozen=True)
class Selection:
    """What the LISTs of a pass ask for: our pods, and each kind's objects
    (None: all of them)."""

    pods: str
    objects: str | None

    @property
    def selective(self) -> bool:
        return self.objects is not None


def selection(scope: Scope | None) -> Selection:
    """Everything, or (a sharded replica) the objects and pods labelled with
    a bucket it holds, or with none yet: one LIST of each kind, as `notin`
    the other buckets selects both. Pods not labelled yet that hold a name
    the objects want are found by name too, as any pod missing from the LIST
    is (`_named`)."""
    if scope is None or not scope.select or not scope.held or len(scope.held) == scope.total:
        return Selection(MANAGED_POD_SELECTOR, None)
    ours = f"{LABEL_BUCKET} notin ({scope.others})"
    return Selection(f"{MANAGED_POD_SELECTOR},{ours}", ours)


def _reuse(
    objects: Iterable[T] | None, decode_one: Callable[[Mapping[str, Any]], T]
) -> Reuse[T] | None:
    """What the pass before decoded of a kind; None if it did not list the kind."""
    if objects is None:
        return None
    return Reuse({version_key(o.uid, o.resource_version): o for o in objects}, decode_one)


class Sorter:
    """Keeps what is in a sharded replica's scope (everything without one),
    and notes the buckets of what its LISTs returned under the label of a
    held bucket but is not its own: a label changed by hand. Only the holder
    of the true bucket may put it back, and its LISTs do not select it; told
    (`Holder.report`), it lists everything once and finds it."""

    def __init__(self, scope: Scope | None) -> None:
        self.scope = scope
        self.mislabelled: set[int] = set()

    def keeps(self, uid: str, label: str | None) -> bool:
        """``uid``: the object's, or a pod's controller's (its own without one)."""
        scope = self.scope
        if scope is None or scope.covers(uid):
            return True
        if scope.claims(label):
            self.mislabelled.add(bucket_of(uid, scope.total))
        return False

    def keep(self, res: ResourceType) -> Callable[[Version], bool] | None:
        """What to keep of a LIST of ``res``'s metadata; None: all of it."""
        scope = self.scope
        if scope is None or len(scope.held) == scope.total:
            return None
        if res == PODS or res.kind in CHILD_TYPES:
            return lambda v: self.keeps(v.controller_uid or v.uid, v.bucket_label)
        return lambda v: self.keeps(v.uid, v.bucket_label)

    def pods(self, pods: tuple[Pod, ...] | None) -> tuple[Pod, ...] | None:
        """The pods of the objects in scope: a pod is in its controller's
        bucket (its own, if it has no controller)."""
        if self.scope is None or pods is None:
            return pods
        return tuple(
            p for p in pods if self.keeps(p.controller_uid or p.uid, p.labels.get(LABEL_BUCKET))
        )

    def children(self, children: tuple[Child, ...] | None) -> tuple[Child, ...] | None:
        """Those of the objects in scope, as pods: by their controller."""
        if self.scope is None or children is None:
            return children
        return tuple(c for c in children if self.keeps(c.controller_uid or c.uid, None))

    def objects(self, objects: tuple[Any, ...] | None) -> tuple[Any, ...] | None:
        if self.scope is None or objects is None:
            return objects
        return tuple(o for o in objects if self.keeps(o.uid, o.bucket_label))


def observe(
    kube: Client,
    namespaces: Sequence[str],
    report_selector: str | None,
    *,
    protobuf: bool,
    page_size: int,
    metadata_page_size: int,
    previous: Snapshot | None = None,
    scope: Scope | None = None,
) -> Observation:
    """LIST every kind; a failed LIST leaves that kind None, never partial.
    ``protobuf`` asks for pods as protobuf (the ``protobuf`` setting). Whole
    objects come in pages of ``page_size`` (0: one page for pods as protobuf,
    pages of JSON_PAGE_SIZE for what comes as JSON). An object unchanged since
    ``previous`` (same uid and resourceVersion) is taken from there rather
    than decoded again, after a LIST of metadata in pages of
    ``metadata_page_size`` (0: one page). With ``scope`` (a sharded
    replica), only the objects of its buckets and their pods are kept."""
    full = FullList(protobuf, page_size)
    if protobuf:
        meta = MetaList(META_ACCEPT, metadata_page_size)
    else:
        meta = MetaList(META_ACCEPT_JSON, metadata_page_size or JSON_METADATA_PAGE_SIZE)
    sorter = Sorter(scope)
    lister = _Lister(kube, namespaces, meta, sorter)
    pod_reuse = _reuse(None if previous is None else previous.pods, pod_from_api)
    chosen = selection(scope)
    where = pod_namespaces(namespaces, previous)
    labelled = sorter.pods(_list_pods(lister, full, chosen.pods, pod_reuse, where))
    report_pods = None
    if report_selector == MANAGED_POD_SELECTOR:
        report_pods = labelled
    elif report_selector is not None:
        report_pods = sorter.pods(_list_pods(lister, full, report_selector or None, pod_reuse))
    objects = {
        kind.name: sorter.objects(_list_kind(lister, full, kind, previous, chosen.objects))
        for kind in KINDS
    }
    if labelled is not None and chosen.selective:
        # An owner missing from a LIST selected on the bucket label may be
        # there with a label changed by hand: its pods are no orphans to
        # delete, and wait for the next pass that lists everything.
        labelled = _owner_listed(labelled, objects)
    pods = None if labelled is None else _named(lister, full, labelled, objects, pod_reuse)
    del pod_reuse
    children = {
        kind: _list_children(lister, full, kind, previous, sorter, objects) for kind in CHILD_TYPES
    }
    pods_error = lister.lasting.get(PODS.kind) if pods is None else None
    seen = (
        _namespaces(kube, namespaces) if lister.unreachable is None else Namespaces(frozenset(), ())
    )
    for warning in seen.warnings:
        log.warning("%s", warning)
    return Observation(
        Snapshot(objects, pods, seen.terminating, pods_error, children=children),
        report_pods,
        tuple(lister.errors),
        lister.unreachable,
        lister.counts,
        seen.warnings,
        frozenset(sorter.mislabelled),
    )
