"""What `reconciler check` says of a credential: its expiry, read from the
credential itself, and never the credential."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path

import pytest

from reconciler.client.presented import cert_expiry, token_expiry

from .test_credentials import _client_cert


def jwt(claims: object) -> str:
    def part(doc: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256'})}.{part(claims)}.c2lnbmF0dXJl"


@pytest.mark.parametrize(
    ("token", "expires"),
    [
        (jwt({"exp": 1893456000, "sub": "system:serviceaccount:a:b"}), 1893456000.0),
        (jwt({"exp": 1893456000.5}), 1893456000.5),
        (jwt({"sub": "no exp"}), None),
        (jwt({"exp": "soon"}), None),
        (jwt({"exp": True}), None),
        (jwt(["not", "an", "object"]), None),
        ("abc.!!!.def", None),
        ("a-static-token", None),
        ("", None),
        (None, None),
    ],
)
def test_a_tokens_expiry_is_its_exp_claim_or_unknown(token: str | None, expires: float | None):
    assert token_expiry(token) == expires


def test_a_certificates_expiry_is_its_not_after(tmp_path: Path):
    crt, _ = _client_cert(tmp_path, "bastion")  # openssl -days 1
    expires = cert_expiry(str(crt))
    assert expires is not None
    assert abs(expires - (time.time() + 86400)) < 120


def test_a_certificate_that_cannot_be_read_has_no_known_expiry(tmp_path: Path):
    garbage = tmp_path / "not.pem"
    garbage.write_text("not a certificate")
    assert cert_expiry(str(garbage)) is None
    assert cert_expiry(str(tmp_path / "absent.pem")) is None
