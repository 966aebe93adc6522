"""The Kubernetes client.

Everything above this module talks in plain dicts and the exceptions of
`reconciler.client.errors`, through the `Client` Protocol, so the rest of
the code is testable without an API server and the client library could be
swapped without touching the planner or executor.

``reconciler.client.kubeconfig`` reads the kubeconfig, and
``reconciler.client.credentials`` keeps who we are current (exec plugins,
rotated tokens and certificates). Which transport sends the requests is
`connection`'s choice; each request's path and target are made by
`request_head`, a failed answer is read by `api_error`, and a LIST is paged
by `paging`. The rate limiter and the request counters are shared
(`accounting`); which kubeconfig is read is `locate`'s job.
"""

from __future__ import annotations

import builtins
import copy
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, TypeVar, cast

import msgspec

from reconciler.client.accounting import DRY_RUN, REVIEW, RateLimiter, Stats, Warnings
from reconciler.client.api_error import MAX_RETRY_AFTER, api_error, short
from reconciler.client.connection import transport_for
from reconciler.client.credentials import Credentials
from reconciler.client.errors import (
    ApiError,
    EvictionRefused,
    NoCredentials,
    Unreachable,
)
from reconciler.client.exec_plugin import CredentialError, end_all
from reconciler.client.interface import UNFENCED, WriteFence
from reconciler.client.json_wire import raw_page
from reconciler.client.locate import kubeconfig_reloader, load_kubeconfig
from reconciler.client.paging import HEAD, held_to, list_kinds, paged
from reconciler.client.presented import Presented
from reconciler.client.request_head import header_value_ok, path_of, request_target
from reconciler.client.transport import Sink, TransportError
from reconciler.config import Config
from reconciler.model import PODS, Incremental, Page, ResourceType
from reconciler.untrusted import shown

log = logging.getLogger(__name__)


T = TypeVar("T")


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
        self.transport = transport_for(self.kube_config, settings, self.credentials, self.server)
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
            if not header_value_ok(name):
                raise ValueError(f"a replica name a header cannot carry: {shown(name)}")
            other.user_agent = f"{self.user_agent} ({name})"
        return other

    @property
    def default_namespace(self) -> str:
        return self.kube_config.namespace or "default"

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
                if not header_value_ok(auth):
                    self.stats.record(verb, "error", 0)
                    raise NoCredentials(_UNSENDABLE)
                hdrs["Authorization"] = auth
            try:
                resp = self.transport.send(method, target, body, hdrs, sink)
            except TransportError as exc:
                self.stats.record(verb, "error", 0)
                raise Unreachable(f"{self.server}: {short(exc)}") from None
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
            err = api_error(resp)
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
        path, kinds = path_of(res, namespace), list_kinds(res, accept)

        def fetch(params: Mapping[str, Any]) -> Page[T]:
            body = self.send("GET", path, verb="LIST", params=params, headers=headers)
            return held_to(lambda: read(body), kinds, body[:HEAD])

        return paged(res, path, selector, self._limit(page_size), fetch)

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
        path, headers = path_of(res, namespace), {"Accept": accept}
        kinds = list_kinds(res, accept)

        def fetch(params: Mapping[str, Any]) -> Page[T]:
            stream = start()
            self.send("GET", path, verb="LIST", params=params, headers=headers, sink=stream.feed)
            return held_to(stream.close, kinds, stream.head)

        return paged(res, path, selector, self._limit(page_size), fetch)

    def _limit(self, page_size: int | None) -> int:
        """A LIST's page size: its own, else the ``page_size`` setting."""
        return self.settings.page_size if page_size is None else page_size

    def get(self, res: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        return self.request("GET", path_of(res, namespace, name))

    def create(
        self, res: ResourceType, namespace: str, body: Mapping[str, Any], *, dry_run: bool = False
    ) -> dict[str, Any]:
        if dry_run:
            path = path_of(res, namespace)
            return self.request("POST", path, json=body, params={"dryRun": "All"}, verb=DRY_RUN)
        return self.request("POST", path_of(res, namespace), json=body)

    def review(self, res: ResourceType, body: Mapping[str, Any]) -> dict[str, Any]:
        return self.request("POST", path_of(res, None), json=body, verb=REVIEW)

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
        self.request("DELETE", path_of(res, namespace, name), json=body)

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
        path = path_of(PODS, namespace, name, "eviction")
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
        return self.request("PUT", path_of(res, namespace, name), json=body)

    def merge_patch(
        self, res: ResourceType, namespace: str, name: str, body: Mapping[str, Any], sub: str = ""
    ) -> dict[str, Any]:
        return self.request(
            "PATCH",
            path_of(res, namespace, name, sub),
            json=body,
            headers={"Content-Type": "application/merge-patch+json"},
        )

    def version(self) -> dict[str, Any]:
        return self.request("GET", "/version")

    def presented(self) -> Presented:
        """The credential's kind and expiry (`reconciler check`); runs an exec plugin."""
        return self.credentials.presented()


_UNSENDABLE = (
    "the credential holds a character a header cannot carry "
    "(a control character, or a byte past ASCII): not sent"
)


def stop_credential_plugins() -> None:
    """Kill every exec plugin running, with its children, and run none
    again: the process is stopping (the daemon's SIGTERM), and a pass that
    waits on a plugin must end now, not after the plugin's timeout."""
    end_all()
