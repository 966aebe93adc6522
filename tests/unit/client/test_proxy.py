"""reconciler.client.proxy: the proxy kubectl would use, case by case."""

from __future__ import annotations

import base64
import json
import socket
import socketserver
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli import commands as cli_mod
from reconciler.client import errors, kube
from reconciler.client.proxy import proxy_for
from reconciler.client.transport import Direct, TransportError, redacted
from reconciler.config import Config
from tests.unit.client.test_transport import _kubeconfig, _Server
from tests.unit.connect_proxy import _pipe
from tests.unit.loopback import serving

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


# ------------------------------------------------------------ a proxy's password


class _AuthTunnel(socketserver.BaseRequestHandler):
    """CONNECT as a proxy that asks for a user and a password does."""

    def handle(self) -> None:
        proxy: AuthProxy = self.server  # type: ignore[assignment]
        client: socket.socket = self.request
        head = b""
        while b"\r\n\r\n" not in head and len(head) < 65536:
            piece = client.recv(4096)
            if not piece:
                return
            head += piece
        lines = head.decode("latin-1").split("\r\n")
        fields = dict(line.partition(": ")[::2] for line in lines[1:] if line)
        proxy.said.append(fields.get("Proxy-Authorization"))
        if fields.get("Proxy-Authorization") != proxy.wants:
            client.sendall(
                b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                b'Proxy-Authenticate: Basic realm="egress"\r\nContent-Length: 0\r\n\r\n'
            )
            return
        host, _, port = lines[0].split(" ")[1].rpartition(":")
        with socket.create_connection((host, int(port)), 5) as upstream:
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            _pipe(client, upstream)


class AuthProxy(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, user: str, password: str) -> None:
        super().__init__(("127.0.0.1", 0), _AuthTunnel)
        pair = f"{user}:{password}".encode()
        self.wants = "Basic " + base64.b64encode(pair).decode()
        self.said: list[str | None] = []  # each CONNECT's Proxy-Authorization

    def url(self, userinfo: str) -> str:
        return f"http://{userinfo}127.0.0.1:{self.server_address[1]}"


@pytest.fixture
def auth_proxy() -> Iterator[AuthProxy]:
    yield from serving(AuthProxy("egress", "p@ss:w rd"))


@pytest.fixture
def apiserver() -> Iterator[str]:
    for server in serving(_Server()):
        yield server.url


def test_the_proxys_password_is_sent_as_proxy_authorization(
    auth_proxy: AuthProxy, apiserver: str
) -> None:
    """As Go's net/http sends it: Basic, of the user and password decoded."""
    proxy = auth_proxy.url("egress:p%40ss%3Aw%20rd@")
    direct = Direct(apiserver, None, timeout=5, compression=False, proxy=proxy)
    assert direct.send("GET", "/version", None, {}).body == b"GET /version"
    assert auth_proxy.said == [auth_proxy.wants]


@pytest.mark.parametrize(
    ("userinfo", "says"),
    [
        ("egress:s3cret@", "the proxy http://egress:***@127.0.0.1:{port} refused our credentials"),
        ("", "the proxy http://127.0.0.1:{port} asks for credentials (407)"),
    ],
)
def test_a_proxy_that_answers_407_is_a_transport_error_without_the_password(
    auth_proxy: AuthProxy, apiserver: str, userinfo: str, says: str
) -> None:
    direct = Direct(apiserver, None, 5, False, proxy=auth_proxy.url(userinfo))
    with pytest.raises(TransportError) as caught:
        direct.send("GET", "/version", None, {})
    assert str(caught.value) == says.format(port=auth_proxy.server_address[1]) + (
        "" if not userinfo else " (407)"
    )
    assert "s3cret" not in str(caught.value)


def test_sync_through_a_proxy_that_refuses_the_password_never_prints_it(
    auth_proxy: AuthProxy, apiserver: str, tmp_path: Path
) -> None:
    """As a user runs it: exit 3, the proxy named, the password not."""
    cluster = {"proxy-url": auth_proxy.url("egress:s3cret@")}
    path = _kubeconfig(tmp_path, apiserver, {"token": "t"}, cluster=cluster)
    env = {"KUBECONFIG": path, "HOME": str(tmp_path)}
    result = CliRunner().invoke(cli_mod.cli, ["sync", "-o", "json"], env=env)
    assert result.exit_code == 3, result.output
    assert "s3cret" not in result.output and "s3cret" not in result.stderr
    assert "egress:***@127.0.0.1" in json.loads(result.stdout)["error"]
    assert "refused our credentials (407)" in result.stderr


def test_a_proxy_url_we_cannot_speak_is_named_without_its_password(tmp_path: Path) -> None:
    cluster = {"proxy-url": "socks5://egress:s3cret@127.0.0.1:1080"}
    path = _kubeconfig(tmp_path, "http://127.0.0.1:1", {"token": "t"}, cluster=cluster)
    with pytest.raises(errors.ConfigMissing) as caught:
        kube.Kube(Config(kubeconfig=path))
    assert "socks5://egress:***@127.0.0.1:1080: only http proxies" in str(caught.value)
    assert "s3cret" not in str(caught.value)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://u:p@proxy:3128", "http://u:***@proxy:3128"),
        ("http://u%40corp:p%3Ax@proxy:3128/", "http://u%40corp:***@proxy:3128/"),
        ("http://u@proxy:3128", "http://u@proxy:3128"),  # no password: nothing to hide
        ("http://proxy:3128", "http://proxy:3128"),
    ],
)
def test_a_proxy_url_is_printed_without_its_password(url: str, shown: str) -> None:
    assert redacted(url) == shown
