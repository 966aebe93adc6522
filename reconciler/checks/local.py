"""The checks of this host: the state file's directory and the metrics
address. Nothing here talks to a cluster."""

from __future__ import annotations

import errno
import os
import socket
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

from reconciler.checks import Check, failed, passed, warned
from reconciler.config import Config
from reconciler.kinds.base import settings_of
from reconciler.kinds.redis import images
from reconciler.kinds.redis.settings import DEFAULTS as REDIS_DEFAULTS

STATE = "state file"
METRICS = "metrics address"
IMAGES = "Redis images"


def state_file(config: Config) -> Check | None:
    """A file can be made beside the state file (it is saved by a rename),
    or the directory made where it is missing (the save makes it; under
    systemd, StateDirectory= does at start); None when no state file is set."""
    if not config.state_file:
        return None
    directory = Path(config.state_file).parent
    existing = next(d for d in (directory, *directory.parents) if d.exists())
    fix = (
        f"mkdir -p {directory} and give it to the user the process runs as"
        " (under systemd: StateDirectory= does it)"
    )
    if existing != directory:
        if existing.is_dir() and os.access(existing, os.W_OK | os.X_OK):
            return passed(STATE, f"{directory} is missing; the first save makes it in {existing}")
        return failed(STATE, f"{directory} is missing and {existing} is not writable", fix)
    try:
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".reconciler-check-"):
            pass
    except OSError as exc:
        return failed(STATE, f"{directory} is not writable: {exc.strerror}", fix)
    return passed(STATE, f"{directory} is writable")


def metrics_address(config: Config) -> Check | None:
    """The address can be bound, or a reconciler already serves there (the
    daemon this checks, running); None when no address is set."""
    if not config.metrics_address:
        return None
    # Here, not at the top: the CLI imports this module, and `sync` from cron
    # must not pay for prometheus_client.
    from reconciler.run.metrics import parse_address

    try:
        host, port = parse_address(config.metrics_address)
    except ValueError as exc:
        return failed(METRICS, str(exc), "set --metrics-address to HOST:PORT or :PORT")
    try:
        with socket.create_server((host, port)):
            pass
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE and _serves_health(host or "127.0.0.1", port):
            return passed(METRICS, f"{config.metrics_address}: a reconciler serves /healthz there")
        return failed(
            METRICS,
            f"{config.metrics_address} cannot be bound: {exc.strerror or exc}",
            "choose a free --metrics-address (config key metrics_address)",
        )
    return passed(METRICS, f"{config.metrics_address} can be bound")


def _serves_health(host: str, port: int) -> bool:
    """Whether what listens there answers /healthz as `reconciler run` does."""
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/healthz", timeout=2) as resp:
            return bool(resp.status == 200)
    except urllib.error.HTTPError as exc:
        return exc.code == 503  # a daemon whose passes fail: still the port's owner
    except (OSError, ValueError):
        return False


def redis_images(config: Config) -> Check:
    """Which images a Redis may run: any, unless the setting lists them."""
    allowed = settings_of(config, REDIS_DEFAULTS).allowed_images
    if allowed:
        return passed(IMAGES, f"{images.SETTING}: {', '.join(allowed)}")
    return warned(
        IMAGES,
        f"{images.SETTING} is empty: whoever may create a Redis may run any image "
        "with its Secret (docs/install.md)",
        f"set {images.SETTING} to the repositories your Redis pods may use",
    )
