"""Credentials that change under a running client: a 401 re-reads the
kubeconfig and runs the exec plugin again, once; a renewed client
certificate makes a new TLS context. Against a real HTTP server on loopback
that accepts only the tokens it is told to."""

from __future__ import annotations

import json
import os
import socket
import ssl
import stat
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from reconciler.client import errors, kube, kubeconfig
from reconciler.client.credentials import CHECK_EVERY, Credentials
from reconciler.client.transport import Tls
from reconciler.config import Config
from tests.unit.client.test_exec_plugin import V1, plugin, runs
from tests.unit.loopback import serving


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        server: _Guarded = self.server  # type: ignore[assignment]
        sent = self.headers.get("Authorization") or ""
        server.seen.append(sent)
        code = 200 if sent in server.accepted else 401
        body = b"{}" if code == 200 else b'{"kind":"Status","reason":"Unauthorized","message":"no"}'
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _Guarded(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.accepted: set[str] = set()
        self.seen: list[str] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@pytest.fixture
def server() -> Iterator[_Guarded]:
    yield from serving(_Guarded())


def _kubeconfig(path: Path, server: str, user: dict[str, object]) -> str:
    doc = {
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def test_a_token_replaced_in_the_kubeconfig_is_taken_after_one_401(
    server: _Guarded, tmp_path: Path
) -> None:
    path = tmp_path / "config"
    client = kube.Kube(Config(kubeconfig=_kubeconfig(path, server.url, {"token": "old"})))
    server.accepted = {"Bearer old"}
    client.version()
    _kubeconfig(path, server.url, {"token": "new"})  # renewed; the old one is revoked
    server.accepted = {"Bearer new"}
    client.version()
    client.version()
    assert server.seen == ["Bearer old", "Bearer old", "Bearer new", "Bearer new"]


def test_a_401_with_nothing_new_to_send_is_the_callers_at_once(
    server: _Guarded, tmp_path: Path
) -> None:
    path = tmp_path / "config"
    client = kube.Kube(Config(kubeconfig=_kubeconfig(path, server.url, {"token": "old"})))
    with pytest.raises(errors.ApiError) as refused:
        client.version()
    assert refused.value.status == 401 and server.seen == ["Bearer old"]


def test_an_exec_token_runs_once_for_many_requests_and_again_after_a_401(
    server: _Guarded, tmp_path: Path
) -> None:
    script, log = plugin(tmp_path, expires="2099-01-01T00:00:00Z")
    exec_ = {"exec": {"apiVersion": V1, "command": str(script), "interactiveMode": "Never"}}
    client = kube.Kube(Config(kubeconfig=_kubeconfig(tmp_path / "config", server.url, exec_)))
    server.accepted = {"Bearer token-1"}
    for _ in range(20):
        client.version()
    assert len(runs(log)) == 1
    server.accepted = {"Bearer token-2"}  # the cluster no longer takes token-1
    client.version()
    assert len(runs(log)) == 2
    assert server.seen[-2:] == ["Bearer token-1", "Bearer token-2"]


def test_a_failing_exec_plugin_is_no_credentials_naming_it(
    server: _Guarded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script, _ = plugin(tmp_path)
    monkeypatch.setenv("MODE", "fail")
    exec_ = {"exec": {"apiVersion": V1, "command": str(script), "interactiveMode": "Never"}}
    client = kube.Kube(Config(kubeconfig=_kubeconfig(tmp_path / "config", server.url, exec_)))
    with pytest.raises(
        errors.NoCredentials, match=r"^exec plugin get-token exited 255: Error: the"
    ):
        client.version()
    assert server.seen == []
    assert isinstance(errors.NoCredentials("x"), errors.Unreachable)  # the pass reached nothing


def _client_cert(tmp_path: Path, name: str) -> tuple[Path, Path]:
    key, crt = tmp_path / f"{name}.key", tmp_path / f"{name}.crt"
    req = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
    subprocess.run(
        [*req, "-subj", f"/CN={name}", "-keyout", str(key), "-out", str(crt)],
        check=True,
        capture_output=True,
    )
    return crt, key


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_client_certificate_renewed_on_disk_makes_a_new_tls_context(tmp_path: Path) -> None:
    crt, key = _client_cert(tmp_path, "first")
    user = {"client-certificate": str(crt), "client-key": str(key)}
    path = Path(_kubeconfig(tmp_path / "config", "https://127.0.0.1:9", user))
    clock = Clock()
    creds = Credentials(kubeconfig.from_file(path), clock=clock)
    first = creds.context()
    assert creds.context() is first
    renewed_crt, renewed_key = _client_cert(tmp_path, "second")
    crt.write_bytes(renewed_crt.read_bytes())
    key.write_bytes(renewed_key.read_bytes())
    assert creds.context() is first  # looked at once a second, not per request
    clock.now += CHECK_EVERY
    second = creds.context()
    assert second is not first and creds.generation == 1
    clock.now += CHECK_EVERY
    assert creds.context() is second


def test_a_401_looks_at_the_certificate_files_at_once(tmp_path: Path) -> None:
    crt, key = _client_cert(tmp_path, "first")
    user = {"client-certificate": str(crt), "client-key": str(key)}
    path = Path(_kubeconfig(tmp_path / "config", "https://127.0.0.1:9", user))
    creds = Credentials(kubeconfig.from_file(path), clock=Clock())
    first = creds.context()
    assert creds.refused(None, creds.generation) is False  # nothing new: the caller's 401
    renewed_crt, renewed_key = _client_cert(tmp_path, "second")
    crt.write_bytes(renewed_crt.read_bytes())
    key.write_bytes(renewed_key.read_bytes())
    assert creds.refused(None, creds.generation) is True  # within the second, yet seen
    assert creds.context() is not first


class _TlsEcho:
    """An https server that requires a client certificate signed by ``ca``
    and answers with the certificate's common name."""

    def __init__(self, tmp_path: Path, ca: Path) -> None:
        crt, key = _client_cert(tmp_path, "server")
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(ca))
        self.context.verify_mode = ssl.CERT_REQUIRED
        self.context.load_cert_chain(crt, key)
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self) -> None:
        raw, _ = self.sock.accept()
        with self.context.wrap_socket(raw, server_side=True) as conn:
            conn.recv(65536)
            subject = dict(pair[0] for pair in conn.getpeercert()["subject"])
            body = subject["commonName"].encode()
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))


