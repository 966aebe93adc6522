"""LIST answers read as they arrive: one page of every object (tens of
megabytes at tens of thousands of pods) is never held whole. The protobuf
envelope is read by hand (`reconciler.client.protowire`), and the list in it
parsed a batch of whole items at a time. What a stream holds at once (an
answer in JSON, an envelope, an item not yet whole) is bounded as an answer
held whole is (`MAX_HELD`): past it, a ProtocolError, which fails the
request as a held answer past it does.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Generic, TypeVar

from google.protobuf.message import DecodeError

from reconciler.client.http_read import MAX_HELD, ProtocolError
from reconciler.client.protowire import (
    MAGIC,
    RAW_FIELD,
    TYPE_FIELD,
    field_at,
    kind_of,
    pod_page_reusing,
    pods_in,
    version_page,
    versions_in,
)
from reconciler.model import Known, Page, Pod, Version


class _Stage(Enum):
    """Where a ListStream is in an answer."""

    HEAD = "before the list: the magic and the envelope's first fields"
    LIST = "inside the envelope's raw field"
    TAIL = "after it: nothing there is read"
    JSON = "not protobuf: held whole"


T = TypeVar("T")


HEAD = 64  # bytes of an answer kept to quote it


class ListStream(Generic[T]):
    """A LIST read as it arrives, so that one page of every object (tens of
    megabytes at tens of thousands of pods) is never held whole: the envelope
    is read by hand, and the list inside it is parsed by ``run`` a batch of
    whole items at a time. The items of a list, each a field of its own, are
    themselves a valid list message; so is any run of them, and so is the
    list's metadata field, which holds the continue token.

    A body that is not protobuf (JSON, asked for or from a server that cannot
    send protobuf) is held whole and decoded at the end by ``whole``."""

    BATCH = 1 << 18  # bytes of whole items parsed at once

    def __init__(
        self,
        run: Callable[[memoryview], Page[T]],
        whole: Callable[[bytes | bytearray], Page[T]],
    ) -> None:
        self._run, self._whole_page = run, whole
        self._buf = bytearray()  # bytes received and not yet parsed
        self._stage = _Stage.HEAD
        self._left = 0  # bytes of the list not yet received
        self._whole = 0  # _buf[:_whole] holds whole fields of the list
        self._items: list[T] = []
        self._continue = ""
        self._kind = ""  # as the envelope names it
        self.head = b""  # the answer's first bytes, for an error that quotes it

    def feed(self, piece: bytes) -> None:
        if len(self.head) < HEAD:
            self.head += piece[: HEAD - len(self.head)]
        self._feed(piece)

    def _feed(self, piece: bytes) -> None:
        if self._stage is _Stage.LIST:
            self._buf += piece[: self._left]
            self._left -= min(len(piece), self._left)
            self._bounded()
            self._take()
        elif self._stage in (_Stage.HEAD, _Stage.JSON):
            self._buf += piece
            self._bounded()
            if self._stage is _Stage.HEAD:
                self._open()

    def _bounded(self) -> None:
        """Nothing held past MAX_HELD: a JSON answer of 200 MiB, or one item
        that never ends, is refused as a held answer that size is."""
        if len(self._buf) > MAX_HELD:
            raise ProtocolError(
                f"a LIST answer holding past the {MAX_HELD} bytes we hold ({self._stage.name})"
            )

    def _open(self) -> None:
        """Find where the list starts, once enough of the envelope is here."""
        if len(self._buf) < len(MAGIC):
            return
        if not self._buf.startswith(MAGIC):
            self._stage = _Stage.JSON
            return
        at = len(MAGIC)
        while (field := field_at(self._buf, at)) is not None:
            if field.number == RAW_FIELD and field.wire == 2:
                rest = bytes(self._buf[field.start :])
                self._buf.clear()
                self._stage, self._left = _Stage.LIST, field.end - field.start
                self._feed(rest)
                return
            if field.end > len(self._buf):
                return
            if field.number == TYPE_FIELD and field.wire == 2:
                self._kind = kind_of(self._buf[field.start : field.end])
            at = field.end

    def _take(self) -> None:
        """Parse the whole items received, a batch at a time."""
        while (field := field_at(self._buf, self._whole)) is not None:
            if field.end > len(self._buf):
                break
            self._whole = field.end
        if self._whole >= self.BATCH or (self._left == 0 and self._whole):
            with memoryview(self._buf) as view, view[: self._whole] as run:
                page = self._run(run)
            self._items += page.items
            self._continue = page.continue_token or self._continue
            del self._buf[: self._whole]
            self._whole = 0
        if self._left == 0:
            if self._buf:
                raise DecodeError("the list ends inside an item")
            self._stage = _Stage.TAIL

    def close(self) -> Page[T]:
        """What the whole answer said; an answer cut short is an error."""
        if self._stage is _Stage.LIST:
            raise DecodeError("the answer ends inside the list")
        if self._stage is _Stage.JSON:
            return self._whole_page(self._buf)
        if self._stage is _Stage.HEAD:
            if not self._buf.startswith(MAGIC):  # nothing, or less than the magic
                raise DecodeError(f"an answer of {len(self._buf)} bytes is not a list")
            return self._whole_page(bytes(self._buf))  # an envelope with no list in it
        return Page(self._items, self._continue, self._kind)


class VersionStream(ListStream[Version]):
    """version_page, read as it arrives."""

    def __init__(self, owned: bool = False) -> None:
        super().__init__(
            lambda run: versions_in(run, owned), lambda body: version_page(body, owned)
        )


class PodStream(ListStream[Pod]):
    """pod_page_reusing(known), read as it arrives."""

    def __init__(self, known: Known[Pod]) -> None:
        super().__init__(lambda run: pods_in(run, known), pod_page_reusing(known))
