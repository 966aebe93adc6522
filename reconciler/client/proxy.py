"""Which proxy, if any, carries requests to the apiserver, as kubectl decides.

The kubeconfig cluster's ``proxy-url`` wins. Else the environment, read as
Go reads it (golang.org/x/net/http/httpproxy): HTTPS_PROXY for an https
server, HTTP_PROXY for http, upper case first; NO_PROXY lists hosts,
domains (``example.com`` with its subdomains, ``.example.com`` without
it), IP addresses and CIDR blocks, each with an optional port, or ``*``.
localhost and loopback addresses never go through the environment's proxy.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from urllib.parse import urlsplit


def proxy_for(server: str, proxy_url: str | None, environ: Mapping[str, str]) -> str | None:
    """The proxy's URL for ``server``, or None to dial it directly."""
    if proxy_url:
        return proxy_url
    url = urlsplit(server)
    scheme = url.scheme or "https"
    proxy = _env(environ, f"{scheme}_proxy")
    if not proxy:
        return None
    host = (url.hostname or "").lower()
    port = url.port or (443 if scheme == "https" else 80)
    if host == "localhost" or _loopback(host) or _bypassed(host, port, _env(environ, "no_proxy")):
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


def _env(environ: Mapping[str, str], name: str) -> str:
    return environ.get(name.upper()) or environ.get(name) or ""


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _bypassed(host: str, port: int, no_proxy: str) -> bool:
    return any(_matches(host, port, e) for e in no_proxy.lower().replace(" ", "").split(",") if e)


def _matches(host: str, port: int, entry: str) -> bool:
    if entry == "*":
        return True
    try:
        return ipaddress.ip_address(host) in ipaddress.ip_network(entry, strict=False)
    except ValueError:
        pass
    name, want_port = _split_port(entry)
    if want_port is not None and want_port != port:
        return False
    if name.startswith("*."):
        name = name[1:]
    if name.startswith("."):
        return host.endswith(name)
    return host == name or host.endswith("." + name)


def _split_port(entry: str) -> tuple[str, int | None]:
    """``host:port`` or ``[v6]:port``; a bare IPv6 address has no port."""
    if entry.startswith("["):
        name, _, rest = entry[1:].partition("]")
        return name, int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else None
    name, sep, port = entry.rpartition(":")
    if sep and port.isdigit() and ":" not in name:
        return name, int(port)
    return entry, None
