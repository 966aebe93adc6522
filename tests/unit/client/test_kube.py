"""reconciler/client/kube.py against a loopback server that throttles:
what a 429 becomes, and the Lease requests' budget of their own."""

from __future__ import annotations

import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from reconciler.client import accounting, errors, kube
from reconciler.config import Config
from tests.unit.loopback import serving

THROTTLED = b'{"kind":"Status","reason":"TooManyRequests","message":"too many requests"}'


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _answer(self) -> None:
        server: _Throttling = self.server  # type: ignore[assignment]
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        server.seen.append(f"{self.command} {self.path.split('?')[0]}")
        code, body = (429, THROTTLED) if server.throttle else (200, b"{}")
        retry_after: str | None = "0" if code == 429 else None
        if self.command == "POST" and server.eviction is not None:
            code, body, retry_after = server.eviction
        self.send_response(code)
        if retry_after is not None:
            self.send_header("Retry-After", retry_after)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_PATCH = do_POST = _answer


class _Throttling(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.throttle = True
        self.seen: list[str] = []
        # What a POST (an eviction) is answered: code, body, Retry-After.
        self.eviction: tuple[int, bytes, str | None] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@pytest.fixture
def server() -> Iterator[_Throttling]:
    yield from serving(_Throttling())


def client(server: _Throttling, tmp_path: Path, **settings: object) -> kube.Kube:
    doc = {
        "clusters": [{"name": "c", "cluster": {"server": server.url}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    (tmp_path / "config").write_text(yaml.safe_dump(doc))
    return kube.Kube(Config(kubeconfig=str(tmp_path / "config"), **settings))  # type: ignore[arg-type]


def test_a_429_past_the_retries_is_throttled_not_a_plain_api_error(
    server: _Throttling, tmp_path: Path
) -> None:
    c = client(server, tmp_path, max_retries=2)
    with pytest.raises(errors.Throttled) as raised:
        c.merge_patch(kube.LEASES, "ns", "x", {})
    assert raised.value.status == 429 and len(server.seen) == 3


def test_a_write_stops_retrying_once_it_is_no_longer_ours(
    server: _Throttling, tmp_path: Path
) -> None:
    class Lost:
        def may_write(self, owner_uid: str | None = None) -> bool:
            return False

    c = client(server, tmp_path, max_retries=5).fenced(Lost())
    with pytest.raises(errors.Throttled):
        c.merge_patch(kube.LEASES, "ns", "x", {})
    assert len(server.seen) == 1
    unfenced = client(server, tmp_path, max_retries=1)
    with pytest.raises(errors.Throttled):
        unfenced.merge_patch(kube.LEASES, "ns", "x", {})
    assert len(server.seen) == 3  # one retry: nothing fenced it


def test_lease_requests_do_not_wait_behind_the_passes_budget(
    server: _Throttling, tmp_path: Path
) -> None:
    server.throttle = False
    passes = client(server, tmp_path, qps=0.5, burst=1, max_retries=0)
    leases = passes.with_budget(5.0, 10, 0)
    passes.version()  # the pass's one token is spent: its next request waits 2 s
    started = time.monotonic()
    leases.get(kube.LEASES, "ns", "reconciler")
    assert time.monotonic() - started < 1.0
    assert leases.settings.max_retries == 0 and passes.settings.max_retries == 0
    assert leases.stats is passes.stats  # one count of requests per process


def test_each_apiserver_warning_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    said = accounting.Warnings()
    header = '299 - "unknown field \\"status.lastProgressTime\\"", 299 - "v1beta1 is deprecated"'
    said.say(header)
    said.say('299 - "v1beta1 is deprecated"')
    assert [r.getMessage() for r in caplog.records] == [
        'the apiserver warns: unknown field "status.lastProgressTime"',
        "the apiserver warns: v1beta1 is deprecated",
    ]


def test_only_429_and_503_with_retry_after_are_throttling() -> None:
    assert errors.throttled(429, None) and errors.throttled(503, 1.0)
    assert not errors.throttled(503, None) and not errors.throttled(500, 1.0)


BUDGET = (
    b'{"kind":"Status","reason":"TooManyRequests","message":"Cannot evict pod as it would '
    b'violate the pod\'s disruption budget.","details":{"causes":[{"reason":'
    b'"DisruptionBudget","message":"The disruption budget r needs 2 healthy pods and has 2 '
    b'currently"}]}}'
)
SEVERAL = (
    b'{"kind":"Status","reason":"InternalError","message":"This pod has more than one '
    b'PodDisruptionBudget, which the eviction subresource does not support."}'
)


@pytest.mark.parametrize(
    ("answer", "raised", "says"),
    [
        ((429, BUDGET, None), errors.EvictionRefused, "The disruption budget r needs 2"),
        ((500, SEVERAL, None), errors.EvictionRefused, "more than one PodDisruptionBudget"),
        ((429, THROTTLED, "1"), errors.Throttled, "too many requests"),
    ],
)
def test_an_eviction_is_asked_once_and_a_budget_s_refusal_is_told_from_load(
    server: _Throttling,
    tmp_path: Path,
    answer: tuple[int, bytes, str | None],
    raised: type[Exception],
    says: str,
) -> None:
    """Neither is retried in place: a budget with no room stays so until pods
    turn Ready, which a later pass sees; APF's 429 is the pass's to handle."""
    server.eviction = answer
    c = client(server, tmp_path, max_retries=3)
    with pytest.raises(raised) as caught:
        c.evict("ns", "r-0", "uid-0")
    assert type(caught.value) is raised
    assert says in (
        caught.value.why if isinstance(caught.value, errors.EvictionRefused) else str(caught.value)
    )
    assert server.seen == ["POST /api/v1/namespaces/ns/pods/r-0/eviction"]
