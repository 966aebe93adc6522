"""Kept-alive HTTP/1.1 connections to the apiserver, one per thread.

Why not requests: requests and urllib3 spend about 0.75 ms of CPU on each
request before a byte reaches the socket (session merging, hooks, cookie
jars, URL parsing, retries). A pass that converges a thousand objects sends
thousands of writes, and that overhead was most of its client CPU. Nor
http.client: it reads every answer's headers with the email package. A
request here, on a kept-alive socket, costs about a sixth of requests' and
three fifths of http.client's (docs/performance/transport.md).

Only reconciler.client.kube uses this module, for every kubeconfig but one
naming an auth provider or an https proxy, which go through pykube's
requests session. Credentials come from reconciler.client.credentials: the
TLS context is asked for at each new connection, so a renewed client
certificate is used without a restart. An http proxy is asked to CONNECT,
and ``tls-server-name`` names the server inside the tunnel as outside it.
"""

from __future__ import annotations

import select
import socket
import ssl
import threading
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

# Takes an answer's body, decompressed, piece by piece as it arrives.
Sink = Callable[[bytes], None]


@dataclass(frozen=True)
class Response:
    """What the client reads of an answer. ``body`` is decompressed; it is
    empty when the body went to a sink. ``received`` is the body's size as it
    came over the wire (gzipped, when it was): what the pass summary counts
    as bytes received."""

    status: int
    reason: str
    body: bytes
    retry_after: str | None = None
    received: int = 0
    warning: str = ""  # the Warning header fields, joined by ", "

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
PIECE = 65536  # bytes read (and inflated) at once from a body given to a sink


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
        self.context: ssl.SSLContext | None = None  # the TLS context it was made with

    def close(self) -> None:
        self.open = False
        self.reader.close()
        self.sock.close()

    def exchange(
        self,
        method: str,
        target: str,
        body: bytes | None,
        headers: Mapping[str, str],
        sink: Sink | None = None,
    ) -> Response:
        """One request and its answer. A successful answer's body goes to
        ``sink`` (when given) as it arrives, and is never held whole."""
        head = [f"{method} {target} HTTP/1.1", f"Host: {self.host}"]
        head += [f"{name}: {value}" for name, value in headers.items()]
        if body is not None or method in ("POST", "PUT", "PATCH"):
            head.append(f"Content-Length: {len(body or b'')}")
        self.sock.sendall("\r\n".join(head).encode("latin-1") + b"\r\n\r\n" + (body or b""))
        while 100 <= (answer := self._head()).status < 200:
            pass  # skip informational answers
        status, fields = answer.status, answer.fields
        gzipped = fields.get("content-encoding") == "gzip"
        data = b""
        wire = _Tally()
        if sink is not None and 200 <= status < 300:
            _inflate_into(wire.count(self._pieces(method, status, fields, PIECE)), sink, gzipped)
        else:
            data = b"".join(wire.count(self._pieces(method, status, fields, None)))
            if gzipped:
                data = _inflate(data)
        self.answered += 1
        if fields.get("connection", "").lower() == "close":
            self.close()
        return Response(
            status,
            answer.reason,
            data,
            fields.get("retry-after"),
            received=wire.size,
            warning=fields.get("warning", ""),
        )

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
            key, value = name.strip().lower(), value.strip()
            if key == "warning" and key in fields:  # one field per warning
                value = f"{fields[key]}, {value}"
            fields[key] = value
        return _Head(int(code), reason, fields)

    def _pieces(
        self, method: str, status: int, fields: dict[str, str], most: int | None
    ) -> Iterator[bytes]:
        """The body as it arrives, at most ``most`` bytes at a time (None:
        as large as the answer gives them)."""
        if method == "HEAD" or status in (204, 304):
            return
        if "chunked" in fields.get("transfer-encoding", "").lower():
            yield from self._chunks(most)
        elif (length := fields.get("content-length")) is not None:
            yield from self._exactly(_number(length, 10), most, "the body")
        else:
            self.open = False  # no length: the body ends where the connection does
            while piece := self.reader.read(most or -1):
                yield piece

    def _exactly(self, size: int, most: int | None, where: str) -> Iterator[bytes]:
        while size > 0:
            piece = self.reader.read(min(size, most or size))
            if not piece:
                raise ProtocolError(f"the connection closed in {where}")
            size -= len(piece)
            yield piece

    def _chunks(self, most: int | None) -> Iterator[bytes]:
        while size := _number(self._line().split(b";", 1)[0].decode("latin-1"), 16):
            yield from self._exactly(size, most, "a chunk")
            if len(self.reader.read(2)) != 2:  # its CRLF
                raise ProtocolError("the connection closed in a chunk")
        while self._line() not in (b"\r\n", b"\n", b""):  # trailers
            pass


