"""An apiserver on loopback that answers as a proxy, a cache or a neighbour
might: each path's answer is set by the test, every request is recorded.

Only what a pass asks for is served: LISTs (by path, query ignored), GETs of
one object, and writes, each answered as a test sets it or, by default, a
404 Status for a read and the body sent back for a write. JSON only: asked
for protobuf, it answers JSON, as a server that cannot send protobuf does.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from tests.unit.loopback import serving

REDIS_PATH = "/apis/myapp.demo.kubebuilder.io/v1/redis"
XCA_PATH = "/apis/apps.xca.k8s.kb.cx/v1beta1/xcas"

Answer = tuple[int, Any]  # status, and a JSON body (bytes: sent as they are)


def a_list(kind: str, items: list[dict[str, Any]]) -> Answer:
    return 200, {"kind": kind, "apiVersion": "v1", "metadata": {}, "items": items}


def not_found() -> Answer:
    return 404, {"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404}


class FakeApiserver(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.answers: dict[tuple[str, str], Answer | Callable[[], Answer]] = {}
        self.requests: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def answer(self, method: str, path: str, answer: Answer | Callable[[], Answer]) -> None:
        self.answers[(method, path)] = answer

    def writes(self) -> list[tuple[str, str]]:
        with self.lock:
            return [r for r in self.requests if r[0] not in ("GET",)]

    def kubeconfig(self, tmp_path: Path) -> Path:
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "c", "cluster": {"server": self.url}}],
            "users": [{"name": "u", "user": {"token": "fake-token"}}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "x",
        }
        path = tmp_path / "kubeconfig"
        path.write_text(yaml.safe_dump(doc))
        return path


class _Handler(BaseHTTPRequestHandler):
    server: FakeApiserver
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        sent = self.rfile.read(length) if length else b""
        path = urlsplit(self.path).path
        with self.server.lock:
            self.server.requests.append((self.command, path))
        found = self.server.answers.get((self.command, path))
        if found is None:
            status, body = not_found() if self.command == "GET" else (200, sent or b"{}")
        else:
            status, body = found() if callable(found) else found
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve


def fake_apiserver() -> Iterator[FakeApiserver]:
    """For a fixture: a FakeApiserver served until the test ends."""
    yield from serving(FakeApiserver())
