"""reconciler.client.transport against a real HTTP server on loopback, and which
transport reconciler.client.kube picks for which credentials."""

from __future__ import annotations

import gzip
import json
import random
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from reconciler.client import errors, http_read, kube, pykube_session
from reconciler.client.protowire import META_ACCEPT
from reconciler.client.streams import VersionStream
from reconciler.client.transport import Direct, TransportError
from reconciler.config import Config
from reconciler.model import PODS, Version
from tests.unit.connect_proxy import ConnectProxy
from tests.unit.loopback import serving


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive

    def log_message(self, *args: object) -> None:
        pass

    def _answer(self) -> None:
        server: _Server = self.server  # type: ignore[assignment]
        length = int(self.headers.get("Content-Length") or 0)
        sent = self.rfile.read(length) if length else b""
        server.seen.append((self.command, self.path, sent, dict(self.headers)))
        self.answered = getattr(self, "answered", 0) + 1  # on this connection
        if server.hang_up_on_second and self.answered == 2:
            self.close_connection = True  # read the request, then close unanswered
            return
        body = server.body or f"{self.command} {self.path}".encode()
        gzipped = server.gzip and "gzip" in (self.headers.get("Accept-Encoding") or "")
        if gzipped:
            body = gzip.compress(body)
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        if gzipped:
            self.send_header("Content-Encoding", "gzip")
        self.end_headers()
        self.wfile.write(body)
        if server.close_after_answer:
            self.close_connection = True

    do_GET = do_POST = do_PATCH = do_PUT = _answer


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.seen: list[tuple[str, str, bytes, dict[str, str]]] = []
        self.connections = 0
        self.gzip = False
        self.body = b""  # what every answer says; empty: the request line
        self.close_after_answer = False
        self.hang_up_on_second = False  # a kept-alive connection closed as it is reused
        self.closed = threading.Event()  # set when a connection is shut down

    def shutdown_request(self, request: socket.socket) -> None:  # type: ignore[override]
        super().shutdown_request(request)
        self.closed.set()

    def process_request(self, request: socket.socket, client_address: object) -> None:  # type: ignore[override]
        self.connections += 1
        super().process_request(request, client_address)  # type: ignore[arg-type]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@pytest.fixture
def server() -> Iterator[_Server]:
    yield from serving(_Server())


def test_requests_share_one_kept_alive_connection(server: _Server) -> None:
    direct = Direct(server.url, None, timeout=5, compression=False)
    answers = [direct.send("GET", f"/x/{i}", None, {}) for i in range(5)]
    assert [a.body for a in answers] == [f"GET /x/{i}".encode() for i in range(5)]
    assert server.connections == 1


def test_a_connection_the_server_closed_is_replaced_before_a_write(server: _Server) -> None:
    """A POST is never sent twice, so a connection the server closed while we
    were idle must be noticed before the write, not after it failed."""
    server.close_after_answer = True
    direct = Direct(server.url, None, timeout=5, compression=False)
    direct.send("GET", "/a", None, {})
    assert server.closed.wait(5)
    answer = direct.send("POST", "/b", b'{"k":1}', {"Content-Type": "application/json"})
    assert answer.status == 200 and answer.body == b"POST /b"
    assert server.seen[-1][2] == b'{"k":1}'
    assert server.connections == 2


def test_a_get_the_server_hung_up_on_is_sent_again_and_a_write_is_not(server: _Server) -> None:
    """The server may close a kept-alive connection just as a request goes
    out. A GET is safe to send again; a write might have landed, so it fails
    and the next pass decides afresh."""
    server.hang_up_on_second = True
    direct = Direct(server.url, None, timeout=5, compression=False)
    direct.send("GET", "/1", None, {})
    assert direct.send("GET", "/2", None, {}).body == b"GET /2"
    assert server.connections == 2
    with pytest.raises(TransportError):
        direct.send("POST", "/3", b"{}", {})
    assert [path for _, path, _, _ in server.seen] == ["/1", "/2", "/2", "/3"]


def test_gzip_is_asked_for_and_undone_only_with_compression(server: _Server) -> None:
    server.gzip = True
    plain = Direct(server.url, None, timeout=5, compression=False)
    zipped = Direct(server.url, None, timeout=5, compression=True)
    assert plain.send("GET", "/p", None, {}).body == b"GET /p"
    assert zipped.send("GET", "/z", None, {}).body == b"GET /z"
    assert server.seen[0][3]["Accept-Encoding"] == "identity"
    assert server.seen[1][3]["Accept-Encoding"] == "gzip"


