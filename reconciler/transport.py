"""Kept-alive HTTP/1.1 connections to the apiserver, one per thread.

Why not requests: requests and urllib3 spend about 0.75 ms of CPU on each
request before a byte reaches the socket (session merging, hooks, cookie
jars, URL parsing, retries). A pass that converges a thousand objects sends
thousands of writes, and that overhead was most of its client CPU.
``http.client`` on a kept-alive connection costs about a third
(docs/performance.md, "The HTTP client").

Only reconciler.kube uses this module, and only when the kubeconfig's
credentials are static: a bearer token, a token file, a client certificate,
or a user name and password, with no proxy and no tls-server-name. Anything
else (exec plugins, auth providers, proxies) goes through pykube's requests
session, which knows them.
"""

from __future__ import annotations

import http.client
import select
import socket
import ssl
import threading
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Response:
    """What the client reads of an answer. ``body`` is decompressed."""

    status: int
    reason: str
    body: bytes
    retry_after: str | None = None

    @property
    def ok(self) -> bool:
        return self.status < 400


class TransportError(Exception):
    """The request did not get an answer (connection, TLS or timeout)."""


@dataclass(frozen=True)
class Tls:
    """How to verify the server and who we are to it."""

    ca_file: str | None  # None: the system's trust store
    verify: bool = True
    cert_file: str | None = None
    key_file: str | None = None

    def context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=self.ca_file if self.verify else None)
        if not self.verify:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if self.cert_file:
            ctx.load_cert_chain(self.cert_file, self.key_file)
        return ctx


# Errors after which a GET on a reused connection is sent once more on a new
# one: the server closed the kept-alive connection as we wrote to it.
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ssl.SSLEOFError)


class Direct:
    """Sends requests to one server on a kept-alive connection per thread."""

    def __init__(
        self,
        server: str,
        tls: Tls | None,
        timeout: float,
        compression: bool,
        auth: str | None = None,
    ) -> None:
        """``auth``: the Authorization header of static credentials."""
        url = urlsplit(server)
        self.https = url.scheme == "https"
        self.host = url.hostname or "localhost"
        self.port = url.port or (443 if self.https else 80)
        self.prefix = url.path.rstrip("/")
        self.timeout = timeout
        self.compression = compression
        self.auth = auth
        self.context = (tls or Tls(None)).context() if self.https else None
        self.local = threading.local()

    def _connection(self) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection | None = getattr(self.local, "conn", None)
        if conn is None:
            if self.https:
                conn = http.client.HTTPSConnection(
                    self.host, self.port, timeout=self.timeout, context=self.context
                )
            else:
                conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            self.local.conn = conn
        elif conn.sock is not None and _dropped(conn.sock):
            conn.close()  # reconnects on the next request
        return conn

    def send(
        self, method: str, target: str, body: bytes | None, headers: Mapping[str, str]
    ) -> Response:
        """One request; ``target`` is the path and query below the server URL.
        ``headers`` may carry their own Authorization (a rotated token file)."""
        hdrs = dict(headers)
        hdrs["Accept-Encoding"] = "gzip" if self.compression else "identity"
        if self.auth is not None:
            hdrs.setdefault("Authorization", self.auth)
        for attempt in (1, 2):
            conn = self._connection()
            reused = conn.sock is not None
            try:
                return self._exchange(conn, method, self.prefix + target, body, hdrs)
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                again = attempt == 1 and reused and method == "GET" and isinstance(exc, _STALE)
                if not again:
                    raise TransportError(str(exc) or type(exc).__name__) from None
        raise AssertionError("unreachable: the second attempt returns or raises")

    @staticmethod
    def _exchange(
        conn: http.client.HTTPConnection,
        method: str,
        target: str,
        body: bytes | None,
        headers: dict[str, str],
    ) -> Response:
        conn.request(method, target, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        if resp.getheader("Content-Encoding") == "gzip":
            data = zlib.decompress(data, wbits=31)
        return Response(resp.status, resp.reason, data, resp.getheader("Retry-After"))


def _dropped(sock: socket.socket) -> bool:
    """A kept-alive socket with something to read before we asked is closed
    (or broken): the server has nothing to say between requests."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)
