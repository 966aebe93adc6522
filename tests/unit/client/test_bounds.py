"""Bounded input (issue 64, point 3, the transport's part): a body held
whole, as sent and inflated, a chunk, a length, the header fields. Past a
bound is a TransportError of that request, never an OverflowError, a
MemoryError, or gigabytes held."""

from __future__ import annotations

import functools
import gzip
import zlib
from pathlib import Path

import pytest

from reconciler.client import errors, kube, pykube_session
from reconciler.client.http_read import MAX_HELD, PIECE
from reconciler.client.transport import Direct, TransportError
from reconciler.config import Config
from tests.unit.client.test_transport import _canned, _kubeconfig

OK = b"HTTP/1.1 200 OK\r\n"


@functools.cache
def _bomb() -> bytes:
    """128 MiB of zeros, gzipped to 128 kB: a thousandfold."""
    return zlib.compress(bytes(2 * MAX_HELD), 1, wbits=31)


def _bombed() -> bytes:
    return OK + b"Content-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(_bomb()) + _bomb()


def _get(answer: bytes, sink: object = None) -> object:
    url, _ = _canned([answer])
    direct = Direct(url, None, timeout=5, compression=True)
    return direct.send("GET", "/api/v1/namespaces/ns/pods/p", None, {}, sink)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        (None, "inflates past"),  # the bomb
        (OK + b"Transfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\nabc", "a chunk of"),
        (OK + b"Content-Length: 1000000000000\r\n\r\nabc", "a body of 1000000000000 bytes"),
        (OK + b"Content-Length: 1%s\r\n\r\n" % (b"0" * 40), "a length of 41 digits"),
        (OK + b"X-A: b\r\n" * 101 + b"Content-Length: 0\r\n\r\n", "more than 100 header"),
    ],
    ids=["gzip-bomb", "chunk-size", "content-length", "length-digits", "headers"],
)
def test_an_answer_past_a_bound_is_a_transport_error(answer: bytes | None, says: str) -> None:
    with pytest.raises(TransportError, match=says):
        _get(answer or _bombed())


def test_a_body_held_whole_is_bounded_however_it_is_framed() -> None:
    """Chunks each within bounds, past MAX_HELD together."""
    chunk = bytes(1 << 20)
    chunks = b"%x\r\n%s\r\n" % (len(chunk), chunk) * (MAX_HELD // len(chunk) + 1)
    with pytest.raises(TransportError, match="a body past the"):
        _get(OK + b"Transfer-Encoding: chunked\r\n\r\n" + chunks + b"0\r\n\r\n")


def test_a_body_given_to_a_sink_is_not_bounded_but_inflates_a_piece_at_a_time() -> None:
    """A LIST read as it arrives is never held: the bomb reaches the sink
    whole, never more than a piece at once."""
    sizes: list[int] = []
    got = _get(_bombed(), lambda piece: sizes.append(len(piece)))
    assert got.status == 200 and got.received == len(_bomb())  # type: ignore[attr-defined]
    assert sum(sizes) == 2 * MAX_HELD and max(sizes) <= PIECE


def test_a_chunk_given_to_a_sink_is_bounded_too() -> None:
    with pytest.raises(TransportError, match="a chunk of"):
        _get(OK + b"Transfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\nabc", lambda p: None)


def test_a_gzip_body_within_bounds_still_inflates() -> None:
    body = b'{"kind":"Pod"}' * 1000
    zipped = gzip.compress(body)
    answer = OK + b"Content-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(zipped) + zipped
    assert _get(answer).body == body  # type: ignore[attr-defined]


def test_pykubes_session_holds_no_more_than_direct(tmp_path: Path) -> None:
    """An auth provider's or an https proxy's requests go through requests:
    the same bomb is a TransportError there too, not 128 MiB held."""
    url, _ = _canned([_bombed()])
    client = kube.Kube(Config(kubeconfig=_kubeconfig(tmp_path, url, {"token": "t"})))
    client.transport = pykube_session.PykubeSession(client.kube_config, client.settings, None)
    with pytest.raises(errors.Unreachable, match="a body past the 67108864 bytes we hold"):
        client.send("GET", "/api/v1/namespaces/ns/pods/p")