def test_a_server_url_with_a_path_prefixes_every_request(server: _Server) -> None:
    direct = Direct(server.url + "/k8s/clusters/c1/", None, timeout=5, compression=False)
    assert direct.send("GET", "/api/v1/pods?limit=1", None, {}).body == (
        b"GET /k8s/clusters/c1/api/v1/pods?limit=1"
    )


def test_nothing_listening_is_a_transport_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    direct = Direct(f"http://127.0.0.1:{port}", None, timeout=5, compression=False)
    with pytest.raises(TransportError, match="Connection refused"):
        direct.send("GET", "/", None, {})


def _canned(answers: list[bytes]) -> tuple[str, list[bytes]]:
    """A server that reads one request per answer on one connection and
    writes each answer as given, byte for byte; it closes after the last."""
    listener = socket.create_server(("127.0.0.1", 0))
    requests: list[bytes] = []

    def serve() -> None:
        conn, _ = listener.accept()
        with conn, conn.makefile("rb") as reader:
            for answer in answers:
                head = b"".join(iter(lambda: reader.readline(), b"\r\n"))
                length = next(
                    (
                        int(h.split(b":")[1])
                        for h in head.split(b"\r\n")
                        if h.startswith(b"Content-Length")
                    ),
                    0,
                )
                requests.append(head + b"\r\n" + reader.read(length))
                conn.sendall(answer)
        listener.close()

    threading.Thread(target=serve, daemon=True).start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}", requests


def test_chunked_and_unlengthed_answers_are_read_whole() -> None:
    """The apiserver streams large LISTs in chunks; an answer with neither a
    length nor chunks ends with the connection, which is then not reused."""
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    chunked += b"5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nTrailer: x\r\n\r\n"
    informational = b"HTTP/1.1 100 Continue\r\n\r\n"
    no_content = b"HTTP/1.1 204 No Content\r\n\r\n"
    until_close = b"HTTP/1.1 409 Conflict\r\nRetry-After: 2\r\n\r\nthe rest"
    url, seen = _canned([chunked, informational + no_content, until_close])
    direct = Direct(url, None, timeout=5, compression=False)
    first = direct.send("GET", "/a", None, {})
    assert (first.status, first.body) == (200, b"hello, world")
    assert direct.send("DELETE", "/b", None, {}).status == 204
    last = direct.send("PATCH", "/c", b"{}", {"Content-Type": "m"})
    assert (last.status, last.reason, last.body, last.retry_after) == (
        409,
        "Conflict",
        b"the rest",
        "2",
    )
    assert seen[2].startswith(b"PATCH /c HTTP/1.1\r\nHost: 127.0.0.1:")
    assert seen[2].endswith(b"Content-Length: 2\r\n\r\n{}")
    assert not direct.local.conn.open


@pytest.mark.parametrize(
    "answer",
    [
        b"SSH-2.0-OpenSSH\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: x1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 4\r\n\r\nnope",
    ],
)
def test_an_answer_that_is_not_http_or_cut_short_is_a_transport_error(answer: bytes) -> None:
    url, _ = _canned([answer])
    with pytest.raises(TransportError):
        Direct(url, None, timeout=5, compression=False).send("GET", "/", None, {})


