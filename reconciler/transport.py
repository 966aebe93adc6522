"""Kept-alive HTTP/1.1 connections to the apiserver, one per thread.

Why not requests: requests and urllib3 spend about 0.75 ms of CPU on each
request before a byte reaches the socket (session merging, hooks, cookie
jars, URL parsing, retries). A pass that converges a thousand objects sends
thousands of writes, and that overhead was most of its client CPU. Nor
http.client: it reads every answer's headers with the email package. A
request here, on a kept-alive socket, costs about a sixth of requests' and
three fifths of http.client's (docs/performance.md, "The HTTP client").

Only reconciler.kube uses this module, and only when the kubeconfig's
credentials are static: a bearer token, a token file, a client certificate,
or a user name and password, with no proxy and no tls-server-name. Anything
else (exec plugins, auth providers, proxies) goes through pykube's requests
session, which knows them.
"""

from __future__ import annotations

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


class _Stale(ConnectionError):
    """A reused connection closed before any answer: the server dropped it
    while idle. Only then may a GET be sent again."""


class ProtocolError(OSError):
    """The answer is not HTTP/1.1 as we read it."""


# Errors after which a GET on a reused connection is sent once more on a new
# one: the server closed the kept-alive connection as we wrote to it.
_STALE = (_Stale, ConnectionResetError, BrokenPipeError, ssl.SSLEOFError)
_MAX_LINE = 65536


@dataclass(frozen=True, slots=True)
class _Head:
    """An answer's status line and header fields (names in lower case)."""

    status: int
    reason: str
    fields: dict[str, str]


class _Connection:
    """One kept-alive HTTP/1.1 connection. Why not http.client: it parses
    every response's headers with the email package, a fifth of the client's
    CPU per request; an apiserver's answers need only a status line, a few
    headers, and a body of a known length or in chunks."""

    def __init__(self, sock: socket.socket, host: str) -> None:
        self.sock = sock
        self.reader = sock.makefile("rb")
        self.host = host
        self.open = True
        self.answered = 0  # exchanges completed: a reused connection may be stale

    def close(self) -> None:
        self.open = False
        self.reader.close()
        self.sock.close()

    def exchange(
        self, method: str, target: str, body: bytes | None, headers: Mapping[str, str]
    ) -> Response:
        head = [f"{method} {target} HTTP/1.1", f"Host: {self.host}"]
        head += [f"{name}: {value}" for name, value in headers.items()]
        if body is not None or method in ("POST", "PUT", "PATCH"):
            head.append(f"Content-Length: {len(body or b'')}")
        self.sock.sendall("\r\n".join(head).encode("latin-1") + b"\r\n\r\n" + (body or b""))
        while 100 <= (answer := self._head()).status < 200:
            pass  # skip informational answers
        status, fields = answer.status, answer.fields
        data = self._body(method, status, fields)
        self.answered += 1
        if fields.get("connection", "").lower() == "close":
            self.close()
        if fields.get("content-encoding") == "gzip":
            try:
                data = zlib.decompress(data, wbits=31)
            except zlib.error as exc:
                raise ProtocolError(f"a gzip body that does not inflate: {exc}") from None
        return Response(status, answer.reason, data, fields.get("retry-after"))

    def _line(self) -> bytes:
        line = self.reader.readline(_MAX_LINE + 1)
        if len(line) > _MAX_LINE:
            raise ProtocolError("header line too long")
        return line

    def _head(self) -> _Head:
        line = self._line()
        if not line:
            raise _Stale("the server closed the connection without an answer")
        version, _, rest = line.decode("latin-1").rstrip("\r\n").partition(" ")
        code, _, reason = rest.partition(" ")
        if not version.startswith("HTTP/1.") or not code.isdigit():
            raise ProtocolError(f"not an HTTP/1.1 status line: {line[:80]!r}")
        if version == "HTTP/1.0":
            self.open = False  # read to the end, then closed
        fields: dict[str, str] = {}
        while (line := self._line()) not in (b"\r\n", b"\n"):
            if not line:
                raise ProtocolError("the connection closed in the headers")
            name, _, value = line.decode("latin-1").partition(":")
            fields[name.strip().lower()] = value.strip()
        return _Head(int(code), reason, fields)

    def _body(self, method: str, status: int, fields: dict[str, str]) -> bytes:
        if method == "HEAD" or status in (204, 304):
            return b""
        if "chunked" in fields.get("transfer-encoding", "").lower():
            return self._chunks()
        if (length := fields.get("content-length")) is not None:
            size = _number(length, 10)
            data = self.reader.read(size)
            if len(data) != size:
                raise ProtocolError("the connection closed in the body")
            return data
        self.open = False  # no length: the body ends where the connection does
        return self.reader.read()

    def _chunks(self) -> bytes:
        parts = []
        while size := _number(self._line().split(b";", 1)[0].decode("latin-1"), 16):
            chunk = self.reader.read(size + 2)  # and its CRLF
            if len(chunk) != size + 2:
                raise ProtocolError("the connection closed in a chunk")
            parts.append(chunk[:-2])
        while self._line() not in (b"\r\n", b"\n", b""):  # trailers
            pass
        return b"".join(parts)


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
        self.host_header = url.netloc.rpartition("@")[2]
        self.prefix = url.path.rstrip("/")
        self.timeout = timeout
        self.compression = compression
        self.auth = auth
        self.context = (tls or Tls(None)).context() if self.https else None
        self.local = threading.local()

    def _connection(self) -> _Connection:
        """This thread's connection: kept alive, or new."""
        conn: _Connection | None = getattr(self.local, "conn", None)
        if conn is not None and conn.open and not _dropped(conn.sock):
            return conn
        if conn is not None:
            conn.close()
        sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.context is not None:
            sock = self.context.wrap_socket(sock, server_hostname=self.host)
        conn = self.local.conn = _Connection(sock, self.host_header)
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
            conn: _Connection | None = None
            reused = False
            try:
                conn = self._connection()
                reused = conn.answered > 0
                return conn.exchange(method, self.prefix + target, body, hdrs)
            except OSError as exc:  # ProtocolError and TLS errors too
                if conn is not None:
                    conn.close()
                again = attempt == 1 and reused and method == "GET" and isinstance(exc, _STALE)
                if not again:
                    raise TransportError(str(exc) or type(exc).__name__) from None
        raise AssertionError("unreachable: the second attempt returns or raises")


def _number(text: str, base: int) -> int:
    """A length or chunk size; anything else is not HTTP as we read it."""
    try:
        value = int(text.strip(), base)
    except ValueError:
        raise ProtocolError(f"not a length: {text[:20]!r}") from None
    if value < 0:
        raise ProtocolError(f"a negative length: {value}")
    return value


def _dropped(sock: socket.socket) -> bool:
    """A kept-alive socket with something to read before we asked is closed
    (or broken): the server has nothing to say between requests."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)
