"""One HTTP/1.1 exchange on a kept-alive socket, read within bounds and a deadline.

An answer is input from the network: a broken or hostile server, or a proxy
between us, chooses its sizes and its pace. So every size is bounded (a line,
the number of header fields, a chunk, a body held whole before and after
inflating) and the request has a deadline, not each read: anything past a
bound is a `ProtocolError`, a deadline passed a `TooSlow`, both OSErrors that
``transport.Direct`` turns into a TransportError of that request.

The deadline. ``timeout`` bounds the request from its start (connect, the
proxy's tunnel, TLS, sending) to the end of the answer's headers, and the
body too, with one allowance: every `PIECE` (64 KiB) of body that arrives
gives the rest ``timeout`` more. A single object or an error answer (well
under 64 KiB) must so come whole within ``timeout``, while a LIST of a
hundred thousand objects, streamed for minutes at a rate many times 64 KiB
per ``timeout``, is never cut off. A server or proxy that dribbles its answer
a byte at a time is, after ``timeout``. Why not a rate over the whole body:
time earned early (a fast start) would then pay for a dribble later, without
end; here what a stall may last is bounded by ``timeout`` at every point.
"""

from __future__ import annotations

import io
import math
import re
import socket
import ssl
import time
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

# Takes an answer's body, decompressed, piece by piece as it arrives.
Sink = Callable[[bytes], None]

PIECE = 65536  # bytes read (and inflated) at once; a body's progress, for its deadline
MAX_LINE = 65536  # a status, header, chunk-size or trailer line
MAX_FIELDS = 100  # header fields of an answer, and trailer fields of a chunked body
# A body held whole (an error, an object, a page of JSON), as sent and as
# inflated, and any one chunk of any body. A body given to a sink (a LIST read
# as it arrives) has no total bound: it is never held.
MAX_HELD = 64 * 1024 * 1024


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


class Stale(ConnectionError):
    """A reused connection closed before any answer: the server dropped it
    while idle. Only then may a GET be sent again."""


class ProtocolError(OSError):
    """The answer is not HTTP/1.1 as we read it, or is past a bound."""


class TooSlow(TimeoutError):
    """The request's deadline passed."""


class UnsafeRequest(ValueError):
    """A request whose line or a header holds what would end that line (a
    CR, an LF, another control character) or a byte past ASCII: refused
    before a byte is sent. The client checks names and credentials before
    they get here (request_head.request_target); this is the last look."""


# A request target: visible ASCII. A header's name: that, but no ":"; its
# value: visible ASCII, spaces and tabs.
_TARGET = re.compile(r"[!-~]+")
_NAME = re.compile(r"[!-9;-~]+")
_VALUE = re.compile(r"[\t -~]*")


def check_request(target: str, headers: Mapping[str, str]) -> None:
    """UnsafeRequest unless the request line and each header will be one
    line each (a value is never quoted in the error: it may be a credential)."""
    if _TARGET.fullmatch(target) is None:
        raise UnsafeRequest(f"a request target that is not visible ASCII: {target[:80]!r}")
    for name, value in headers.items():
        if _NAME.fullmatch(name) is None or _VALUE.fullmatch(value) is None:
            raise UnsafeRequest(f"the header {name[:40]!r} is not one line of ASCII")


@dataclass(frozen=True, slots=True)
class _Head:
    """An answer's status line and header fields (names in lower case)."""

    status: int
    reason: str
    fields: dict[str, str]


