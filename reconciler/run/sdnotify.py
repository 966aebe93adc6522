"""systemd's notify protocol, without a dependency: one datagram per message.

``$NOTIFY_SOCKET`` may name an abstract socket ("@name"), which Linux spells
with a leading NUL byte. `Status` keeps the STATUS= line of a process that
serves several clusters saying which of them is not ready, and why.
"""

from __future__ import annotations

import logging
import os
import socket
import threading

log = logging.getLogger(__name__)


def notify(message: str, environ: dict[str, str] | None = None) -> bool:
    """Send ``message`` (e.g. "READY=1"); a no-op outside systemd."""
    env = os.environ if environ is None else environ
    address = env.get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.connect(address)
            sock.sendall(message.encode())
        return True
    except OSError as exc:
        log.warning("sd_notify %s failed: %s", message.split("=")[0], exc)
        return False


def one_line(text: str) -> str:
    """``text`` with every run of whitespace made one space: a newline in a
    STATUS= would end it, and the rest would be read as other assignments."""
    return " ".join(text.split())


class Status:
    """The process's one STATUS= line, from every cluster's loop. systemd
    keeps the last one sent: a cluster that is not ready stays on the line
    (each such cluster, with its reason) until it is ready again, rather
    than being hidden by another cluster's next pass."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.troubles: dict[str, str] = {}

    def say(self, name: str, line: str, trouble: str | None) -> str:
        """Send the line for cluster ``name`` (empty: the one cluster): its
        last pass, unless some cluster is not ready; the text sent."""
        with self.lock:
            if trouble is None:
                self.troubles.pop(name, None)
            else:
                self.troubles[name] = trouble
            shown = "; ".join(f"{_named(n)}not ready: {t}" for n, t in self.troubles.items())
            text = one_line(shown or f"{_named(name)}{line}")
            notify(f"STATUS={text}")
        return text


def _named(name: str) -> str:
    return f"[{name}] " if name else ""