def _inflate(data: bytes) -> bytes:
    try:
        return zlib.decompress(data, wbits=31)
    except zlib.error as exc:
        raise ProtocolError(f"a gzip body that does not inflate: {exc}") from None


def _inflate_into(pieces: Iterator[bytes], sink: Sink, gzipped: bool) -> None:
    """Each piece to ``sink``, inflated first if the body is gzipped."""
    if not gzipped:
        for piece in pieces:
            sink(piece)
        return
    inflater = zlib.decompressobj(wbits=31)
    try:
        for piece in pieces:
            while piece:  # a few kB of gzip can inflate to megabytes: PIECE at a time
                if out := inflater.decompress(piece, PIECE):
                    sink(out)
                piece = inflater.unconsumed_tail
        if out := inflater.flush():
            sink(out)
    except zlib.error as exc:
        raise ProtocolError(f"a gzip body that does not inflate: {exc}") from None
    if not inflater.eof:
        raise ProtocolError("a gzip body that ends early")


class _Tally:
    """How many bytes of a body went by, before any inflating."""

    def __init__(self) -> None:
        self.size = 0

    def count(self, pieces: Iterator[bytes]) -> Iterator[bytes]:
        for piece in pieces:
            self.size += len(piece)
            yield piece


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
    """Sends requests to one server on a kept-alive connection per thread."""

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
        built once). ``proxy``: an http proxy's URL, asked to CONNECT.
        ``server_name``: the name the server's certificate is checked for
        (the kubeconfig's tls-server-name), when not the URL's host."""
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
        self.proxy = _proxy_address(proxy) if proxy else None
        if contexts is None and self.https:
            fixed = (tls or Tls(None)).context()
            contexts = lambda: fixed  # noqa: E731
        self.contexts = contexts if self.https else None
        self.local = threading.local()

    def _connection(self) -> _Connection:
        """This thread's connection: kept alive, or new (a new TLS context,
        a renewed certificate, is taken at the next new connection)."""
        conn: _Connection | None = getattr(self.local, "conn", None)
        context = self.contexts() if self.contexts is not None else None
        if conn is not None and conn.open and conn.context is context and not _dropped(conn.sock):
            return conn
        if conn is not None:
            conn.close()
        sock = self._dial()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if context is not None:
            sock = context.wrap_socket(sock, server_hostname=self.server_name)
        conn = self.local.conn = _Connection(sock, self.host_header)
        conn.context = context
        return conn

    def _dial(self) -> socket.socket:
        """A socket to the server: directly, or a tunnel through the proxy."""
        if self.proxy is None:
            return socket.create_connection((self.host, self.port), timeout=self.timeout)
        sock = socket.create_connection(self.proxy, timeout=self.timeout)
        target = f"{_bracketed(self.host)}:{self.port}"
        try:
            sock.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode("latin-1"))
            status = _tunnel_status(sock)
        except BaseException:
            sock.close()
            raise
        if status != 200:
            sock.close()
            raise ProtocolError(f"the proxy refused CONNECT {target}: {status}")
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
        A successful answer's body goes to ``sink``, when given, as it arrives."""
        hdrs = dict(headers)
        hdrs["Accept-Encoding"] = "gzip" if self.compression else "identity"
        if self.auth is not None:
            hdrs.setdefault("Authorization", self.auth)
        counted = None if sink is None else Counted(sink)
        for attempt in (1, 2):
            conn: _Connection | None = None
            reused = False
            try:
                conn = self._connection()
                reused = conn.answered > 0
                return conn.exchange(method, self.prefix + target, body, hdrs, counted)
            except OSError as exc:  # ProtocolError and TLS errors too
                if conn is not None:
                    conn.close()
                again = attempt == 1 and reused and method == "GET" and isinstance(exc, _STALE)
                if not again or (counted is not None and counted.size):
                    raise TransportError(str(exc) or type(exc).__name__) from None
            except BaseException:  # anything else (the sink, an interrupt): the rest is unread
                if conn is not None:
                    conn.close()
                raise
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


def _proxy_address(url: str) -> tuple[str, int]:
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if parts.scheme != "http":
        raise ValueError(f"proxy {url}: only http proxies are spoken directly")
    return parts.hostname or "localhost", parts.port or 80


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _tunnel_status(sock: socket.socket) -> int:
    """The proxy's answer to CONNECT, read byte by byte up to its blank line:
    what follows it belongs to the TLS handshake."""
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        byte = sock.recv(1)
        if not byte:
            raise ProtocolError("the proxy closed the connection in its answer to CONNECT")
        head += byte
        if len(head) > _MAX_LINE:
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
