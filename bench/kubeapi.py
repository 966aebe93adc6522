"""A deliberately small Kubernetes HTTP client for the benchmark harness.

The harness must not share code paths with the thing it measures, so it talks
to the apiserver with plain ``requests`` (one keep-alive session per thread,
gzip) instead of ``reconciler.client.kube``. Everything goes to the local cluster on
127.0.0.1; proxies from the environment are ignored on purpose.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import requests

T = TypeVar("T")
R = TypeVar("R")

REDIS_PATH = "/apis/myapp.demo.kubebuilder.io/v1"
XCA_PATH = "/apis/apps.xca.k8s.kb.cx/v1beta1"
CORE_PATH = "/api/v1"
POLICY_PATH = "/apis/policy/v1"
MERGE_PATCH = "application/merge-patch+json"


class ApiFailure(RuntimeError):
    """A request the harness needed (not one being measured) failed."""


@dataclass(frozen=True)
class Request:
    """One HTTP request, prepared ahead of time so sending it involves no logic."""

    method: str
    path: str
    body: Mapping[str, Any] | None = None
    content_type: str = "application/json"


class Api:
    """Thread-safe: every thread lazily gets its own keep-alive ``requests.Session``."""

    def __init__(self, server: str, token: str, ca_file: Path | str, timeout: float = 30.0):
        self.server = server.rstrip("/")
        self.token = token
        self.ca_file = str(ca_file)
        self.timeout = timeout
        self._local = threading.local()

    def session(self) -> requests.Session:
        sess = getattr(self._local, "session", None)
        if sess is None:
            sess = self.new_session()
            self._local.session = sess
        return sess

    def new_session(self) -> requests.Session:
        """A fresh session (watch streams hold theirs for a long time)."""
        sess = requests.Session()
        sess.trust_env = False  # loopback only: never route through a proxy
        sess.verify = self.ca_file
        sess.headers.update(
            {
                "Authorization": f"Bearer {self.token}",
                "Accept": "application/json",
                "Accept-Encoding": "gzip",
                "User-Agent": "reconciler-bench",
            }
        )
        return sess

    def send(self, req: Request) -> requests.Response:
        """Send one prepared request; the caller decides what a status code means."""
        return self.session().request(
            req.method,
            self.server + req.path,
            json=req.body,
            headers={"Content-Type": req.content_type},
            timeout=self.timeout,
        )

    def call(self, req: Request, ok: Sequence[int] = (200, 201)) -> dict[str, Any]:
        """Send and return the JSON body; anything outside ``ok`` is a harness failure."""
        resp = self.send(req)
        if resp.status_code not in ok:
            raise ApiFailure(f"{req.method} {req.path}: {resp.status_code} {resp.text[:300]}")
        return resp.json() if resp.content else {}


def parallel(fn: Callable[[T], R], items: Iterable[T], workers: int = 8) -> list[R]:
    """Run ``fn`` over ``items`` on a small pool, results in input order."""
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="bench") as pool:
        return list(pool.map(fn, items))


def create_namespace(api: Api, name: str) -> None:
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    api.call(Request("POST", f"{CORE_PATH}/namespaces", body))


def redis_body(namespace: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "myapp.demo.kubebuilder.io/v1",
        "kind": "Redis",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"port": 6379, "num": 3},
    }


def xca_body(namespace: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps.xca.k8s.kb.cx/v1beta1",
        "kind": "Xca",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"foo": "bar"},
    }


def populate(api: Api, namespace: str, n: int) -> tuple[list[dict], list[dict]]:
    """Create the namespace, N Redis and N Xca objects; return the created objects.

    Creation is not measured, so it simply uses 8 concurrent POSTs.
    """
    create_namespace(api, namespace)
    redis = [
        Request(
            "POST", f"{REDIS_PATH}/namespaces/{namespace}/redis", redis_body(namespace, f"r{i}")
        )
        for i in range(n)
    ]
    xcas = [
        Request("POST", f"{XCA_PATH}/namespaces/{namespace}/xcas", xca_body(namespace, f"x{i}"))
        for i in range(n)
    ]
    created = parallel(api.call, redis + xcas)
    return created[:n], created[n:]
