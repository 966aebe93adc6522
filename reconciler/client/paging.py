"""A LIST in pages, as one consistent view: limit and continue, a restart
when the continue token expires (410), pages held to the kind asked for,
and bounds on how many pages one LIST may take. How each page is fetched
and decoded is the caller's (`Kube.list`, `Kube.list_streamed`)."""

from __future__ import annotations

import builtins
import gc
import logging
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from reconciler.client.errors import ApiError, Gone, NotAList
from reconciler.client.protowire import METADATA_LIST
from reconciler.model import Page, ResourceType

log = logging.getLogger(__name__)

T = TypeVar("T")

# One page's fetch: the query (limit, labelSelector, continue) in, a page out.
Fetch = Callable[[Mapping[str, Any]], Page[T]]


# A LIST whose continue token expired (410) mid-way starts again from its
# first page, for one view, never a splice of two; this many times at most.
LIST_RESTARTS = 1


# The most objects one LIST may hold: ten times the 100,000 pods of the
# largest scale measured (docs/performance/scale.md), and well past the
# 150,000 pods Kubernetes supports in a cluster. Past it, a LIST's pages are
# taken for pages without end (a server or proxy that hands out new continue
# tokens forever): at the 500 objects of a JSON page, 2,000 pages.
LIST_OBJECTS_MAX = 1_000_000


# Pages on top of LIST_OBJECTS_MAX / limit: a page may come short (a label
# selector the apiserver filters by), and a LIST asked for in one page
# (limit 0) is not paged by the apiserver at all.
SHORT_PAGES = 100


HEAD = 64  # bytes of an answer that an error quotes


def pages_max(limit: int) -> int:
    """The most pages a LIST asked for in pages of ``limit`` may have."""
    return SHORT_PAGES + (-(-LIST_OBJECTS_MAX // limit) if limit > 0 else 0)


def paged(
    res: ResourceType, path: str, selector: str | None, limit: int, fetch: Fetch[T]
) -> builtins.list[T]:
    """The items of a LIST of ``res`` at ``path``, in pages of ``limit``
    (0: one page), restarted from its first page when a continue token
    expires (LIST_RESTARTS times at most)."""
    # Decoding a page makes hundreds of thousands of acyclic objects; the
    # cyclic collector would scan them again and again.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for attempt in range(LIST_RESTARTS + 1):
            params: dict[str, Any] = {"limit": limit} if limit else {}
            if selector:
                params["labelSelector"] = selector
            try:
                return _pages(res, path, limit, params, fetch)
            except ApiError as exc:
                if isinstance(exc, Gone) and "continue" in params and attempt < LIST_RESTARTS:
                    log.info("LIST %s: continue token expired, restarting", res.kind)
                    continue
                raise
        raise AssertionError("unreachable: the last attempt returns or raises")
    finally:
        if was_enabled:
            gc.enable()


def _pages(
    res: ResourceType, path: str, limit: int, params: dict[str, Any], fetch: Fetch[T]
) -> builtins.list[T]:
    """The items of every page of one LIST. The continue tokens are the
    server's (or a proxy's): one sent before, or more pages than a LIST
    can have (`pages_max`), would page without end, so either fails the
    LIST (NotAList: its pages do not hang together)."""
    items: builtins.list[T] = []
    sent: set[str] = set()
    most = pages_max(limit)
    while True:
        page = fetch(params)
        items.extend(page.items)
        token = page.continue_token
        if not token:
            return items
        if token in sent:
            raise NotAList(
                f"{path}: page {len(sent) + 1} hands back a continue token "
                "sent before: its pages go round"
            )
        if len(sent) + 1 >= most:
            raise NotAList(
                f"{path}: {most} pages of {limit or 'any number of'} {res.plural} and "
                f"more to come (a LIST holds at most {LIST_OBJECTS_MAX}): its pages do not end"
            )
        sent.add(token)
        params["continue"] = token


def list_kinds(res: ResourceType, accept: str | None) -> frozenset[str]:
    """The kinds an answer to a LIST of ``res`` may be: its list, or, asked
    for as metadata, a PartialObjectMetadataList (a server that cannot send
    that sends the full list)."""
    kinds = {f"{res.kind}List"}
    if accept and f"as={METADATA_LIST}" in accept:
        kinds.add(METADATA_LIST)
    return frozenset(kinds)


def held_to(decode: Callable[[], Page[T]], kinds: frozenset[str], head: bytes) -> Page[T]:
    """The decoded page, if it is a list of a kind asked for; anything else
    (`{}`, a Status, another kind, no items) read as a list would be an
    empty one, and make every object look deleted."""
    asked = " or ".join(sorted(kinds))
    try:
        page = decode()
    except NotAList as exc:
        raise NotAList(f"the answer is not a {asked} ({exc}): {head!r}") from None
    if page.kind in kinds:
        return page
    said = f"kind {page.kind!r}" if page.kind else "no kind"
    raise NotAList(f"the answer is not a {asked} ({said}): {head!r}")
