"""Requests are built, never concatenated (issue 77, item 1): a name from an
object (an owner reference's, which the apiserver never checks) goes into a
request line only if it is a name; anything else is refused before a byte is
sent, as a typed error per object. So are a credential and a header value
that would end their line, and a Retry-After that is no number of seconds."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from reconciler.client import api_error, errors, kube, request_head
from reconciler.client.http_read import Response
from reconciler.client.transport import Direct
from reconciler.config import Config
from reconciler.model import PODS, ResourceType
from tests.unit.fake_apiserver import FakeApiserver, fake_apiserver
from tests.unit.loopback import serving

REDIS = ResourceType("myapp.demo.kubebuilder.io", "v1", "Redis", "redis")

# The owner reference's name of the security review: one request line of
# ours, then a DELETE of the sender's choosing in another namespace.
SMUGGLER = (
    "x HTTP/1.1\r\nHost: x\r\n\r\n"
    "DELETE /apis/networking.k8s.io/v1/namespaces/other/networkpolicies/deny-all"
)


@pytest.fixture
def api() -> Iterator[FakeApiserver]:
    yield from fake_apiserver()


def _client(api: FakeApiserver, tmp_path: Path) -> kube.Kube:
    return kube.Kube(Config(kubeconfig=str(api.kubeconfig(tmp_path)), max_retries=0))


def _raised(call: Callable[[], object]) -> Exception | None:
    try:
        call()
    except errors.KubeError as exc:
        return exc
    return None


def test_a_name_that_would_smuggle_a_second_request_is_refused_unsent(
    api: FakeApiserver, tmp_path: Path
) -> None:
    """On a real socket: the server sees no request at all for it, the
    error names the object, and it is an ApiError (orphans.py and the
    executor take those per object); the connection serves on. The GET
    after it goes on the same connection, after anything smuggled."""
    client = _client(api, tmp_path)
    raised = _raised(lambda: client.get(REDIS, "ns", SMUGGLER))
    after = _raised(lambda: client.get(PODS, "ns", "redis-0"))
    time.sleep(0.2)  # anything smuggled has been read by now
    assert not [r for r in api.requests if r[0] == "DELETE"], api.requests
    assert api.requests == [("GET", "/api/v1/namespaces/ns/pods/redis-0")]
    assert isinstance(raised, errors.BadRequestTarget)
    assert isinstance(raised, errors.ApiError) and raised.lasting
    assert str(raised).startswith("400 BadRequestTarget: Redis 'ns'/'x HTTP/1.1\\r\\nHost: x")
    assert isinstance(after, errors.NotFound)


@pytest.mark.parametrize(
    "name",
    [
        ".",
        "..",
        "",
        "a/b",
        "../../namespaces/other/pods/p",
        "a b",
        "a?watch=1",
        "a#b",
        "a%2F..",
        "é",
        "a\x00",
        "a\n",
        "-a",
        "a-",
        "a" * 254,
    ],
)
def test_what_is_not_a_name_is_refused_as_a_name_namespace_or_subresource(name: str) -> None:
    """An empty name is refused too (it was left out: a GET of the whole
    collection); an empty namespace is none, a cluster-scoped path."""
    with pytest.raises(errors.BadRequestTarget):
        request_head.path_of(REDIS, "ns", name)
    if name:
        with pytest.raises(errors.BadRequestTarget):
            request_head.path_of(REDIS, name, "r")
        with pytest.raises(errors.BadRequestTarget):
            request_head.path_of(PODS, "ns", "p", name)


@pytest.mark.parametrize("name", ["r", "redis-0", "a.b.c", "0", "Upper_case:ok", "a" * 253])
def test_a_name_goes_in_as_it_is(name: str) -> None:
    """A name is its own percent-encoding: the path is what the apiserver expects."""
    path = request_head.path_of(REDIS, "ns-1", name, "status")
    assert path == f"/apis/myapp.demo.kubebuilder.io/v1/namespaces/ns-1/redis/{name}/status"
    assert request_head.path_of(PODS, None) == "/api/v1/pods"


def test_every_request_target_is_one_line_of_visible_ascii() -> None:
    """The query is encoded (a selector or continue token from an answer
    cannot end the line); a path not made by request_head.path_of is checked too."""
    target = request_head.request_target("/api/v1/pods", {"continue": "a b\r\nX: é", "limit": 5})
    assert target == "/api/v1/pods?continue=a+b%0D%0AX%3A+%C3%A9&limit=5"
    for path in ("/api/v1/pods/a b", "/x\r\nDELETE /y", "/é", "relative"):
        with pytest.raises(errors.BadRequestTarget):
            request_head.request_target(path, None)


@pytest.fixture
def raw_server() -> Iterator[tuple[str, list[bytes]]]:
    """A TCP server that records every byte it gets and answers one 200."""
    listener = socket.create_server(("127.0.0.1", 0))
    got: list[bytes] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                try:
                    got.append(conn.recv(65536))
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}", got
    listener.close()


@pytest.mark.parametrize(
    ("target", "headers"),
    [
        ("/api/v1/pods/x HTTP/1.1\r\nHost: x\r\n\r\nDELETE /y", {}),
        ("/api/v1/pods/p", {"User-Agent": "reconciler\r\nX-Evil: 1"}),
        ("/api/v1/pods/p", {"Authorization": "Bearer t\nX-Evil: 1"}),
        ("/api/v1/pods/p", {"X\r\nEvil": "1"}),
    ],
    ids=["target", "value", "authorization", "name"],
)
def test_the_transport_sends_no_head_that_is_more_than_its_lines(
    raw_server: tuple[str, list[bytes]], target: str, headers: dict[str, str]
) -> None:
    """The last look, below the client's own checks: nothing is sent."""
    url, got = raw_server
    direct = Direct(url, None, timeout=2, compression=False)
    with pytest.raises(ValueError, match="not"):
        direct.send("GET", target, None, headers)
    assert got == []
    assert direct.send("GET", "/api/v1/pods/p", None, {}).status == 200  # still sends