def _chunked(body: bytes, size: int) -> bytes:
    pieces = [body[at : at + size] for at in range(0, len(body), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


# 300 kB that gzip cannot shrink: more than one piece of a stream, gzipped or not.
BIG = random.Random(0).randbytes(300_000)


@pytest.mark.parametrize("framing", ["chunked", "length", "until close"])
@pytest.mark.parametrize("gzipped", [False, True])
def test_a_body_given_to_a_sink_arrives_whole_and_in_pieces(framing: str, gzipped: bool) -> None:
    """A large LIST is read as it arrives: the sink gets every byte, inflated,
    over several calls, and the answer itself holds none of it."""
    data = gzip.compress(BIG) if gzipped else BIG
    head = b"HTTP/1.1 200 OK\r\n" + (b"Content-Encoding: gzip\r\n" if gzipped else b"")
    if framing == "chunked":
        answer = head + b"Transfer-Encoding: chunked\r\n\r\n" + _chunked(data, 5000)
    elif framing == "length":
        answer = head + b"Content-Length: %d\r\n\r\n" % len(data) + data
    else:
        answer = head + b"\r\n" + data
    after = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nnext"
    url, _ = _canned([answer] if framing == "until close" else [answer, after])
    pieces: list[bytes] = []
    direct = Direct(url, None, timeout=5, compression=gzipped)
    got = direct.send("GET", "/", None, {}, pieces.append)
    assert b"".join(pieces) == BIG
    assert len(pieces) > 1
    assert (got.status, got.body, got.received) == (200, b"", len(data))
    if framing != "until close":  # the same connection, read to the end of that body
        assert direct.send("GET", "/next", None, {}).body == b"next"


def test_an_error_answer_is_read_whole_and_not_given_to_the_sink() -> None:
    """A 500 or a 410 is a Status to read, not a page."""
    body = b'{"kind":"Status","code":410}'
    url, _ = _canned([b"HTTP/1.1 410 Gone\r\nContent-Length: %d\r\n\r\n" % len(body) + body])
    pieces: list[bytes] = []
    got = Direct(url, None, timeout=5, compression=False).send("GET", "/", None, {}, pieces.append)
    assert (got.status, got.body, pieces) == (410, body, [])


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 300000\r\n\r\n" + BIG[:70000],
        b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 1000\r\n\r\n"
        + gzip.compress(BIG)[:1000],  # a gzip stream that stops short
    ],
)
def test_a_stream_cut_short_is_a_transport_error_after_what_arrived(answer: bytes) -> None:
    """The sink has had part of the body: the decoder must be told it ended early."""
    url, _ = _canned([answer])
    pieces: list[bytes] = []
    with pytest.raises(TransportError):
        Direct(url, None, timeout=5, compression=True).send("GET", "/", None, {}, pieces.append)
    assert pieces  # it had begun