class Deadline(socket.SocketIO):
    """The socket's reads, each allowed only what is left of the request's
    time (see the module's docstring). Checked once per read of the socket,
    never per byte: the buffered reader above it reads in large pieces. The
    socket's timeout is set again only when it is ``slack`` off what is
    left (a syscall each time); a read it ends early is tried again."""

    def __init__(self, sock: socket.socket, timeout: float) -> None:
        super().__init__(sock, "rb")
        self.sock, self.timeout = sock, timeout
        self.slack = min(0.05, timeout / 10)
        self.armed = math.inf  # the socket's timeout, as last set
        self.until = math.inf
        self.flowing = False  # in a body: each PIECE moves ``until`` on
        self.since = 0  # body bytes since ``until`` last moved

    def start(self, until: float) -> None:
        """A new request, due by ``until``: the socket's timeout set for it."""
        self.until, self.flowing, self.since = until, False, 0
        self.arm(until - time.monotonic())

    def arm(self, left: float) -> None:
        """The socket's timeout within ``slack`` of ``left``; TooSlow if nothing is left."""
        if left <= 0:
            raise TooSlow("the request's deadline passed")
        if abs(self.armed - left) > self.slack:
            self.sock.settimeout(left)
            self.armed = left

    def readinto(self, buffer: WriteableBuffer) -> int:
        self.arm(self.until - time.monotonic())
        try:
            got = self.sock.recv_into(buffer)
        except TimeoutError:  # the deadline moved on since the timeout was set
            return self.readinto(buffer)  # arm() decides: at most one timeout more
        if got and self.flowing:
            self.since += got
            if self.since >= PIECE:
                self.since, self.until = 0, time.monotonic() + self.timeout
        return got


class Connection:
    """One kept-alive HTTP/1.1 connection. Why not http.client: it parses
    every response's headers with the email package, a fifth of the client's
    CPU per request; an apiserver's answers need only a status line, a few
    headers, and a body of a known length or in chunks."""

    def __init__(self, sock: socket.socket, host: str, timeout: float) -> None:
        self.sock = sock
        self.deadline = Deadline(sock, timeout)
        self.reader = io.BufferedReader(self.deadline)
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
        until: float,
        sink: Sink | None = None,
    ) -> Response:
        """One request and its answer, by ``until`` (time.monotonic; a body
        earns more as it arrives). A successful answer's body goes to
        ``sink`` (when given) as it arrives, and is never held whole.
        ``target`` and ``headers`` have passed `check_request`."""
        head = [f"{method} {target} HTTP/1.1", f"Host: {self.host}"]
        head += [f"{name}: {value}" for name, value in headers.items()]
        if body is not None or method in ("POST", "PUT", "PATCH"):
            head.append(f"Content-Length: {len(body or b'')}")
        self.deadline.start(until)  # sendall's timeout is for all of it
        self.sock.sendall("\r\n".join(head).encode("latin-1") + b"\r\n\r\n" + (body or b""))
        while 100 <= (answer := self._head()).status < 200:
            pass  # skip informational answers
        status, fields = answer.status, answer.fields
        gzipped = fields.get("content-encoding") == "gzip"
        self.deadline.flowing = True
        if sink is not None and 200 <= status < 300:
            wire = _Tally(math.inf)
            _inflate_into(wire.count(self._pieces(method, status, fields, False)), sink, gzipped)
            data = b""
        else:
            wire = _Tally(MAX_HELD)
            data = b"".join(wire.count(self._pieces(method, status, fields, True)))
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
        line = self.reader.readline(MAX_LINE + 1)
        if len(line) > MAX_LINE:
            raise ProtocolError("header line too long")
        return line

    def _head(self) -> _Head:
        line = self._line()
        if not line:
            raise Stale("the server closed the connection without an answer")
        version, _, rest = line.decode("latin-1").rstrip("\r\n").partition(" ")
        code, _, reason = rest.partition(" ")
        if not version.startswith("HTTP/1.") or not code.isdigit() or len(code) != 3:
            raise ProtocolError(f"not an HTTP/1.1 status line: {line[:80]!r}")
        if version == "HTTP/1.0":
            self.open = False  # read to the end, then closed
        fields: dict[str, str] = {}
        for _ in range(MAX_FIELDS + 1):
            if (line := self._line()) in (b"\r\n", b"\n"):
                return _Head(int(code), reason, fields)
            if not line:
                raise ProtocolError("the connection closed in the headers")
            name, _, value = line.decode("latin-1").partition(":")
            key, value = name.strip().lower(), value.strip()
            if key == "warning" and key in fields:  # one field per warning
                value = f"{fields[key]}, {value}"
            fields[key] = value
        raise ProtocolError(f"more than {MAX_FIELDS} header fields")

    def _pieces(
        self, method: str, status: int, fields: dict[str, str], held: bool
    ) -> Iterator[bytes]:
        """The body as it arrives, at most PIECE bytes at a time. ``held``:
        it is to be held whole, so a length past MAX_HELD is refused unread."""
        if method == "HEAD" or status in (204, 304):
            return
        if "chunked" in fields.get("transfer-encoding", "").lower():
            yield from self._chunks()
        elif (length := fields.get("content-length")) is not None:
            size = _number(length, 10)
            if held and size > MAX_HELD:
                raise ProtocolError(f"a body of {size} bytes, past the {MAX_HELD} we hold")
            yield from self._exactly(size, "the body")
        else:
            self.open = False  # no length: the body ends where the connection does
            while piece := self.reader.read(PIECE):
                yield piece

    def _exactly(self, size: int, where: str) -> Iterator[bytes]:
        while size > 0:
            piece = self.reader.read(min(size, PIECE))
            if not piece:
                raise ProtocolError(f"the connection closed in {where}")
            size -= len(piece)
            yield piece

    def _chunks(self) -> Iterator[bytes]:
        while size := _number(self._line().split(b";", 1)[0].decode("latin-1"), 16):
            if size > MAX_HELD:
                raise ProtocolError(f"a chunk of {size} bytes, past the {MAX_HELD} we allow")
            yield from self._exactly(size, "a chunk")
            if len(self.reader.read(2)) != 2:  # its CRLF
                raise ProtocolError("the connection closed in a chunk")
        for _ in range(MAX_FIELDS + 1):  # trailers
            if self._line() in (b"\r\n", b"\n", b""):
                return
        raise ProtocolError(f"more than {MAX_FIELDS} trailer fields")


