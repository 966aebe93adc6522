"""Never act on a view we did not get, on the real apiserver: a loopback proxy
between the reconciler and the local apiserver rewrites the answer to the
Redis LIST as a broken proxy (`{}`, a Status) or a stale cache (an empty
RedisList) would. The pods of Redis objects that exist survive every pass;
the pods of one really deleted still go."""

from __future__ import annotations

import json
import ssl
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from tests.e2e.conftest import Kubectl, Reconciler, wait_for

REDIS_LIST_SUFFIX = "/redis"
EMPTY = {"kind": "RedisList", "apiVersion": "myapp.demo.kubebuilder.io/v1", "metadata": {}}
REWRITES: dict[str, Any] = {
    "empty-object": {},
    "status": {"kind": "Status", "apiVersion": "v1", "status": "Success", "metadata": {}},
    "stale-empty-list": {**EMPTY, "items": []},
}


class _Rewriter(ThreadingHTTPServer):
    """Forwards everything to the apiserver with its own credentials, but
    answers each Redis LIST with ``rewrite`` while it is set."""

    daemon_threads = True

    def __init__(self, cluster: Any) -> None:
        super().__init__(("127.0.0.1", 0), _Forward)
        self.upstream, self.token = cluster.server, cluster.token
        self.context = ssl.create_default_context(cafile=str(cluster.ca_file))
        self.rewrite: Any = None
        self.rewritten = 0

    def kubeconfig(self, path: Path) -> Path:
        server = f"http://127.0.0.1:{self.server_address[1]}"
        path.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "current-context": "p",
                    "clusters": [{"name": "p", "cluster": {"server": server}}],
                    "users": [{"name": "p", "user": {"token": "the-proxy-authenticates"}}],
                    "contexts": [{"name": "p", "context": {"cluster": "p", "user": "p"}}],
                }
            )
        )
        return path


class _Forward(BaseHTTPRequestHandler):
    server: _Rewriter
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def _answer(self, code: int, data: bytes, ctype: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _proxy(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)) or None
        is_redis_list = self.command == "GET" and urlsplit(self.path).path.endswith(
            REDIS_LIST_SUFFIX
        )
        if is_redis_list and self.server.rewrite is not None:
            self.server.rewritten += 1
            self._answer(200, json.dumps(self.server.rewrite).encode(), "application/json")
            return
        req = urllib.request.Request(
            self.server.upstream + self.path, data=body, method=self.command
        )
        for key in ("Content-Type", "Accept"):
            if self.headers.get(key):
                req.add_header(key, self.headers[key])
        req.add_header("Authorization", f"Bearer {self.server.token}")
        opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}),
            urllib.request.HTTPSHandler(context=self.server.context),
        )
        try:
            resp = opener.open(req, timeout=30)
            code, data, ctype = resp.status, resp.read(), resp.headers.get("Content-Type", "")
        except urllib.error.HTTPError as exc:
            code, data, ctype = exc.code, exc.read(), exc.headers.get("Content-Type", "")
        self._answer(code, data, ctype)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _proxy


@pytest.fixture
def rewriter(cluster: Any) -> Iterator[_Rewriter]:
    server = _Rewriter(cluster)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _redis(ns: str, name: str) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "myapp.demo.kubebuilder.io/v1",
            "kind": "Redis",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"num": 1},
        }
    )


def _pods(kubectl: Kubectl, ns: str) -> set[str]:
    found = kubectl.json("get", "pods", "-n", ns)["items"]
    return {p["metadata"]["name"] for p in found if not p["metadata"].get("deletionTimestamp")}


def test_the_pods_of_redis_that_exist_survive_lists_we_did_not_get(
    kubectl: Kubectl, reconciler: Reconciler, rewriter: _Rewriter, ns: str, tmp_path: Path
) -> None:
    for name in ("keep", "gone"):
        kubectl.apply(_redis(ns, name))
    reconciler.converge(ns)
    assert _pods(kubectl, ns) == {"keep-0", "gone-0"}
    through = Reconciler(rewriter.kubeconfig(tmp_path / "rewritten"))

    for why, answer in REWRITES.items():
        rewriter.rewrite = answer
        result = through.sync(ns, expect=1)
        assert not any("/delete/" in k for k in result.summary["actions"]), (why, result.summary)
        assert _pods(kubectl, ns) == {"keep-0", "gone-0"}, why
        said = "stale" if why == "stale-empty-list" else "the answer is not a RedisList"
        assert any(said in e for e in result.summary["errors"]), (why, result.summary["errors"])
    assert rewriter.rewritten >= len(REWRITES)

    # Really deleted: the finalizer removed by hand, so no pass of ours saw it go.
    kubectl.run(
        "patch", "redis", "gone", "-n", ns, "--type=merge", "-p", '{"metadata":{"finalizers":null}}'
    )
    kubectl.run("delete", "redis", "gone", "-n", ns, "--wait=true")
    rewriter.rewrite = None  # a true LIST: gone is missing, and a GET answers 404

    def gone_pod_deleted() -> bool:
        through.sync(ns, expect=None)
        return _pods(kubectl, ns) == {"keep-0"}

    # The garbage collector may delete gone-0 before a pass does; either way
    # keep-0 stays, and the passes through the proxy end clean.
    wait_for(gone_pod_deleted, what="gone-0 to be deleted and keep-0 kept", timeout=60)
    assert through.sync(ns).code == 0