def test_an_exec_plugins_client_certificate_is_presented(tmp_path: Path) -> None:
    crt, key = _client_cert(tmp_path, "from-the-plugin")
    answer = {
        "apiVersion": V1,
        "kind": "ExecCredential",
        "status": {"clientCertificateData": crt.read_text(), "clientKeyData": key.read_text()},
    }
    script = tmp_path / "cert-plugin"
    script.write_text(f"#!/bin/sh\ncat <<'EOF'\n{json.dumps(answer)}\nEOF\n")
    script.chmod(0o755)
    echo = _TlsEcho(tmp_path, ca=crt)  # the self-signed certificate is its own CA
    exec_ = {"exec": {"apiVersion": V1, "command": str(script), "interactiveMode": "Never"}}
    path = tmp_path / "config"
    _kubeconfig(path, echo.url, exec_)
    doc = yaml.safe_load(path.read_text())
    doc["clusters"][0]["cluster"]["insecure-skip-tls-verify"] = True
    path.write_text(yaml.safe_dump(doc))
    assert kube.Kube(Config(kubeconfig=str(path))).send("GET", "/") == b"from-the-plugin"


def test_a_kubeconfig_half_rewritten_when_a_401_reloads_it_is_logged_without_its_lines(
    server: _Guarded, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "config"
    client = kube.Kube(Config(kubeconfig=_kubeconfig(path, server.url, {"token": "old"})))
    server.accepted = {"Bearer old"}
    client.version()
    secret = "sekrit-0123456789abcdef"
    text = path.read_text().replace("token: old", f"token: {secret}: half-written")
    path.write_text(text)  # a rotator caught half-way; the old token is revoked
    server.accepted = set()
    with pytest.raises(errors.ApiError) as refused:
        client.version()
    assert refused.value.status == 401
    (warning,) = [r for r in caplog.records if "cannot be read again" in r.getMessage()]
    said = warning.getMessage()
    assert f"kubeconfig {path}: line " in said and "could not parse YAML" in said
    assert secret not in caplog.text and secret not in str(refused.value)


def test_an_exec_plugins_key_is_in_a_private_directory_and_removed_when_replaced(
    tmp_path: Path,
) -> None:
    first, second = _client_cert(tmp_path, "first"), _client_cert(tmp_path, "second")
    answers = [
        json.dumps(
            {
                "apiVersion": V1,
                "kind": "ExecCredential",
                "status": {"clientCertificateData": c.read_text(), "clientKeyData": k.read_text()},
            }
        )
        for c, k in (first, second)
    ]
    for i, answer in enumerate(answers):
        (tmp_path / f"answer-{i}").write_text(answer)
    script, count = tmp_path / "cert-plugin", tmp_path / "count"
    script.write_text(
        f"#!/bin/sh\necho run >> {count}\n"
        f'if [ "$(wc -l < {count})" -gt 1 ]; then cat {tmp_path}/answer-1; '
        f"else cat {tmp_path}/answer-0; fi\n"
    )
    script.chmod(0o755)
    exec_ = {"exec": {"apiVersion": V1, "command": str(script), "interactiveMode": "Never"}}
    path = Path(_kubeconfig(tmp_path / "config", "https://127.0.0.1:9", exec_))
    creds = Credentials(kubeconfig.from_file(path), clock=Clock())
    creds.context()
    old = _presented(creds)
    assert [Path(f).read_bytes() for f in old] == [first[0].read_bytes(), first[1].read_bytes()]
    for file in old:
        directory = Path(file).parent.lstat()
        assert Path(file).parent != Path(tempfile.gettempdir())  # not the shared /tmp
        assert (stat.S_IMODE(directory.st_mode), directory.st_uid) == (0o700, os.getuid())
        assert stat.S_IMODE(Path(file).stat().st_mode) == 0o600
    assert creds.refused(None, creds.generation) is True  # the cluster refused the first
    creds.context()
    new = _presented(creds)
    assert Path(new[0]).read_bytes() == second[0].read_bytes()
    assert [Path(f).exists() for f in old] == [False, False]  # the old key is gone


def _presented(creds: Credentials) -> tuple[str, str]:
    """The certificate and key files of the TLS context now."""
    assert creds._context_key is not None
    tls = creds._context_key[0]
    assert isinstance(tls, Tls) and tls.cert_file and tls.key_file
    return tls.cert_file, tls.key_file
