"""A server on loopback for the length of a test, in a thread of its own."""

from __future__ import annotations

import socketserver
import threading
from collections.abc import Iterator
from typing import TypeVar

S = TypeVar("S", bound=socketserver.BaseServer)


def serving(server: S) -> Iterator[S]:
    """Serve until the generator is closed (a fixture's teardown), then close."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