def _number(text: str, base: int) -> int:
    """A length or chunk size; anything else is not HTTP as we read it."""
    text = text.strip()
    if len(text) > 18:  # past any size we would read: not worth int()'s time
        raise ProtocolError(f"a length of {len(text)} digits: {text[:20]!r}")
    try:
        value = int(text, base)
    except ValueError:
        raise ProtocolError(f"not a length: {text[:20]!r}") from None
    if value < 0:
        raise ProtocolError(f"a negative length: {value}")
    return value


def _inflate(data: bytes) -> bytes:
    """A gzipped body held whole, inflated to at most MAX_HELD bytes: a few
    kB can inflate to gigabytes."""
    inflater = zlib.decompressobj(wbits=31)
    try:
        out = inflater.decompress(data, MAX_HELD + 1)
    except zlib.error as exc:
        raise ProtocolError(f"a gzip body that does not inflate: {exc}") from None
    if len(out) > MAX_HELD:
        raise ProtocolError(f"a gzip body that inflates past the {MAX_HELD} bytes we hold")
    if not inflater.eof:
        raise ProtocolError("a gzip body that ends early")
    return out


def _inflate_into(pieces: Iterator[bytes], sink: Sink, gzipped: bool) -> None:
    """Each piece to ``sink``, inflated first if the body is gzipped, at
    most PIECE bytes at a time whatever a piece inflates to."""
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
    """How many bytes of a body went by, before any inflating, up to ``most``."""

    def __init__(self, most: float) -> None:
        self.size, self.most = 0, most

    def count(self, pieces: Iterator[bytes]) -> Iterator[bytes]:
        for piece in pieces:
            self.size += len(piece)
            if self.size > self.most:
                raise ProtocolError(f"a body past the {MAX_HELD} bytes we hold")
            yield piece
