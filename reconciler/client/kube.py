"""The Kubernetes client.

Everything above this module talks in plain dicts and the exceptions of
`reconciler.client.errors`, through the `Client` Protocol, so the rest of
the code is testable without an API server and the client library could be
swapped without touching the planner or executor.

``reconciler.client.kubeconfig`` reads the kubeconfig, and
``reconciler.client.credentials`` keeps who we are current (exec plugins,
rotated tokens and certificates). Requests go through ``transport.Direct``
(HTTP/1.1 on a kept-alive socket per thread, a sixth of the CPU), also
through an http proxy. Only an auth provider or an https proxy goes through
pykube's requests session, one per thread because a ``requests.Session`` is
not thread-safe; pykube and requests are imported only then (about 6 MB of
memory; `pykube_session`, the only module that imports pykube). The rate
limiter and the request counters are shared (`accounting`); which
kubeconfig is read is `locate`'s job.
"""

from __future__ import annotations

import builtins
import copy
import gc
import logging
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, TypeVar, cast
from urllib.parse import urlencode

import msgspec

from reconciler.client.accounting import DRY_RUN, REVIEW, RateLimiter, Stats, Warnings
from reconciler.client.credentials import Credentials
from reconciler.client.errors import (
    ApiError,
    BadRequestTarget,
    ConfigMissing,
    EvictionRefused,
    Gone,
    NoCredentials,
    NotAList,
    Unreachable,
)
from reconciler.client.exec_plugin import CredentialError, end_all
from reconciler.client.interface import UNFENCED, WriteFence
from reconciler.client.json_wire import raw_page
from reconciler.client.locate import kubeconfig_reloader, load_kubeconfig
from reconciler.client.presented import Presented
from reconciler.client.protowire import METADATA_LIST, error_status_of
from reconciler.client.proxy import proxy_for
from reconciler.client.pykube_session import PykubeSession, Transport, compression
from reconciler.client.transport import Direct, Response, Sink, TransportError
from reconciler.config import Config
from reconciler.model import PODS, Incremental, Page, ResourceType
from reconciler.untrusted import shown

log = logging.getLogger(__name__)


T = TypeVar("T")


MAX_RETRY_AFTER = 30.0


EVENTS = ResourceType("", "v1", "Event", "events")


USER_AGENT = "reconciler"


# Every write names this manager: left to itself, the apiserver names it after
# the user agent, which a sharded replica makes its own, so managedFields
# would grow an entry with every restart.
FIELD_MANAGER = "reconciler"


_MANAGED = frozenset({"POST", "PUT", "PATCH"})


LEASES = ResourceType("coordination.k8s.io", "v1", "Lease", "leases")
# Questions to the apiserver that store nothing: a POST answers them.
ACCESS_REVIEWS = ResourceType(
    "authorization.k8s.io", "v1", "SelfSubjectAccessReview", "selfsubjectaccessreviews"
)
SELF_REVIEWS = ResourceType(
    "authentication.k8s.io", "v1", "SelfSubjectReview", "selfsubjectreviews"
)


# Retry-After as the apiserver sends it: whole seconds (a fraction is
# taken too). Not float(): it reads "nan", "inf" and "1e999", and a wait of
# NaN raises in time.sleep, one of infinity never ends.
_SECONDS = re.compile(r"[0-9]{1,9}(?:\.[0-9]{1,9})?")


def _retry_after(resp: Response) -> float | None:
    """The wait an answer asks for, at most MAX_RETRY_AFTER; None when it
    asks for none, or in a form we do not read (an HTTP date)."""
    said = resp.retry_after
    if said is None or _SECONDS.fullmatch(said := said.strip()) is None:
        return None
    return min(float(said), MAX_RETRY_AFTER)


def _api_error(resp: Response) -> ApiError:
    reason, message = resp.reason or "", resp.body[:500].decode("utf-8", "replace").strip()
    retry_after = _retry_after(resp)
    if status := error_status_of(resp.body):  # a request that asked for protobuf
        return ApiError(resp.status, status.reason or reason, status.message or reason, retry_after)
    causes: tuple[str, ...] = ()
    try:
        body = msgspec.json.decode(resp.body)
        if isinstance(body, dict) and body.get("kind") == "Status":
            reason = str(body.get("reason") or reason)
            message = str(body.get("message") or message)
            causes = _causes(body)
    except msgspec.DecodeError:
        pass
    return ApiError(resp.status, reason, message, retry_after, causes)


