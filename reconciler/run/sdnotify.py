"""systemd's notify protocol, without a dependency: one datagram per message.

``$NOTIFY_SOCKET`` may name an abstract socket ("@name"), which Linux spells
with a leading NUL byte.
"""

from __future__ import annotations

import logging
import os
import socket

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
