"""What an answer that failed means: the `ApiError` it is read as (the
apiserver's Status, in JSON or protobuf, with its causes), the wait its
Retry-After asks for, and a connection error said in one line."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import msgspec

from reconciler.client.errors import ApiError
from reconciler.client.http_read import Response
from reconciler.client.protowire import error_status_of

MAX_RETRY_AFTER = 30.0


# Retry-After as the apiserver sends it: whole seconds (a fraction is
# taken too). Not float(): it reads "nan", "inf" and "1e999", and a wait of
# NaN raises in time.sleep, one of infinity never ends.
_SECONDS = re.compile(r"[0-9]{1,9}(?:\.[0-9]{1,9})?")


def retry_after(resp: Response) -> float | None:
    """The wait an answer asks for, at most MAX_RETRY_AFTER; None when it
    asks for none, or in a form we do not read (an HTTP date)."""
    said = resp.retry_after
    if said is None or _SECONDS.fullmatch(said := said.strip()) is None:
        return None
    return min(float(said), MAX_RETRY_AFTER)


def api_error(resp: Response) -> ApiError:
    """The error a failed answer is read as; typed by its status (errors.py)."""
    reason, message = resp.reason or "", resp.body[:500].decode("utf-8", "replace").strip()
    wait = retry_after(resp)
    if status := error_status_of(resp.body):  # a request that asked for protobuf
        return ApiError(resp.status, status.reason or reason, status.message or reason, wait)
    causes: tuple[str, ...] = ()
    try:
        body = msgspec.json.decode(resp.body)
        if isinstance(body, dict) and body.get("kind") == "Status":
            reason = str(body.get("reason") or reason)
            message = str(body.get("message") or message)
            causes = _causes(body)
    except msgspec.DecodeError:
        pass
    return ApiError(resp.status, reason, message, wait, causes)


def _causes(status: Mapping[str, Any]) -> tuple[str, ...]:
    details = status.get("details")
    found = details.get("causes") if isinstance(details, dict) else None
    return tuple(str(c["message"]) for c in found or () if isinstance(c, dict) and c.get("message"))


def short(exc: BaseException) -> str:
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
