"""A real redis-server started as a pod starts it, and what it then does.

The pod's arguments and environment come from the planner's own manifest
(`pod_manifest`); ``$(VAR)`` is expanded as the kubelet expands a
container's arguments (`kubelet_expand`). The server then runs in a fresh
directory with only loopback traffic, and `Run.breaches` says each way it
escaped the spec: a client served without the password, another port or
address, another directory, or the password or a planted file's contents in
its output.

Two arguments of the harness's own, and why:
  - ``--bind 127.0.0.1`` goes BEFORE the pod's arguments, so that a later
    ``--bind`` smuggled in by a directive would win, and be seen (the bound
    addresses are read from /proc, not from the server);
  - the pod's ``--port N`` (N in spec.port's 6370..6380) has its value
    replaced by a free port the kernel picks, so that parallel tests and
    anything else on the machine never collide; only that one value is
    changed, and the server must listen on it alone.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from reconciler.kinds.redis.pods import pod_manifest
from reconciler.kinds.redis.spec import validate_spec
from tests.unit.builders import redis

IMAGE = "redis:7"
SECRET = "creds"
MARKER = "planted-" + secrets.token_hex(8)  # in a file a directive might read
START_SECONDS = 5.0


def redis_server() -> str:
    """Debian's redis-server, which `make deps` installs. `make test-unit`
    needs no apt-get, so there its absence skips; under `make test`
    (REQUIRE_SYSTEM_TOOLS=1) it fails."""
    path = shutil.which("redis-server")
    if not path and not os.environ.get("REQUIRE_SYSTEM_TOOLS"):
        pytest.skip("redis-server not found; `bash hack/deps.sh` installs it")
    assert path, "redis-server not found; run `bash hack/deps.sh`"
    return path


def kubelet_expand(text: str, env: Mapping[str, str]) -> str:
    """A container argument as the kubelet makes it: ``$(NAME)`` becomes the
    variable's value when the container defines NAME and stays as written
    when not, ``$$`` becomes ``$``, any other ``$`` stays."""
    out, i = [], 0
    while i < len(text):
        if text[i] != "$" or i + 1 == len(text):
            out.append(text[i])
            i += 1
        elif text[i + 1] == "$":
            out.append("$")
            i += 2
        elif text[i + 1] == "(" and ")" in text[i + 2 :]:
            end = text.index(")", i + 2)
            name = text[i + 2 : end]
            out.append(env[name] if name in env else text[i : end + 1])
            i = end + 1
        else:
            out.append(text[i : i + 2])
            i += 2
    return "".join(out)


@dataclass(frozen=True)
class PodArgs:
    args: tuple[str, ...]  # as in the manifest, before the kubelet
    env: Mapping[str, str]  # the container's variables, the Secret's value in


def pod_args(config: Sequence[str], password: str, port: int = 6379) -> PodArgs:
    """The server container's arguments and variables for a Redis with these
    directives and a password, from the planner's manifest."""
    fields = {
        "num": 1,
        "port": port,
        "config": list(config),
        "auth": {"passwordSecret": {"name": SECRET}},
    }
    check = validate_spec(fields, IMAGE)
    assert check.spec is not None, check.errors
    manifest = pod_manifest(redis(num=1, spec=fields), check.spec, 0)
    (container,) = [c for c in manifest["spec"]["containers"] if c["name"] == "redis"]
    env = {}
    for variable in container.get("env", []):
        assert variable["valueFrom"]["secretKeyRef"]["name"] == SECRET
        env[variable["name"]] = password
    return PodArgs(tuple(container["args"]), env)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(pid: int) -> set[tuple[str, int]]:
    """The TCP addresses the process listens on, from /proc (not from it);
    none once it has exited."""
    try:
        return _sockets(pid)
    except FileNotFoundError:
        return set()


def _sockets(pid: int) -> set[tuple[str, int]]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                address, port = fields[1].split(":")
                found.add((_address(address), int(port, 16)))
    return found


def _address(hex_address: str) -> str:
    raw = bytes.fromhex(hex_address)
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw[::-1])
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
    return socket.inet_ntop(socket.AF_INET6, words)


