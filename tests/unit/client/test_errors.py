"""An answer's status picks its error's class once, in the client."""

from __future__ import annotations

import pickle

import pytest

from reconciler.client.errors import (
    ApiError,
    Conflict,
    EvictionRefused,
    Forbidden,
    Gone,
    Invalid,
    NotFound,
    ServerError,
    Throttled,
    Unauthorized,
)


@pytest.mark.parametrize(
    ("status", "retry_after", "cls"),
    [
        (401, None, Unauthorized),
        (403, None, Forbidden),
        (404, None, NotFound),
        (409, None, Conflict),
        (410, None, Gone),
        (422, None, Invalid),
        (429, None, Throttled),
        (429, 2.0, Throttled),
        (503, 1.0, Throttled),  # an overloaded server that says when to come back
        (503, None, ServerError),  # one that does not: a failure like any 5xx
        (500, None, ServerError),
        (502, None, ServerError),  # a gateway in front of the apiserver
        (504, None, ServerError),
        (400, None, ApiError),
        (418, None, ApiError),
    ],
)
def test_the_status_names_the_class(status: int, retry_after: float | None, cls: type) -> None:
    err = ApiError(status, "Reason", "message", retry_after)
    assert type(err) is cls
    assert (err.status, err.reason, err.message, err.retry_after) == (
        status,
        "Reason",
        "message",
        retry_after,
    )
    assert str(err) == f"{status} Reason: message"


def test_retry_after_counts_when_given_by_name() -> None:
    assert type(ApiError(503, "ServiceUnavailable", "busy", retry_after=1.0)) is Throttled


def test_a_subclass_named_is_built_as_named() -> None:
    """The client turns a refused eviction's 429 into EvictionRefused itself."""
    err = EvictionRefused(429, "TooManyRequests", "budget", None, ("pdb r",))
    assert type(err) is EvictionRefused
    assert err.why == "budget; pdb r"


@pytest.mark.parametrize(
    ("status", "lasting"),
    [
        *[(status, True) for status in (400, 401, 403, 404, 410, 422)],
        *[(status, False) for status in (408, 409, 429, 500, 503)],
    ],
)
def test_lasting_refusals_are_those_the_next_pass_meets_again(status: int, lasting: bool) -> None:
    assert ApiError(status, "R", "m").lasting is lasting


def test_an_error_survives_a_copy_across_processes() -> None:
    err = ApiError(409, "Conflict", "the object has been modified", None, ("c",))
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is Conflict
    assert (back.status, back.message, back.causes) == (409, err.message, ("c",))
