"""Kept-alive HTTP/1.1 connections to the apiserver, one per thread.

Why not requests: requests and urllib3 spend about 0.75 ms of CPU on each
request before a byte reaches the socket (session merging, hooks, cookie
jars, URL parsing, retries). A pass that converges a thousand objects sends
thousands of writes, and that overhead was most of its client CPU. Nor
http.client: it reads every answer's headers with the email package. A
request here, on a kept-alive socket, costs about a sixth of requests' and
three fifths of http.client's (docs/performance/transport.md).

reconciler.client.connection picks it for every kubeconfig but one naming
an auth provider or an https proxy, which go through pykube's requests
session. Credentials come from reconciler.client.credentials: the
TLS context is asked for at each new connection, so a renewed client
certificate is used without a restart. An http proxy is asked to CONNECT,
and ``tls-server-name`` names the server inside the tunnel as outside it.
"""

from __future__ import annotations

import base64
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit, urlunsplit

from reconciler.client.http_read import (
    MAX_HELD,
    MAX_LINE,
    PIECE,
    Connection,
    ProtocolError,
    Response,
    Sink,
    Stale,
    check_request,
)

__all__ = ["MAX_HELD", "PIECE", "Counted", "Direct", "Response", "Sink", "Tls", "TransportError"]


class TransportError(Exception):
    """The request did not get an answer (connection, TLS or timeout), or
    not one we read (not HTTP, or past a bound: see http_read)."""


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
_STALE = (Stale, ConnectionResetError, BrokenPipeError, ssl.SSLEOFError)


class Counted:
    """A sink, and how many bytes it has been given: a GET whose answer has
    begun to reach it cannot be sent again."""

    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.size = 0

    def __call__(self, piece: bytes) -> None:
        self.size += len(piece)
        self.sink(piece)


class Direct:
    """Sends requests to one server on a kept-alive connection per thread.
    ``timeout`` is each request's deadline, not each read's (http_read)."""

    def __init__(
        self,
        server: str,
        tls: Tls | None,
        timeout: float,
        compression: bool,
        auth: str | None = None,
        *,
        contexts: Callable[[], ssl.SSLContext] | None = None,
        proxy: str | None = None,
        server_name: str | None = None,
    ) -> None:
        """``auth``: the Authorization header of static credentials.
        ``contexts``: the TLS context for each new connection (else ``tls``'s,
        built once). ``proxy``: an http proxy's URL, asked to CONNECT, with
        its user and password if it has them. ``server_name``: the name the
        server's certificate is checked for (the kubeconfig's
        tls-server-name), when not the URL's host."""
        url = urlsplit(server)
        self.https = url.scheme == "https"
        self.host = url.hostname or "localhost"
        self.port = url.port or (443 if self.https else 80)
        self.host_header = url.netloc.rpartition("@")[2]
        self.prefix = url.path.rstrip("/")
        self.timeout = timeout
        self.compression = compression
        self.auth = auth
        self.server_name = server_name or self.host
        self.proxy = _Proxy.of(proxy) if proxy else None
        if contexts is None and self.https:
            fixed = (tls or Tls(None)).context()
            contexts = lambda: fixed  # noqa: E731
        self.contexts = contexts if self.https else None
        self.local = threading.local()

    def _connection(self, until: float) -> Connection:
        """This thread's connection: kept alive, or new by ``until`` (a new
        TLS context, a renewed certificate, is taken at the next new one)."""
        conn: Connection | None = getattr(self.local, "conn", None)
        context = self.contexts() if self.contexts is not None else None
        if conn is not None and conn.open and conn.context is context and not _dropped(conn.sock):
            return conn
        if conn is not None:
            conn.close()
        sock = self._dial(until)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if context is not None:
                sock.settimeout(_left(until))  # the handshake's, all of it
                sock = context.wrap_socket(sock, server_hostname=self.server_name)
        except BaseException:
            sock.close()
            raise
        conn = self.local.conn = Connection(sock, self.host_header, self.timeout)
        conn.context = context
        return conn

    def _dial(self, until: float) -> socket.socket:
        """A socket to the server: directly, or a tunnel through the proxy."""
        if self.proxy is None:
            return socket.create_connection((self.host, self.port), timeout=_left(until))
        sock = socket.create_connection(self.proxy.address, timeout=_left(until))
        try:
            self.proxy.tunnel(sock, f"{_bracketed(self.host)}:{self.port}", until)
        except BaseException:
            sock.close()
            raise
        return sock

    def send(
        self,
        method: str,
        target: str,
        body: bytes | None,
        headers: Mapping[str, str],
        sink: Sink | None = None,
    ) -> Response:
        """One request; ``target`` is the path and query below the server URL.
        ``headers`` may carry their own Authorization (a rotated token file).
        A successful answer's body goes to ``sink``, when given, as it arrives.
        ``timeout`` after it starts, it is a TransportError (http_read says
        how a long body earns more). A target or header that would not be
        one line is UnsafeRequest, and nothing is sent."""
        hdrs = dict(headers)
        hdrs["Accept-Encoding"] = "gzip" if self.compression else "identity"
        if self.auth is not None:
            hdrs.setdefault("Authorization", self.auth)
        check_request(self.prefix + target, hdrs)  # before a connection is made
        counted = None if sink is None else Counted(sink)
        until = time.monotonic() + self.timeout  # a GET sent again has no more time
        for attempt in (1, 2):
            conn: Connection | None = None
            reused = False
            try:
                conn = self._connection(until)
                reused = conn.answered > 0
                return conn.exchange(method, self.prefix + target, body, hdrs, until, counted)
            except OSError as exc:  # ProtocolError, TooSlow and TLS errors too
                if conn is not None:
                    conn.close()
                again = attempt == 1 and reused and method == "GET" and isinstance(exc, _STALE)
                if not again or (counted is not None and counted.size):
                    raise TransportError(self._said(exc)) from None
            except BaseException:  # anything else (the sink, an interrupt): the rest is unread
                if conn is not None:
                    conn.close()
                raise
        raise AssertionError("unreachable: the second attempt returns or raises")

    def _said(self, exc: OSError) -> str:
        if isinstance(exc, TimeoutError):  # TooSlow, or a socket's timeout set to what was left
            return f"timed out: no whole answer within the {self.timeout:g}s timeout"
        return str(exc) or type(exc).__name__