def test_a_get_whose_answer_began_to_reach_the_sink_is_not_sent_again(
    server: _Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reused connection that resets mid-body would otherwise be retried,
    and the sink would be given the start of the body twice."""
    direct = Direct(server.url, None, timeout=5, compression=False)
    direct.send("GET", "/first", None, {})  # the next request reuses the connection
    read = http_read.Connection._pieces

    def reset_after_one(self, *args):
        yield next(read(self, *args))
        raise ConnectionResetError("reset by peer")

    monkeypatch.setattr(http_read.Connection, "_pieces", reset_after_one)
    pieces: list[bytes] = []
    with pytest.raises(TransportError, match="reset by peer"):
        direct.send("GET", "/second", None, {}, pieces.append)
    assert pieces == [b"GET /second"]
    assert [path for _, path, _, _ in server.seen] == ["/first", "/second"]


def test_a_sink_that_refuses_the_body_leaves_no_connection_half_read(server: _Server) -> None:
    """The rest of that body is never read: the connection is closed, and
    the next request goes out on a new one."""
    direct = Direct(server.url, None, timeout=5, compression=False)

    def refuse(piece: bytes) -> None:
        raise ValueError("not a list")

    with pytest.raises(ValueError, match="not a list"):
        direct.send("GET", "/a", None, {}, refuse)
    assert not direct.local.conn.open  # the rest may not have arrived yet: never reused
    assert direct.send("GET", "/b", None, {}).body == b"GET /b"
    assert server.connections == 2


# ------------------------------------------------------------ kube's choice


def _kubeconfig(
    tmp_path: Path,
    server: str,
    user: dict[str, object],
    name: str = "k",
    cluster: dict[str, object] | None = None,
) -> str:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server, **(cluster or {})}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def test_static_credentials_go_direct_with_their_header(server: _Server, tmp_path: Path) -> None:
    token = Config(kubeconfig=_kubeconfig(tmp_path, server.url, {"token": "t0k"}))
    basic_user = {"username": "a", "password": "b"}
    basic = Config(kubeconfig=_kubeconfig(tmp_path, server.url, basic_user, "basic"))
    kube.Kube(token).send("GET", "/t", params={"limit": 2, "labelSelector": "a=b"})
    kube.Kube(basic).send("PATCH", "/b", json={"x": [1]}, headers={"Content-Type": "m+json"})
    (_, path, _, headers), (_, _, body, patched) = server.seen
    assert path == "/t?limit=2&labelSelector=a%3Db"
    assert headers["Authorization"] == "Bearer t0k"
    assert patched["Authorization"] == "Basic YTpi" and patched["Content-Type"] == "m+json"
    assert body == b'{"x":[1]}'
    assert isinstance(kube.Kube(token).transport, Direct)


def test_every_write_names_one_field_manager_whatever_the_user_agent(
    server: _Server, tmp_path: Path
) -> None:
    client = kube.Kube(Config(kubeconfig=_kubeconfig(tmp_path, server.url, {"token": "t"})))
    client.user_agent = "reconciler (replica-a)"
    client.send("POST", "/c", json={})
    client.send("PATCH", "/p", params={"dryRun": "All"}, json={})
    client.send("PUT", "/u", json={})
    client.send("GET", "/g")
    assert [path for _, path, _, _ in server.seen] == [
        "/c?fieldManager=reconciler",
        "/p?dryRun=All&fieldManager=reconciler",
        "/u?fieldManager=reconciler",
        "/g",
    ]


def test_a_cluster_that_disables_compression_is_never_asked_for_gzip(
    server: _Server, tmp_path: Path
) -> None:
    server.gzip = True
    off = {"disable-compression": True}
    plain = _kubeconfig(tmp_path, server.url, {"token": "t"}, "plain", off)
    zipped = _kubeconfig(tmp_path, server.url, {"token": "t"}, "zipped")
    assert kube.Kube(Config(kubeconfig=plain)).send("GET", "/p") == b"GET /p"
    assert kube.Kube(Config(kubeconfig=zipped)).send("GET", "/z") == b"GET /z"
    assert [h["Accept-Encoding"] for _, _, _, h in server.seen] == ["identity", "gzip"]
    provider = {"auth-provider": {"name": "oidc", "config": {}}}
    session = _kubeconfig(tmp_path, server.url, provider, "session", off)
    chosen = kube.Kube(Config(kubeconfig=session)).transport
    assert isinstance(chosen, pykube_session.PykubeSession)
    assert chosen._http().session.headers["Accept-Encoding"] == "identity"


def test_only_an_auth_provider_goes_through_pykubes_session(
    server: _Server, tmp_path: Path
) -> None:
    provider = {"auth-provider": {"name": "oidc", "config": {}}}
    exec_ = {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "true"}}
    chosen = kube.Kube(Config(kubeconfig=_kubeconfig(tmp_path, server.url, provider))).transport
    assert isinstance(chosen, pykube_session.PykubeSession)
    chosen = kube.Kube(Config(kubeconfig=_kubeconfig(tmp_path, server.url, exec_))).transport
    assert isinstance(chosen, Direct)


def test_the_kubeconfigs_proxy_url_carries_every_request_through_a_tunnel(
    server: _Server, tmp_path: Path
) -> None:
    with ConnectProxy() as proxy:
        cluster = {"proxy-url": proxy.url}
        path = _kubeconfig(tmp_path, server.url, {"token": "t"}, cluster=cluster)
        client = kube.Kube(Config(kubeconfig=path))
        assert isinstance(client.transport, Direct)
        assert [client.send("GET", f"/x/{i}") for i in range(3)] == [
            b"GET /x/0",
            b"GET /x/1",
            b"GET /x/2",
        ]
        assert proxy.tunnels == [f"127.0.0.1:{server.server_address[1]}"]  # one, kept alive


def test_the_environments_proxy_is_used_as_go_uses_it(
    server: _Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HTTP_PROXY carries a name only the proxy resolves; NO_PROXY and loopback
    addresses go direct."""
    port = server.server_address[1]
    with ConnectProxy({"apiserver.test": "127.0.0.1"}) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        named = _kubeconfig(tmp_path, f"http://apiserver.test:{port}", {"token": "t"}, "named")
        assert kube.Kube(Config(kubeconfig=named)).send("GET", "/n") == b"GET /n"
        loopback = _kubeconfig(tmp_path, server.url, {"token": "t"}, "loopback")
        assert kube.Kube(Config(kubeconfig=loopback)).send("GET", "/l") == b"GET /l"
        assert proxy.tunnels == [f"apiserver.test:{port}"]
        monkeypatch.setenv("NO_PROXY", "example.com,.test")
        with pytest.raises(errors.Unreachable):  # dialled directly: the name does not resolve here
            kube.Kube(Config(kubeconfig=named, max_retries=0)).send("GET", "/n")
        assert len(proxy.tunnels) == 1


@pytest.mark.parametrize("field", ["certificate-authority", "client-key"])
def test_a_tls_file_that_is_not_there_is_a_config_error_naming_it(
    tmp_path: Path, field: str
) -> None:
    path = _kubeconfig(tmp_path, "https://127.0.0.1:9", {"token": "t"})
    doc = yaml.safe_load(Path(path).read_text())
    if field == "client-key":
        (tmp_path / "client.crt").write_text("not read: the key is missing first")
        doc["users"][0]["user"] = {"client-certificate": str(tmp_path / "client.crt")}
        doc["users"][0]["user"]["client-key"] = str(tmp_path / "gone.crt")
    else:
        doc["clusters"][0]["cluster"][field] = str(tmp_path / "gone.crt")
    Path(path).write_text(yaml.safe_dump(doc))
    with pytest.raises(errors.ConfigMissing, match=rf"{field} \S*gone\.crt: no such file"):
        kube.Kube(Config(kubeconfig=path))


def _client(tmp_path: Path, url: str, session: bool) -> kube.Kube:
    """A client through Direct, or through pykube's session (which carries
    auth providers and https proxies)."""
    client = kube.Kube(Config(kubeconfig=_kubeconfig(tmp_path, url, {"token": "t"})))
    if session:
        client.transport = pykube_session.PykubeSession(client.kube_config, client.settings, None)
    return client


@pytest.mark.parametrize("session", [False, True])
def test_a_list_read_as_it_arrives_asks_one_page_and_feeds_the_decoder_in_pieces(
    server: _Server, tmp_path: Path, session: bool
) -> None:
    """Through either transport: page size 0 asks for no limit, the body
    reaches the decoder in pieces, and its bytes are counted."""
    versions = [Version("ns", f"p{i}", f"u{i}", str(i)) for i in range(3000)]
    items = [
        {
            "metadata": {
                "namespace": v.namespace,
                "name": v.name,
                "uid": v.uid,
                "resourceVersion": v.resource_version,
            }
        }
        for v in versions
    ]
    server.body = json.dumps({"kind": "PodList", "metadata": {}, "items": items}).encode()
    client = _client(tmp_path, server.url, session)
    pieces: list[int] = []

    class Counting(VersionStream):
        def feed(self, piece: bytes) -> None:
            pieces.append(len(piece))
            super().feed(piece)

    assert client.list_streamed(PODS, "ns", Counting, META_ACCEPT, page_size=0) == versions
    assert len(pieces) > 1 and sum(pieces) == len(server.body)
    assert client.stats.snapshot().bytes_received == len(server.body)
    client.list_streamed(PODS, "ns", Counting, META_ACCEPT, page_size=5)
    paths = [path.rpartition(server.url)[2] for _, path, _, _ in server.seen]
    assert paths == ["/api/v1/namespaces/ns/pods", "/api/v1/namespaces/ns/pods?limit=5"]
    assert server.seen[0][3]["Accept"] == META_ACCEPT


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("session", [False, True])
def test_bytes_received_are_the_bytes_on_the_wire_not_the_inflated_body(
    server: _Server, tmp_path: Path, session: bool, streamed: bool
) -> None:
    """With gzip on, a pass summary's bytes received are what crossed the
    network, which is what a remote bastion pays for, not the JSON decoded."""
    items = [
        {"metadata": {"namespace": "ns", "name": f"p{i}", "uid": f"u{i}"}} for i in range(2000)
    ]
    server.body = json.dumps({"kind": "PodList", "metadata": {}, "items": items}).encode()
    server.gzip = True
    zipped = len(gzip.compress(server.body))
    assert zipped < len(server.body) // 5
    client = _client(tmp_path, server.url, session)
    if streamed:
        got = client.list_streamed(PODS, "ns", VersionStream, META_ACCEPT, page_size=0)
    else:
        got = client.list(PODS, "ns", page_size=0)
    assert len(got) == 2000
    assert server.seen[0][3]["Accept-Encoding"] == "gzip"
    assert client.stats.snapshot().bytes_received == zipped


def test_every_warning_header_field_is_kept() -> None:
    """The apiserver sends one Warning field per warning."""
    answer = b'HTTP/1.1 200 OK\r\nWarning: 299 - "a"\r\nWarning: 299 - "b"\r\n'
    answer += b"Content-Length: 2\r\n\r\n{}"
    url, _ = _canned([answer])
    resp = Direct(url, None, timeout=5, compression=False).send("GET", "/a", None, {})
    assert resp.warning == '299 - "a", 299 - "b"'
