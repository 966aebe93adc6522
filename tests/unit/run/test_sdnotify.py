import socket

from reconciler.run.sdnotify import Status, notify, one_line


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


def test_a_status_is_one_line_whatever_the_error_holds():
    assert one_line("pass p: 403 Forbidden:\n  no\tway ") == "pass p: 403 Forbidden: no way"


def test_the_status_line_keeps_every_cluster_not_ready_until_it_is_ready(monkeypatch):
    sent: list[str] = []
    monkeypatch.setattr("reconciler.run.sdnotify.notify", sent.append)
    status = Status()
    assert status.say("", "pass p ok", None) == "pass p ok"
    status.say("eu", "pass p unreachable", "no pass has reached\nthe cluster")
    status.say("us", "pass q ok", None)
    assert sent[-1] == "STATUS=[eu] not ready: no pass has reached the cluster"
    status.say("us", "pass q unreachable", "refused")
    both = "[eu] not ready: no pass has reached the cluster; [us] not ready: refused"
    assert sent[-1] == f"STATUS={both}"
    status.say("eu", "pass r ok", None)
    status.say("us", "pass s ok", None)
    assert sent[-1] == "STATUS=[us] pass s ok"
