"""What a credential says of itself: its kind and when it expires, for
`reconciler check`. Never its value: the expiry is read from a JWT's claims
or a certificate's notAfter, and neither is verified here (the apiserver
verifies)."""

from __future__ import annotations

import base64
import json
import ssl
from dataclasses import dataclass


@dataclass(frozen=True)
class Presented:
    """What this process shows the apiserver, for `reconciler check`: the kind
    of credential (never its value) and when it expires, if that is known."""

    kind: str
    expires: float | None = None  # seconds since the epoch
    error: str | None = None  # the exec plugin gave no credential


def token_expiry(token: str | None) -> float | None:
    """A JWT's ``exp`` claim (read, not verified: the apiserver verifies);
    None for a token that is not a JWT."""
    parts = (token or "").split(".")
    if len(parts) != 3:
        return None
    try:
        payload = base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))
        exp = json.loads(payload).get("exp")
    except (ValueError, AttributeError):
        return None
    return float(exp) if isinstance(exp, int | float) and not isinstance(exp, bool) else None


def cert_expiry(path: str) -> float | None:
    """The certificate's notAfter. CPython's own decoder (the one its tests
    use) spares a dependency on a crypto library for one date."""
    try:
        decoded = ssl._ssl._test_decode_cert(path)  # type: ignore[attr-defined]
        return float(ssl.cert_time_to_seconds(decoded["notAfter"]))
    except (OSError, ssl.SSLError, KeyError, ValueError, AttributeError):
        return None
