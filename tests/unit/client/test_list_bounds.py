"""A LIST is bounded everywhere (issue 77, item 5), against an apiserver on
loopback: its pages (a continue token sent before, or more pages than a
LIST can have, fail it), and what a LIST read as it arrives holds (as an
answer held whole is: MAX_HELD). Observe takes each as that kind's failed
LIST, never a crash."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from reconciler.client import errors, kube, paging
from reconciler.client.http_read import MAX_HELD
from reconciler.client.json_wire import pod_page
from reconciler.client.protowire import META_ACCEPT_JSON
from reconciler.client.streams import VersionStream
from reconciler.config import Config
from reconciler.engine.observe.lister import Lister, MetaList
from reconciler.engine.observe.scope import Sorter
from reconciler.model import PODS
from tests.unit.fake_apiserver import Answer, FakeApiserver, a_list, fake_apiserver
from tests.unit.loopback import serving

PODS_PATH = "/api/v1/namespaces/ns/pods"
# Past this many pages the server ends the LIST itself: the old code, which
# followed tokens without end, then returns a list instead of hanging.
GUARD = 60


@pytest.fixture
def api() -> Iterator[FakeApiserver]:
    yield from fake_apiserver()


def _kubeconfig(url: str, tmp_path: Path) -> str:
    doc = {
        "clusters": [{"name": "c", "cluster": {"server": url}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    (tmp_path / "config").write_text(yaml.safe_dump(doc))
    return str(tmp_path / "config")


def _client(api: FakeApiserver, tmp_path: Path, **settings: object) -> kube.Kube:
    config = Config(kubeconfig=str(api.kubeconfig(tmp_path)), max_retries=0, **settings)  # type: ignore[arg-type]
    return kube.Kube(config)


def _paging(tokens: Iterator[str]) -> Callable[[], Answer]:
    """Pages of one pod each, each with the next of ``tokens``, and a last
    page without one after GUARD pages."""
    count = itertools.count(1)

    def answer() -> Answer:
        n = next(count)
        status, body = a_list("PodList", [{"metadata": {"name": f"p{n}", "uid": f"u{n}"}}])
        body["metadata"] = {} if n >= GUARD else {"continue": next(tokens)}
        return status, body

    return answer


def _lists(api: FakeApiserver) -> int:
    return sum(1 for r in api.requests if r == ("GET", PODS_PATH))


def test_continue_tokens_that_go_round_fail_the_list_at_the_first_repeat(
    api: FakeApiserver, tmp_path: Path
) -> None:
    """a, b, a, b ... never ended a LIST (567 MB in 40 s)."""
    api.answer("GET", PODS_PATH, _paging(itertools.cycle(["a", "b"])))
    with pytest.raises(errors.NotAList, match="continue token sent before"):
        _client(api, tmp_path).list(PODS, "ns", page_size=1)
    assert _lists(api) == 3


def test_more_pages_than_a_list_can_have_fail_it(
    api: FakeApiserver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tokens each new, without end: at LIST_OBJECTS_MAX / limit pages,
    and SHORT_PAGES more, the LIST fails."""
    monkeypatch.setattr(paging, "LIST_OBJECTS_MAX", 10)
    monkeypatch.setattr(paging, "SHORT_PAGES", 3)
    api.answer("GET", PODS_PATH, _paging(f"t{n}" for n in itertools.count()))
    with pytest.raises(errors.NotAList, match="pages do not end"):
        _client(api, tmp_path).list(PODS, "ns", page_size=5)
    assert _lists(api) == 2 + 3


def test_the_page_bound_is_past_the_largest_list() -> None:
    """At the 100,000 pods of the scale measured, in JSON pages of 500, the
    bound is far off; a LIST asked in one page has a few pages of slack."""
    assert paging.pages_max(500) >= 10 * 100_000 // 500
    assert paging.pages_max(0) == paging.SHORT_PAGES


def test_a_list_whose_pages_go_round_is_that_kinds_failed_list_not_a_crash(
    api: FakeApiserver, tmp_path: Path
) -> None:
    api.answer("GET", PODS_PATH, _paging(itertools.cycle(["a", "b"])))
    client = _client(api, tmp_path)
    lister = Lister(client, ["ns"], MetaList(META_ACCEPT_JSON, 0), Sorter(None))
    got = lister.list(PODS, None, lambda ns: client.list(PODS, ns, None, pod_page, None, 1))
    assert got is None
    assert lister.malformed == ["Pod"] and lister.gave_up is None
    assert _lists(api) == 3


# A JSON answer to a LIST read as it arrives: 200 MiB of it, in MiB pieces.
HUGE = 200 << 20


class _Huge(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    sent = 0

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        piece = b" " * (1 << 20)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(HUGE))
        self.end_headers()
        try:
            for _ in range(HUGE // len(piece)):
                self.wfile.write(piece)
                type(self).sent += len(piece)
        except OSError:
            pass  # the client stopped reading


def test_a_list_read_as_it_arrives_holds_no_more_than_an_answer_held_whole(
    tmp_path: Path,
) -> None:
    """A JSON answer where protobuf was asked for is held by the stream: past
    MAX_HELD it fails as a held answer that size does (the request's
    transport error), and the rest is not read."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Huge)
    server.daemon_threads = True
    serve = serving(server)
    next(serve)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        config = Config(kubeconfig=_kubeconfig(url, tmp_path), max_retries=0)
        with pytest.raises(errors.Unreachable, match=f"past the {MAX_HELD} bytes"):
            kube.Kube(config).list_streamed(PODS, "ns", VersionStream, META_ACCEPT_JSON)
        assert _Huge.sent < HUGE // 2, f"{_Huge.sent >> 20} MiB sent"
    finally:
        serve.close()