def _command(sock: socket.socket, *words: str) -> object:
    """One command in RESP and its reply: a str, an error as ``-...``, a list."""
    payload = f"*{len(words)}\r\n" + "".join(f"${len(w.encode())}\r\n{w}\r\n" for w in words)
    sock.sendall(payload.encode())
    return _reply(sock.makefile("rb"))


def _reply(stream) -> object:
    line = stream.readline().decode().rstrip("\r\n")
    kind, rest = line[:1], line[1:]
    if kind == "+" or kind == ":":
        return rest
    if kind == "-":
        return line
    if kind == "$":
        size = int(rest)
        return None if size < 0 else stream.read(size + 2)[:-2].decode()
    if kind == "*":
        return [_reply(stream) for _ in range(int(rest))]
    raise AssertionError(f"not RESP: {line!r}")


@dataclass(frozen=True)
class Run:
    """What one server did: ``breaches`` lists each way it escaped."""

    breaches: tuple[str, ...]
    output: str
    config: Mapping[str, str]


def start(args: Sequence[str], env: Mapping[str, str], workdir: Path) -> Run:
    """Runs redis-server as the pod would (the kubelet's expansion, the
    harness's two arguments), checks it, and always stops it."""
    expanded = [kubelet_expand(a, env) for a in args]
    assert expanded[0] == "--port", expanded
    port = free_port()
    expanded[1] = str(port)
    (workdir / "planted.conf").write_text(f"{MARKER}\n")
    log = workdir / "output.txt"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [redis_server(), "--bind", "127.0.0.1", *expanded],
            cwd=workdir,
            env={"PATH": os.environ.get("PATH", ""), **env},
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            breaches, config = _judge(server, port, env, workdir)
        finally:
            server.kill()
            server.wait(timeout=10)
    output = log.read_text(errors="replace")
    secret_words = [v for v in env.values() if v]
    breaches += [f"printed the password: {output!r}" for v in secret_words if v in output][:1]
    if MARKER in output:
        breaches.append(f"printed a file's contents: {output!r}")
    return Run(tuple(breaches), output, config)


def _wait(server: subprocess.Popen[bytes]) -> set[tuple[str, int]]:
    """Where the server listens once it listens anywhere; empty if it exits
    (or never listens) first."""
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline and server.poll() is None:
        found = _listening(server.pid)
        if found:
            return found
        time.sleep(0.02)
    return set()


def _judge(server, port, env, workdir) -> tuple[list[str], dict[str, str]]:
    listening = _wait(server)
    if not listening:
        return [], {}  # it never served: no client reached it
    breaches = []
    if listening != {("127.0.0.1", port)}:
        breaches.append(f"listens on {sorted(listening)}, not 127.0.0.1:{port} alone")
    if ("127.0.0.1", port) not in listening:
        return breaches, {}
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        answer = _command(sock, "PING")
        if answer != "-NOAUTH Authentication required.":
            breaches.append(f"answered PING without the password: {answer!r}")
        auth = _command(sock, "AUTH", env.get("REDIS_PASSWORD", ""))
        if auth != "OK":
            breaches.append(f"refused the password: {auth!r}")
        config = {}
        for name in CONFIG_READ:
            reply = _command(sock, "CONFIG", "GET", name)
            config[name] = reply[1] if isinstance(reply, list) and len(reply) == 2 else str(reply)
    if config.get("dir") != str(workdir.resolve()):
        breaches.append(f"works in {config.get('dir')!r}, not {workdir}")
    breaches += [f"{name} is {config[name]!r}" for name in CLOSED if config.get(name) != "no"]
    return breaches, config


CLOSED = ("enable-debug-command", "enable-module-command", "enable-protected-configs")
CONFIG_READ = ("dir", "port", "maxmemory", "maxmemory-policy", "save", "appendonly", *CLOSED)


def served(run: Run) -> bool:
    return bool(run.config)


if __name__ == "__main__":  # by hand: python -m tests.unit.kinds.redis.real_server 'hz 10'
    made = pod_args(sys.argv[1:], secrets.token_hex(16))
    print(start(made.args, made.env, Path(os.getcwd())))
