"""reconciler.client.proxy: the proxy kubectl would use, case by case."""

from __future__ import annotations

import pytest

from reconciler.client.proxy import proxy_for

P = "http://proxy:3128"


@pytest.mark.parametrize(
    ("server", "proxy_url", "env", "want"),
    [
        ("https://k.example.com", None, {}, None),
        ("https://k.example.com", None, {"HTTPS_PROXY": P}, P),
        ("https://k.example.com", None, {"https_proxy": "proxy:3128"}, P),
        ("https://k.example.com", None, {"HTTP_PROXY": P}, None),  # http only
        ("http://k.example.com", None, {"HTTP_PROXY": P}, P),
        (
            "https://k.example.com",
            "http://other:1",
            {"HTTPS_PROXY": P, "NO_PROXY": "*"},
            "http://other:1",
        ),
        ("https://127.0.0.1:6443", None, {"HTTPS_PROXY": P}, None),  # loopback: never
        ("https://[::1]:6443", None, {"HTTPS_PROXY": P}, None),
        ("https://localhost:6443", None, {"HTTPS_PROXY": P}, None),
        ("https://127.0.0.1:6443", P, {}, P),  # proxy-url: always
        ("https://k.example.com", None, {"HTTPS_PROXY": P, "NO_PROXY": "*"}, None),
        ("https://k.example.com", None, {"HTTPS_PROXY": P, "NO_PROXY": "example.com"}, None),
        ("https://example.com", None, {"HTTPS_PROXY": P, "NO_PROXY": "example.com"}, None),
        ("https://example.com", None, {"HTTPS_PROXY": P, "NO_PROXY": ".example.com"}, P),
        ("https://k.example.com", None, {"HTTPS_PROXY": P, "NO_PROXY": "*.example.com"}, None),
        ("https://notexample.com", None, {"HTTPS_PROXY": P, "NO_PROXY": "example.com"}, P),
        ("https://10.1.2.3:6443", None, {"HTTPS_PROXY": P, "NO_PROXY": "10.0.0.0/8"}, None),
        ("https://11.1.2.3:6443", None, {"HTTPS_PROXY": P, "NO_PROXY": "10.0.0.0/8"}, P),
        ("https://10.1.2.3:6443", None, {"HTTPS_PROXY": P, "NO_PROXY": "10.1.2.3"}, None),
        (
            "https://k.example.com:6443",
            None,
            {"HTTPS_PROXY": P, "NO_PROXY": "k.example.com:6443"},
            None,
        ),
        (
            "https://k.example.com:443",
            None,
            {"HTTPS_PROXY": P, "NO_PROXY": "k.example.com:6443"},
            P,
        ),
        ("https://K.Example.com", None, {"HTTPS_PROXY": P, "no_proxy": " EXAMPLE.com , x"}, None),
    ],
)
def test_the_proxy_kubectl_would_use(
    server: str, proxy_url: str | None, env: dict[str, str], want: str | None
) -> None:
    assert proxy_for(server, proxy_url, env) == want
