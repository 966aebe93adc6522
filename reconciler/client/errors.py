"""The client's errors, typed by what they mean to a caller.

An answer's status picks its class once, here (`ApiError` builds the class
its status names: ``ApiError(404, ...)`` is a `NotFound`), so no caller
compares status numbers, and a test's fake that raises ``ApiError(409, ...)``
raises what the client would. Modelled on kopf's APIError classes and
controller-runtime's ``apierrors.IsNotFound``.
"""

from __future__ import annotations

from typing import Any


class KubeError(Exception):
    """Base of the client's errors."""


class ConfigMissing(KubeError):
    """No kubeconfig and not running in a pod."""


class Unreachable(KubeError):
    """The API server could not be reached at all (connection or TLS error)."""


class NotAList(KubeError):
    """An answer to a LIST that is not the list asked for: another kind, no
    ``items``, or pages that do not hang together. Read as an empty list it
    would make every object look deleted, so it fails the LIST instead."""


class NoCredentials(Unreachable):
    """The exec plugin gave no credential, so nothing could be asked."""


# The answers the same request would get again next time: the request, the
# credentials or the resource named are refused, or what it names is not there.
_LASTING = frozenset({400, 401, 403, 404, 406, 410, 415, 422})


class ApiError(KubeError):
    """The API server answered with an error status."""

    def __new__(cls, status: int, *args: Any, **kwargs: Any) -> ApiError:
        if cls is ApiError:
            retry_after = args[2] if len(args) > 2 else kwargs.get("retry_after")
            cls = _class_of(status, retry_after)
        return super().__new__(cls)

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        retry_after: float | None = None,
        causes: tuple[str, ...] = (),
    ):
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.retry_after = retry_after
        self.causes = causes  # details.causes[].message: which budget refused an eviction

    def __reduce__(self) -> tuple[Any, ...]:
        args = (self.status, self.reason, self.message, self.retry_after, self.causes)
        return (type(self), args)

    @property
    def lasting(self) -> bool:
        """The next pass would meet it again: worth saying in every status it
        leaves unplanned, unlike a timeout, a 429 or a 5xx."""
        return self.status in _LASTING


class Unauthorized(ApiError):
    """401: the credentials are not accepted."""


class Forbidden(ApiError):
    """403: RBAC, or an admission quota, refuses the request."""


class NotFound(ApiError):
    """404: no such object (or no such resource: a CRD not installed)."""


class Conflict(ApiError):
    """409: a resourceVersion that moved on, or a name already taken."""


class Gone(ApiError):
    """410: a continue token or resourceVersion too old to serve."""


class Invalid(ApiError):
    """422: the object is refused as it is (validation, or admission)."""


class Throttled(ApiError):
    """429, or 503 with Retry-After, past the retries: the cluster's load
    (API Priority and Fairness), not a fault of the object written."""


class ServerError(ApiError):
    """5xx, past the retries: the apiserver, or a proxy or load balancer in
    front of it, failed to answer (502, 504 from a gateway; 500 from a
    webhook that timed out). Not the object's fault: the next pass asks again."""


class BadRequestTarget(ApiError):
    """A request refused before a byte of it is sent: a name or namespace
    (from an object, an owner reference, an answer) that is no Kubernetes
    name, so that put into a request line it could be more than a name (a
    second request, a path that walks up). Status 400: the apiserver would
    refuse it too, and so it is lasting; an `ApiError`, so every caller that
    takes a refusal per object (observe's owner GETs, the executor's writes)
    takes this one per object, and the pass goes on."""

    def __new__(cls, what: str, *args: Any, **kwargs: Any) -> BadRequestTarget:
        return Exception.__new__(cls)

    def __init__(self, what: str, why: str) -> None:
        super().__init__(400, "BadRequestTarget", f"{what}: {why}; not sent")
        self.what, self.why = what, why

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.what, self.why))


class EvictionRefused(ApiError):
    """An eviction a disruption budget does not allow now (429 without
    Retry-After), or that the apiserver cannot judge (a pod more than one
    budget selects): the pod stays, and a later pass asks again."""

    @property
    def why(self) -> str:
        """The apiserver's own words, the budget's name among them when it gives it."""
        return "; ".join((self.message, *self.causes))


_BY_STATUS: dict[int, type[ApiError]] = {
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
    429: Throttled,
}


def throttled(status: int, retry_after: float | None) -> bool:
    """The apiserver asks us to come back later: API Priority and Fairness
    answers 429, and an overloaded server 503 with Retry-After."""
    return status == 429 or (status == 503 and retry_after is not None)


def _class_of(status: int, retry_after: float | None) -> type[ApiError]:
    if throttled(status, retry_after):
        return Throttled
    if status >= 500:
        return ServerError
    return _BY_STATUS.get(status, ApiError)
