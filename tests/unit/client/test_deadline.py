"""A request has a deadline (issue 64, point 4): ``timeout`` bounds connect,
the proxy's tunnel, the headers and the body, not each read; a long body
earns more time as it arrives (reconciler.client.http_read)."""

from __future__ import annotations

import contextlib
import json
import socketserver
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli import commands as cli_mod
from reconciler.client import errors, kube
from reconciler.client.transport import Direct, TransportError
from reconciler.config import Config
from tests.unit.client.test_transport import _kubeconfig
from tests.unit.loopback import serving

TIMEOUT = 0.5
GIVE_UP = 4.0  # no dribble lasts longer, whatever the client does


class _Dribble(socketserver.BaseRequestHandler):
    """Reads one request, then writes ``server.fast`` at once and
    ``server.slow`` ``server.size`` bytes every ``server.every`` seconds."""

    def handle(self) -> None:
        server: Dribbling = self.server  # type: ignore[assignment]
        head = b""
        while b"\r\n\r\n" not in head and len(head) < 65536:
            piece = self.request.recv(4096)
            if not piece:
                return
            head += piece
        server.requests.append(head.split(b"\r\n", 1)[0].decode())
        ends = time.monotonic() + GIVE_UP
        try:
            self.request.sendall(server.fast)
            for at in range(0, len(server.slow), server.size):
                if server.stop.wait(server.every) or time.monotonic() > ends:
                    return
                self.request.sendall(server.slow[at : at + server.size])
        except OSError:
            return  # the client gave up: what this test wants


class Dribbling(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, fast: bytes, slow: bytes, every: float, size: int) -> None:
        super().__init__(("127.0.0.1", 0), _Dribble)
        self.fast, self.slow, self.every, self.size = fast, slow, every, size
        self.requests: list[str] = []
        self.stop = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@contextlib.contextmanager
def dribbling(fast: bytes, slow: bytes, every: float = 0.1, size: int = 1) -> Iterator[Dribbling]:
    """A server that answers every request so, for the length of a ``with``."""
    server = Dribbling(fast, slow, every, size)
    served = serving(server)
    try:
        yield next(served)
    finally:
        server.stop.set()
        next(served, None)  # serving's teardown: shutdown, close


BODY = json.dumps({"kind": "Status", "code": 503, "message": "x" * 200}).encode()
HEAD = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: %d\r\n\r\n" % len(BODY)


@pytest.fixture
def slow_headers() -> Iterator[Dribbling]:
    """The status line and headers, a byte every 0.1 s: each read is quick."""
    with dribbling(b"", HEAD + BODY) as server:
        yield server


@pytest.fixture
def slow_body() -> Iterator[Dribbling]:
    with dribbling(HEAD, BODY) as server:
        yield server


def _timed(call: object) -> tuple[BaseException, float]:
    started = time.monotonic()
    with pytest.raises(Exception) as caught:
        call()  # type: ignore[operator]
    return caught.value, time.monotonic() - started


@pytest.mark.parametrize("where", ["slow_headers", "slow_body"])
def test_an_answer_dribbled_a_byte_at_a_time_ends_at_the_timeout(
    where: str, request: pytest.FixtureRequest
) -> None:
    """Each read gets a byte within 0.1 s, well within the timeout; the
    request as a whole does not end before the dribble would (25 s)."""
    server: Dribbling = request.getfixturevalue(where)
    direct = Direct(server.url, None, timeout=TIMEOUT, compression=False)
    exc, took = _timed(lambda: direct.send("GET", "/api/v1/pods/p", None, {}))
    assert isinstance(exc, TransportError), exc
    assert str(exc) == "timed out: no whole answer within the 0.5s timeout"
    assert TIMEOUT <= took < TIMEOUT + 1.0


@pytest.fixture
def slow_proxy() -> Iterator[Dribbling]:
    with dribbling(b"", b"HTTP/1.1 200 Connection established\r\n\r\n") as server:
        yield server


def test_a_connect_proxy_that_dribbles_its_answer_ends_at_the_timeout(
    slow_proxy: Dribbling,
) -> None:
    """The tunnel's answer is part of the request's time."""
    direct = Direct("https://apiserver.test:6443", None, TIMEOUT, False, proxy=slow_proxy.url)
    exc, took = _timed(lambda: direct.send("GET", "/version", None, {}))
    assert isinstance(exc, TransportError) and str(exc).startswith("timed out:"), exc
    assert took < TIMEOUT + 1.0
    assert slow_proxy.requests == ["CONNECT apiserver.test:6443 HTTP/1.1"]


def test_a_long_body_that_keeps_coming_earns_time_as_it_arrives() -> None:
    """A LIST streamed for longer than the timeout is not cut off while
    every 64 KiB comes within it: 16 pieces of 64 KiB, one every 0.1 s,
    take three times the timeout."""
    body = bytes(16 * 65536)
    head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body)
    pieces: list[bytes] = []
    with dribbling(head, body, every=0.1, size=65536) as server:
        direct = Direct(server.url, None, timeout=TIMEOUT, compression=False)
        started = time.monotonic()
        got = direct.send("GET", "/api/v1/pods", None, {}, pieces.append)
        assert got.status == 200 and b"".join(pieces) == body
        assert time.monotonic() - started > 3 * TIMEOUT


def test_a_timed_out_request_is_not_retried(slow_body: Dribbling, tmp_path: Path) -> None:
    """Kube.send retries a 503 up to max_retries times; a request that timed
    out is the cluster misbehaving (Unreachable), tried once."""
    path = _kubeconfig(tmp_path, slow_body.url, {"token": "t"})
    client = kube.Kube(Config(kubeconfig=path, timeout=TIMEOUT, max_retries=3))
    exc, took = _timed(lambda: client.send("GET", "/api/v1/pods"))
    assert isinstance(exc, errors.Unreachable), exc
    assert str(exc) == f"{slow_body.url}: timed out: no whole answer within the 0.5s timeout"
    assert took < TIMEOUT + 1.0
    assert slow_body.requests == ["GET /api/v1/pods HTTP/1.1"]


def test_sync_against_a_dribbling_apiserver_exits_3_within_a_few_timeouts(
    slow_headers: Dribbling, tmp_path: Path
) -> None:
    """As a user runs it, under cron with flock: the run ends, says the
    cluster cannot be reached and why, and the next run is not skipped. The
    pass asks its five LISTs one after the other, each ended at the timeout
    (today's engine goes on after the first fails to reach the cluster)."""
    path = _kubeconfig(tmp_path, slow_headers.url, {"token": "t"})
    env = {"KUBECONFIG": path, "RECONCILER_TIMEOUT": str(TIMEOUT), "HOME": str(tmp_path)}
    started = time.monotonic()
    result = CliRunner().invoke(cli_mod.cli, ["sync"], env=env, catch_exceptions=False)
    took = time.monotonic() - started
    assert result.exit_code == 3, result.output
    assert result.stderr.strip().splitlines()[-1] == (
        f"reconciler: error: cannot reach the cluster: {slow_headers.url}:"
        " timed out: no whole answer within the 0.5s timeout"
    )
    asked = len(slow_headers.requests)  # each request ends at the timeout
    assert asked <= 6 and took < asked * TIMEOUT + 1.5, (took, slow_headers.requests)
