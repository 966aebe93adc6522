"""An HTTP CONNECT proxy on loopback, as a bastion's egress proxy: it resolves
names the client cannot (``hosts``), and notes every tunnel it opened."""

from __future__ import annotations

import select
import socket
import socketserver
import threading
from collections.abc import Mapping


class _Tunnel(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        proxy: ConnectProxy = self.server  # type: ignore[assignment]
        client: socket.socket = self.request
        head = b""
        while b"\r\n\r\n" not in head:
            piece = client.recv(4096)
            if not piece:
                return
            head += piece
        method, target, _ = head.split(b"\r\n", 1)[0].decode().split(" ", 2)
        host, _, port = target.rpartition(":")
        if method != "CONNECT":
            client.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
            return
        proxy.tunnels.append(target)
        try:
            upstream = socket.create_connection((proxy.hosts.get(host, host), int(port)), 5)
        except OSError:
            client.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            return
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        with upstream:
            _pipe(client, upstream)


def _pipe(a: socket.socket, b: socket.socket) -> None:
    peers = {a: b, b: a}
    while True:
        readable, _, _ = select.select(list(peers), [], [], 30)
        if not readable:
            return
        for sock in readable:
            data = sock.recv(65536)
            if not data:
                return
            peers[sock].sendall(data)


class ConnectProxy(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, hosts: Mapping[str, str] | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _Tunnel)
        self.hosts = dict(hosts or {})
        self.tunnels: list[str] = []  # host:port of each CONNECT
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self) -> ConnectProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()