def _causes(status: Mapping[str, Any]) -> tuple[str, ...]:
    details = status.get("details")
    found = details.get("causes") if isinstance(details, dict) else None
    return tuple(str(c["message"]) for c in found or () if isinstance(c, dict) and c.get("message"))


class Kube:
    """A small, thread-safe client: one transport, a shared rate limiter,
    retries, and the verbs the rest of the package uses."""

    def __init__(self, settings: Config) -> None:
        """Connect with the client settings of ``settings`` (kubeconfig, context,
        timeout, qps, burst, max_retries, page_size)."""
        self.settings = settings
        self.kube_config = load_kubeconfig(settings)
        self.credentials = Credentials(
            self.kube_config, kubeconfig_reloader(settings, self.kube_config)
        )
        self.server = self.kube_config.server.rstrip("/")
        self.limiter = RateLimiter(settings.qps, settings.burst)
        self.stats = Stats()
        self.warnings = Warnings()
        # Names this process in the apiserver's audit log (a sharded replica adds its identity).
        self.user_agent = USER_AGENT
        self.transport = self._choose_transport()
        # Asked before each retry of a throttled or failed write: a replica
        # that lost its Lease meanwhile must not write when the wait ends.
        self.fence: WriteFence = UNFENCED

    def with_budget(self, qps: float, burst: int, max_retries: int) -> Kube:
        """The same connection and credentials with a rate limit and retries
        of their own: Lease renewals must never wait behind a pass's writes."""
        other = copy.copy(self)
        other.settings = replace(self.settings, qps=qps, burst=burst, max_retries=max_retries)
        other.limiter = RateLimiter(qps, burst)
        other.fence = UNFENCED
        return other

    def fenced(self, fence: WriteFence, name: str = "") -> Kube:
        """The same connection and budget; its writes' retries ask ``fence``.
        ``name`` (a replica's) goes into every request's User-Agent: a
        character a header cannot carry is refused here, once."""
        other = copy.copy(self)
        other.fence = fence
        if name:
            if _FIELD_VALUE.fullmatch(name) is None:
                raise ValueError(f"a replica name a header cannot carry: {shown(name)}")
            other.user_agent = f"{self.user_agent} ({name})"
        return other

    @property
    def default_namespace(self) -> str:
        return self.kube_config.namespace or "default"

    def _choose_transport(self) -> Transport:
        """``Direct`` when it can send these credentials; else pykube's session."""
        kube_config = self.kube_config
        proxy = proxy_for(self.server, kube_config.proxy_url, os.environ)
        try:
            if kube_config.only_pykube or (proxy or "").startswith("https:"):
                log.debug("sending through pykube's session (an auth provider or an https proxy)")
                return PykubeSession(kube_config, self.settings, proxy)
            direct = Direct(
                self.server,
                None,
                self.settings.timeout,
                compression(self.settings, kube_config),
                contexts=self.credentials.context,
                proxy=proxy,
                server_name=kube_config.tls_server_name,
            )
            if direct.https and not kube_config.exec:
                self.credentials.context()  # a TLS file unreadable or not PEM: say so now
            return direct
        except OSError as exc:  # ssl.SSLError too
            raise ConfigMissing(f"kubeconfig {kube_config.source}: TLS files: {exc}") from None
        except ValueError as exc:  # a proxy URL we cannot speak
            raise ConfigMissing(f"kubeconfig {kube_config.source}: {exc}") from None

    @staticmethod
    def path(
        res: ResourceType, namespace: str | None, name: str | None = None, sub: str = ""
    ) -> str:
        """The path of ``res``'s collection (``name`` None) or of one object.
        Each name, namespace and subresource is checked to be a name
        (`segment`), or the request is refused unsent (BadRequestTarget): an
        owner reference's name is anyone's text, and the apiserver never
        checked it."""
        name_ok = _NAME.fullmatch  # once per request: no call but the match itself
        if namespace:
            if name_ok(namespace) is None:
                segment(res, namespace, name, namespace)
            base = f"{res.path_prefix}/namespaces/{namespace}/{res.plural}"
        else:
            base = f"{res.path_prefix}/{res.plural}"
        if name is not None:
            if name_ok(name) is None:
                segment(res, namespace, name, name)
            base = f"{base}/{name}"
        if sub:
            if name_ok(sub) is None:
                segment(res, namespace, name, sub)
            base = f"{base}/{sub}"
        return base

    def request(
        self,
        method: str,
        path: str,
        *,
        verb: str | None = None,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
        retry: bool = True,
    ) -> dict[str, Any]:
        """Send one request; retry 429/5xx honouring Retry-After (unless
        ``retry`` is off); return the JSON object."""
        content = self.send(
            method, path, verb=verb, params=params, json=json, headers=headers, retry=retry
        )
        body = msgspec.json.decode(content) if content else {}
        return body if isinstance(body, dict) else {}

    def send(
        self,
        method: str,
        path: str,
        *,
        verb: str | None = None,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
        sink: Sink | None = None,
        retry: bool = True,
    ) -> bytes:
        """Send one request; retry 429/5xx honouring Retry-After; return the
        body, or give a successful one to ``sink`` as it arrives (and return b"")."""
        verb = verb or method
        if method in _MANAGED:
            params = {**(params or {}), "fieldManager": FIELD_MANAGER}
        target = request_target(path, params)
        body = None if json is None else msgspec.json.encode(json)
        base = {"Accept": "application/json", "User-Agent": self.user_agent}
        if body is not None:
            base["Content-Type"] = "application/json"
        attempt, renewed = 0, False
        while True:
            self.limiter.acquire()
            hdrs = {**base, **(headers or {})}
            generation = self.credentials.generation
            try:
                auth = self.credentials.authorization()
            except CredentialError as exc:
                self.stats.record(verb, "error", 0)
                raise NoCredentials(str(exc)) from None
            if auth is not None:
                if _FIELD_VALUE.fullmatch(auth) is None:
                    self.stats.record(verb, "error", 0)
                    raise NoCredentials(_UNSENDABLE)
                hdrs["Authorization"] = auth
            try:
                resp = self.transport.send(method, target, body, hdrs, sink)
            except TransportError as exc:
                self.stats.record(verb, "error", 0)
                raise Unreachable(f"{self.server}: {_short(exc)}") from None
            except CredentialError as exc:  # the plugin's certificate, for a new connection
                self.stats.record(verb, "error", 0)
                raise NoCredentials(str(exc)) from None
            except Exception:  # the sink could not read the answer
                self.stats.record(verb, "error", 0)
                raise
            self.stats.record(verb, str(resp.status), resp.received)
            if resp.warning:
                self.warnings.say(resp.warning)
            if resp.status == 401 and not renewed and self._renewed(auth, generation):
                renewed = True  # sent once more with what replaced the refused credentials
                continue
            if resp.ok and (sink is None or resp.status < 300):  # a 3xx is not the body asked for
                return resp.body
            err = _api_error(resp)
            retryable = resp.status == 429 or resp.status >= 500
            if not retryable or not retry or attempt >= self.settings.max_retries:
                raise err
            if method != "GET" and not self.fence.may_write():
                raise err  # no longer ours to write: the wait would end in a stale write
            attempt += 1
            delay = min(
                err.retry_after if err.retry_after is not None else 2**attempt * 0.25,
                MAX_RETRY_AFTER,
            )
            log.warning(
                "%s %s: %s; retry %d/%d in %.1fs",
                method,
                path,
                err.status,
                attempt,
                self.settings.max_retries,
                delay,
            )
            time.sleep(delay)

    def _renewed(self, sent: str | None, generation: int) -> bool:
        try:
            return self.credentials.refused(sent, generation)
        except CredentialError as exc:
            raise NoCredentials(str(exc)) from None

    # ------------------------------------------------------------ verbs

    def list(
        self,
        res: ResourceType,
        namespace: str | None = None,
        selector: str | None = None,
        decode: Callable[[bytes], Page[T]] | None = None,
        accept: str | None = None,
        page_size: int | None = None,
    ) -> builtins.list[T]:
        """Page through a LIST with limit/continue (pykube's Query cannot page).

        An expired continue token (410) restarts the LIST, so the result is
        always one consistent view, never a splice of two. ``decode`` (from
        reconciler.model; raw dicts without it) turns each page's bytes into
        items as the page arrives, so only one page of JSON is held at once.
        ``accept`` asks for another media type (protobuf) that ``decode`` reads.
        ``page_size`` overrides the ``page_size`` setting for this LIST (0: one page).
        """
        # Without a decoder, items are the raw dicts: T is dict[str, Any].
        read = cast(Callable[[bytes], Page[T]], decode or raw_page)
        headers = {"Accept": accept} if accept else None
        path, kinds = self.path(res, namespace), list_kinds(res, accept)

        def fetch(params: Mapping[str, Any]) -> Page[T]:
            body = self.send("GET", path, verb="LIST", params=params, headers=headers)
            return held_to(lambda: read(body), kinds, body[:HEAD])

        return self._paged(res, path, selector, page_size, fetch)

    def list_streamed(
        self,
        res: ResourceType,
        namespace: str | None,
        start: Callable[[], Incremental[T]],
        accept: str,
        page_size: int | None = None,
        selector: str | None = None,
    ) -> builtins.list[T]:
        """list, with each page decoded as it arrives by a decoder from
        ``start``: a page as large as every object in the cluster (page_size
        0) is then never held whole (as protobuf; see streams.ListStream)."""
        path, headers = self.path(res, namespace), {"Accept": accept}
        kinds = list_kinds(res, accept)

        def fetch(params: Mapping[str, Any]) -> Page[T]:
            stream = start()
            self.send("GET", path, verb="LIST", params=params, headers=headers, sink=stream.feed)
            return held_to(stream.close, kinds, stream.head)

        return self._paged(res, path, selector, page_size, fetch)

    def _paged(
        self,
        res: ResourceType,
        path: str,
        selector: str | None,
        page_size: int | None,
        fetch: Callable[[Mapping[str, Any]], Page[T]],
    ) -> builtins.list[T]:
        # Decoding a page makes hundreds of thousands of acyclic objects; the
        # cyclic collector would scan them again and again.
        was_enabled = gc.isenabled()
        gc.disable()
        limit = self.settings.page_size if page_size is None else page_size
        try:
            for attempt in range(LIST_RESTARTS + 1):
                params: dict[str, Any] = {"limit": limit} if limit else {}
                if selector:
                    params["labelSelector"] = selector
                try:
                    return self._pages(res, path, limit, params, fetch)
                except ApiError as exc:
                    if isinstance(exc, Gone) and "continue" in params and attempt < LIST_RESTARTS:
                        log.info("LIST %s: continue token expired, restarting", res.kind)
                        continue
                    raise
            raise AssertionError("unreachable: the last attempt returns or raises")
        finally:
            if was_enabled:
                gc.enable()

    @staticmethod
    def _pages(
        res: ResourceType,
        path: str,
        limit: int,
        params: dict[str, Any],
        fetch: Callable[[Mapping[str, Any]], Page[T]],
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

    def get(self, res: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        return self.request("GET", self.path(res, namespace, name))

    def create(
        self, res: ResourceType, namespace: str, body: Mapping[str, Any], *, dry_run: bool = False
    ) -> dict[str, Any]:
        if dry_run:
            path = self.path(res, namespace)
            return self.request("POST", path, json=body, params={"dryRun": "All"}, verb=DRY_RUN)
        return self.request("POST", self.path(res, namespace), json=body)

    def review(self, res: ResourceType, body: Mapping[str, Any]) -> dict[str, Any]:
        return self.request("POST", self.path(res, None), json=body, verb=REVIEW)

    def delete(
        self,
        res: ResourceType,
        namespace: str,
        name: str,
        uid: str | None = None,
        *,
        resource_version: str | None = None,
    ) -> None:
        """Delete, with a uid precondition so a same-named replacement is never
        hit, and a resourceVersion one to delete only what was read."""
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        preconditions = {"uid": uid, "resourceVersion": resource_version}
        if any(preconditions.values()):
            body["preconditions"] = {k: v for k, v in preconditions.items() if v}
        self.request("DELETE", self.path(res, namespace, name), json=body)

    def evict(self, namespace: str, name: str, uid: str) -> None:
        """Delete a pod through the Eviction API, so that every disruption
        budget selecting it is honoured, with a uid precondition. Not retried
        in place: a refusal lasts until pods turn Ready, which a later pass
        sees; a 429 with Retry-After is the apiserver's load (Throttled)."""
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
            "deleteOptions": {"preconditions": {"uid": uid}},
        }
        path = self.path(PODS, namespace, name, "eviction")
        try:
            self.request("POST", path, json=body, retry=False)
        except ApiError as exc:
            refused = exc.status == 429 and exc.retry_after is None
            several = exc.status == 500 and "more than one PodDisruptionBudget" in exc.message
            if refused or several:
                raise EvictionRefused(
                    exc.status, exc.reason, exc.message, None, exc.causes
                ) from None
            raise

    def replace(
        self, res: ResourceType, namespace: str, name: str, body: Mapping[str, Any]
    ) -> dict[str, Any]:
        """PUT; the body's resourceVersion makes it a compare-and-swap."""
        return self.request("PUT", self.path(res, namespace, name), json=body)

    def merge_patch(
        self, res: ResourceType, namespace: str, name: str, body: Mapping[str, Any], sub: str = ""
    ) -> dict[str, Any]:
        return self.request(
            "PATCH",
            self.path(res, namespace, name, sub),
            json=body,
            headers={"Content-Type": "application/merge-patch+json"},
        )

    def version(self) -> dict[str, Any]:
        return self.request("GET", "/version")

    def presented(self) -> Presented:
        """The credential's kind and expiry (`reconciler check`); runs an exec plugin."""
        return self.credentials.presented()


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


def pages_max(limit: int) -> int:
    """The most pages a LIST asked for in pages of ``limit`` may have."""
    return SHORT_PAGES + (-(-LIST_OBJECTS_MAX // limit) if limit > 0 else 0)


# What a request line and a header value may hold: visible ASCII (and, in a
# header value, spaces and tabs). No control character: a CR or LF would end
# the line and start another request of the sender's choosing; no byte past
# ASCII: a proxy may read it otherwise than the apiserver does.
_TARGET = re.compile(r"/[!-~]*")
_FIELD_VALUE = re.compile(r"[\t -~]*")


# A name, namespace or subresource as it may go into a path: what any kind
# of object may be named (a DNS subdomain, and a few built-in kinds' looser
# names: capitals, "_", ":"), 1 to 253 characters, beginning and ending with
# a letter or digit. So never "." or ".." (which a proxy normalising the path
# would walk up by), "/", "?", "#", "%", a space or a control character. Its
# characters are all unreserved or ":" (RFC 3986 pchar): it is its own
# percent-encoding, so a name that passes goes in as it is.
_NAME = re.compile(r"[A-Za-z0-9](?:[-A-Za-z0-9_.:]{0,251}[A-Za-z0-9])?")


_UNSENDABLE = (
    "the credential holds a character a header cannot carry "
    "(a control character, or a byte past ASCII): not sent"
)


def segment(res: ResourceType, namespace: str | None, name: str | None, value: str) -> str:
    """``value`` (a name, namespace or subresource of a request for ``res``)
    if it may go into a path as it is; else BadRequestTarget naming the object."""
    if _NAME.fullmatch(value) is None:
        what = f"{res.kind} {shown(namespace or '')}/{shown(name or '')}"
        raise BadRequestTarget(what, f"{shown(value)} is not a name")
    return value


def request_target(path: str, params: Mapping[str, Any] | None) -> str:
    """The one way a request target (path and query) is made: the query
    percent-encoded (urlencode: a control character, a space, a byte past
    ASCII are all escaped), and the whole checked to be visible ASCII, so a
    path not made by `Kube.path` cannot carry a second request either."""
    target = f"{path}?{urlencode(params)}" if params else path
    if _TARGET.fullmatch(target) is None:
        raise BadRequestTarget(f"request {shown(target)}", "not a request target")
    return target


HEAD = 64  # bytes of an answer that an error quotes


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


def _short(exc: BaseException) -> str:
    """One line for a connection error; requests nests them deeply. A
    deadline passed says which (``transport.Direct``'s own line)."""
    text = str(exc)
    if text.startswith("timed out:"):
        return text.splitlines()[0][:200]
    for marker in (
        "Connection refused",
        "Name or service not known",
        "timed out",
        "CERTIFICATE_VERIFY_FAILED",
        "No route to host",
    ):
        if marker in text:
            return marker.lower() if marker != "CERTIFICATE_VERIFY_FAILED" else "TLS verify failed"
    return text.splitlines()[0][:200] if text else type(exc).__name__


def stop_credential_plugins() -> None:
    """Kill every exec plugin running, with its children, and run none
    again: the process is stopping (the daemon's SIGTERM), and a pass that
    waits on a plugin must end now, not after the plugin's timeout."""
    end_all()
