import socket

from reconciler.run.sdnotify import notify


def test_no_socket_is_a_no_op():
    assert notify("READY=1", {}) is False


def test_sends_datagram_to_path_socket(tmp_path):
    path = str(tmp_path / "notify")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as srv:
        srv.bind(path)
        assert notify("READY=1", {"NOTIFY_SOCKET": path})
        assert srv.recv(100) == b"READY=1"


def test_abstract_socket_name(tmp_path):
    name = f"reconciler-test-{id(tmp_path)}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as srv:
        srv.bind("\0" + name)
        assert notify("WATCHDOG=1", {"NOTIFY_SOCKET": "@" + name})
        assert srv.recv(100) == b"WATCHDOG=1"