def _left(until: float) -> float:
    """Seconds left before ``until``; none is a timeout."""
    left = until - time.monotonic()
    if left <= 0:
        raise TimeoutError("timed out")
    return left


@dataclass(frozen=True)
class _Proxy:
    """An http proxy: where, as it may be printed, and our credentials."""

    address: tuple[str, int]
    shown: str  # its URL without the password
    authorization: str | None  # Proxy-Authorization, as Go's net/http sends it

    @classmethod
    def of(cls, url: str) -> _Proxy:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        shown = redacted(urlunsplit(parts))
        if parts.scheme != "http":
            raise ValueError(f"proxy {shown}: only http proxies are spoken directly")
        authorization = None
        if parts.username is not None:  # Go: user without password is "user:"
            pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            authorization = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
        return cls((parts.hostname or "localhost", parts.port or 80), shown, authorization)

    def tunnel(self, sock: socket.socket, target: str, until: float) -> None:
        """Ask for a tunnel to ``target``; refused is a ProtocolError."""
        head = f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n"
        if self.authorization is not None:
            head += f"Proxy-Authorization: {self.authorization}\r\n"
        sock.settimeout(_left(until))
        sock.sendall(f"{head}\r\n".encode("latin-1"))
        status = _tunnel_status(sock, until)
        if status == 407 and self.authorization is None:
            raise ProtocolError(f"the proxy {self.shown} asks for credentials (407)")
        if status == 407:
            raise ProtocolError(f"the proxy {self.shown} refused our credentials (407)")
        if status != 200:
            raise ProtocolError(f"the proxy {self.shown} refused CONNECT {target}: {status}")


def redacted(url: str) -> str:
    """A URL as it may be printed: its password, if any, as ***."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user, _, host = parts.netloc.rpartition("@")
    return urlunsplit(parts._replace(netloc=f"{user.partition(':')[0]}:***@{host}"))


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _tunnel_status(sock: socket.socket, until: float) -> int:
    """The proxy's answer to CONNECT, read byte by byte up to its blank line:
    what follows it belongs to the TLS handshake."""
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        sock.settimeout(_left(until))
        byte = sock.recv(1)
        if not byte:
            raise ProtocolError("the proxy closed the connection in its answer to CONNECT")
        head += byte
        if len(head) > MAX_LINE:
            raise ProtocolError("the proxy's answer to CONNECT is too long")
    line = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
    if len(line) < 2 or not line[1].isdigit():
        raise ProtocolError(f"not an HTTP answer to CONNECT: {head[:80]!r}")
    return int(line[1])


def _dropped(sock: socket.socket) -> bool:
    """A kept-alive socket with something to read before we asked is closed
    (or broken): the server has nothing to say between requests."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)