def _kubeconfig(url: str, tmp_path: Path, token: str = "t") -> str:
    doc = {
        "clusters": [{"name": "c", "cluster": {"server": url}}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    (tmp_path / "config").write_text(yaml.safe_dump(doc))
    return str(tmp_path / "config")


def test_a_token_that_would_end_its_header_is_no_credentials_and_not_sent(
    api: FakeApiserver, tmp_path: Path
) -> None:
    path = _kubeconfig(api.url, tmp_path, "good\r\nX-Impersonate-User: admin")
    client = kube.Kube(Config(kubeconfig=path, max_retries=0))
    with pytest.raises(errors.NoCredentials) as refused:
        client.get(PODS, "ns", "p")
    assert api.requests == []
    assert "Impersonate" not in str(refused.value)  # a credential is never quoted


@pytest.mark.parametrize(
    ("said", "read"),
    [
        ("nan", None),
        ("NaN", None),
        ("inf", None),
        ("-inf", None),
        ("1e999", None),
        ("-1", None),
        ("0x10", None),
        ("1_0", None),
        ("Wed, 21 Oct 2026 07:28:00 GMT", None),
        ("", None),
        ("0", 0.0),
        (" 2 ", 2.0),
        ("1.5", 1.5),
        ("3600", api_error.MAX_RETRY_AFTER),
        ("99999999999999999999", None),
    ],
)
def test_retry_after_is_whole_seconds_finite_and_capped(said: str, read: float | None) -> None:
    assert api_error.retry_after(Response(503, "", b"", said)) == read


class _InfThenOk(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    answered = 0

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        type(self).answered += 1
        first = type(self).answered == 1
        body = b"{}" if not first else b'{"kind":"Status","reason":"ServiceUnavailable"}'
        self.send_response(503 if first else 200)
        if first:
            self.send_header("Retry-After", "inf")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_a_retry_after_of_inf_is_no_wait_asked_for(tmp_path: Path) -> None:
    """float() read "inf" as seconds, and the retry waited MAX_RETRY_AFTER;
    not a number of seconds, it is no Retry-After: the backoff's 0.5 s."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _InfThenOk)
    server.daemon_threads = True
    serve = serving(server)
    next(serve)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        client = kube.Kube(Config(kubeconfig=_kubeconfig(url, tmp_path), max_retries=2))
        started = time.monotonic()
        assert client.get(PODS, "ns", "p") == {}
        assert _InfThenOk.answered == 2 and time.monotonic() - started < 5
    finally:
        serve.close()
