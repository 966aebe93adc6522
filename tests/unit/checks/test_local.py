"""The host's checks: the state file's directory and the metrics address."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

from reconciler.checks import local
from reconciler.config import Config
from reconciler.kinds.redis.settings import RedisSettings


def test_no_state_file_and_no_metrics_address_are_not_checked():
    assert local.state_file(Config()) is None
    assert local.metrics_address(Config()) is None


def test_a_writable_state_directory_passes_and_leaves_nothing(tmp_path: Path):
    check = local.state_file(Config(state_file=str(tmp_path / "state.json")))
    assert check is not None and check.ok, check
    assert list(tmp_path.iterdir()) == []


def test_a_missing_state_directory_the_save_can_make_passes(tmp_path: Path):
    check = local.state_file(Config(state_file=str(tmp_path / "a" / "b" / "state.json")))
    assert check is not None and check.ok, check
    assert (
        check.detail == f"{tmp_path / 'a' / 'b'} is missing; the first save makes it in {tmp_path}"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_state_directory_that_cannot_be_made_fails_with_the_fix(tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("")  # a file where a directory would have to be
    check = local.state_file(Config(state_file=str(blocker / "sub" / "state.json")))
    assert check is not None and not check.ok
    assert check.detail == f"{blocker / 'sub'} is missing and {blocker} is not writable"
    assert check.fix.startswith(f"mkdir -p {blocker / 'sub'} ")


def test_a_state_directory_that_is_not_a_directory_fails(tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    check = local.state_file(Config(state_file=str(blocker / "state.json")))
    assert check is not None and not check.ok
    assert check.detail.startswith(f"{blocker} is not writable: ")


def test_a_free_address_passes():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    check = local.metrics_address(Config(metrics_address=f"127.0.0.1:{port}"))
    assert check is not None and check.ok and check.detail.endswith("can be bound")


def test_an_address_another_program_holds_fails():
    with socket.create_server(("127.0.0.1", 0)) as held:
        port = held.getsockname()[1]
        check = local.metrics_address(Config(metrics_address=f"127.0.0.1:{port}"))
    assert check is not None and not check.ok
    assert "cannot be bound" in check.detail and "--metrics-address" in check.fix


class _Health(BaseHTTPRequestHandler):
    code = 503

    def do_GET(self) -> None:
        self.send_response(self.code if self.path == "/healthz" else 404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_an_address_a_running_reconciler_serves_passes():
    server = HTTPServer(("127.0.0.1", 0), _Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        check = local.metrics_address(Config(metrics_address=f"127.0.0.1:{port}"))
    finally:
        server.shutdown()
        server.server_close()
    assert check is not None and check.ok
    assert check.detail.endswith("a reconciler serves /healthz there")


def test_an_empty_image_list_is_a_warning_with_its_fix_and_a_list_passes():
    empty = local.redis_images(Config())
    assert empty.ok and empty.warning and "may run any image" in empty.detail
    assert empty.fix == "set allowed_images to the repositories your Redis pods may use"
    listed = Config(kind_settings=(RedisSettings(allowed_images=("redis",)),))
    check = local.redis_images(listed)
    assert check.ok and not check.warning and check.detail == "allowed_images: redis"
