"""Credentials from a kubeconfig's exec plugin, as client-go gets them.

Why our own: pykube runs the plugin for every request and refuses
``client.authentication.k8s.io/v1``. Managed clusters (EKS, GKE, AKS) hand
out tokens through plugins that take up to a second a run, so a pass of
eighty requests took over a minute. Here the plugin runs once, its answer is
kept until its ``expirationTimestamp`` (less a small margin) and shared by
every thread; one thread runs it at a time, and a 401 runs it once more.

A plugin that fails, fails once: its error is kept for FAILED_FOR, and every
request meanwhile is told it at once, the plugin not run again (a pass of a
hundred requests against a plugin that hangs would otherwise wait a
TIMEOUT for each). Its TIMEOUT is a deadline for the whole run, whatever its
children hold open. Every plugin running is known (`_LIVE`), so a
reconciler that is stopped kills their process groups (`end_all`): on
SIGTERM, SIGINT or SIGHUP (`_on_signal`, installed with the first plugin),
at exit, and when the daemon shuts down.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from types import FrameType
from typing import Any

API_VERSIONS = frozenset(
    {"client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"}
)
INTERACTIVE_MODES = frozenset({"Never", "IfAvailable", "Always"})
# A credential is used until this many seconds before it expires (at most
# half of what it had left when it came: some plugins hand out a minute).
MARGIN = 5.0
# A plugin that has not answered by then is a failed one: a daemon must not
# hang on a login prompt nobody can see. It is killed with its process group.
TIMEOUT = 60.0
# An ExecCredential is a few KB, a certificate chain a few more: a plugin
# that prints more is broken, and is not read into memory without end.
STDOUT_MAX = 1 << 20
# Of its stderr, only the end is kept: its last line says why it failed.
STDERR_KEPT = 4096
# After a plugin has exited, what is left in its pipes is read for this
# long at most: a child it left behind may hold them open for ever.
AFTER_EXIT = 0.5
# A failed run is the answer for this long: each request meanwhile fails at
# once with its error. Long enough for the rest of a pass (whose requests
# then all fail at once), short enough that the next pass runs it again.
FAILED_FOR = 10.0
# A token goes into a header: visible ASCII only (a CR or LF would end the
# header and begin whatever the plugin's output says next).
_TOKEN_CHARS = frozenset(map(chr, range(0x21, 0x7F)))


class CredentialError(Exception):
    """The exec plugin gave no usable credential; the message is one line
    naming the plugin and why."""


@dataclass(frozen=True)
class ExecSpec:
    """A kubeconfig user's ``exec`` section, read and checked."""

    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    api_version: str = "client.authentication.k8s.io/v1"
    install_hint: str | None = None
    interactive_mode: str = "IfAvailable"
    cluster: str | None = None  # the JSON of spec.cluster, when provideClusterInfo

    def exec_info(self) -> str:
        """KUBERNETES_EXEC_INFO: the plugin is never given a terminal."""
        spec: dict[str, Any] = {"interactive": False}
        if self.cluster is not None:
            spec["cluster"] = json.loads(self.cluster)
        return json.dumps({"apiVersion": self.api_version, "kind": "ExecCredential", "spec": spec})


@dataclass(frozen=True)
class Credential:
    """What the plugin answered: a token, or a client certificate and key."""

    token: str | None
    cert_pem: bytes | None
    key_pem: bytes | None
    expires: float | None  # seconds since the epoch; None: until a 401


class ExecPlugin:
    """One plugin's credential, fetched when missing or about to expire."""

    def __init__(self, spec: ExecSpec, clock: Callable[[], float] = time.time) -> None:
        self.spec = spec
        self.clock = clock
        self.lock = threading.Lock()
        self.held: Credential | None = None
        self.renew_at = 0.0
        self.runs = 0  # how many times the plugin ran
        # The last run's error, and until when (time.monotonic) it is the answer.
        self.failure: tuple[str, float] | None = None
        _install_signal_handlers()

    def credential(self) -> Credential:
        """The credential to send now: the kept one while it is fresh."""
        held = self.held
        if held is not None and (held.expires is None or self.clock() < self.renew_at):
            return held
        with self.lock:  # one thread runs the plugin; the others take its answer
            held = self.held
            if held is None or (held.expires is not None and self.clock() >= self.renew_at):
                held = self._fetch()
            return held

    def refused(self, sent: Credential) -> Credential:
        """After a 401 for ``sent``: a new credential, unless another thread
        already got one since."""
        with self.lock:
            if self.held is not None and self.held is not sent:
                return self.held
            return self._fetch()

    def _fetch(self) -> Credential:
        """Run the plugin, unless it failed less than FAILED_FOR ago: then
        its error again, at once."""
        failure = self.failure
        if failure is not None and time.monotonic() < failure[1]:
            raise CredentialError(failure[0])
        now = self.clock()
        try:
            cred = parse(self.spec, self._output())
        except CredentialError as exc:
            self.failure = (str(exc), time.monotonic() + FAILED_FOR)
            raise
        self.failure = None
        self.held = cred
        if cred.expires is not None:
            self.renew_at = cred.expires - min(MARGIN, max(cred.expires - now, 0.0) / 2)
        return cred

    def _output(self) -> bytes:
        spec = self.spec
        name = os.path.basename(spec.command)
        if spec.interactive_mode == "Always":
            raise CredentialError(
                f"exec plugin {name}: interactiveMode Always needs a terminal, and "
                "reconciler runs plugins without one (use IfAvailable or Never)"
            )
        env = {**os.environ, **dict(spec.env), "KUBERNETES_EXEC_INFO": spec.exec_info()}
        self.runs += 1
        try:
            done = _run([spec.command, *spec.args], env, name)
        except FileNotFoundError:
            hint = (spec.install_hint or "").strip().splitlines()
            raise CredentialError(
                f"exec plugin {spec.command}: not found"
                + (f"; {hint[0].strip()}" if hint else " (install it, or fix the PATH)")
            ) from None
        except PermissionError:
            raise CredentialError(f"exec plugin {spec.command}: not executable") from None
        except OSError as exc:  # too many processes or files open
            raise CredentialError(f"exec plugin {name}: cannot run: {exc}") from None
        if done.returncode != 0 and _ENDED.is_set():
            raise CredentialError(f"exec plugin {name}: killed: the reconciler is stopping")
        if done.returncode != 0:
            raise CredentialError(
                f"exec plugin {name} exited {done.returncode}: {_last_line(done.stderr)}"
            )
        return done.stdout


@dataclass(frozen=True)
class _Done:
    returncode: int
    stdout: bytes
    stderr: bytes  # its last STDERR_KEPT bytes


def _run(argv: list[str], env: dict[str, str], name: str) -> _Done:
    """Run the plugin in a session of its own, its output read with a bound
    and the whole run with a deadline. Past either, its whole process group
    is killed: a plugin's children would outlive it, and hold its pipes open."""
    if _ENDED.is_set():
        raise CredentialError(f"exec plugin {name}: not run: the reconciler is stopping")
    proc = subprocess.Popen(
        argv,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    _LIVE[proc.pid] = proc
    deadline = time.monotonic() + TIMEOUT
    try:
        if _ENDED.is_set():  # end_all ran between the check above and _LIVE
            _kill_group(proc)
        stdout, stderr, left_behind = _read(proc, name, deadline)
        if left_behind:  # children holding its pipes: nothing more will come
            _kill_group(proc)
        return _Done(proc.wait(max(deadline - time.monotonic(), 0.0)), stdout, stderr)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise CredentialError(f"exec plugin {name}: no answer in {TIMEOUT:g}s") from None
    except BaseException:
        _kill_group(proc)
        raise
    finally:
        _LIVE.pop(proc.pid, None)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


def _read(proc: subprocess.Popen[bytes], name: str, deadline: float) -> tuple[bytes, bytes, bool]:
    """Its stdout (at most STDOUT_MAX) and the end of its stderr, until both
    are closed, or AFTER_EXIT after the plugin itself has exited (then the
    third value is True: a child it left holds them); subprocess.TimeoutExpired
    at the deadline, whoever holds them."""
    out, err = bytearray(), bytearray()
    until = deadline
    with selectors.DefaultSelector() as pipes, _exit_of(proc) as exit_fd:
        assert proc.stdout is not None and proc.stderr is not None
        pipes.register(proc.stdout, selectors.EVENT_READ, out)
        pipes.register(proc.stderr, selectors.EVENT_READ, err)
        if exit_fd is not None:
            pipes.register(exit_fd, selectors.EVENT_READ, None)
        open_pipes = 2
        while open_pipes:
            left = until - time.monotonic()
            if left <= 0 and until < deadline:
                return bytes(out), bytes(err), True
            if left <= 0:
                raise subprocess.TimeoutExpired(name, TIMEOUT)
            wait = left if exit_fd is not None else min(left, AFTER_EXIT / 5)
            for key, _ in pipes.select(wait):
                if key.data is None:  # the plugin has exited
                    pipes.unregister(key.fileobj)
                    until = min(deadline, time.monotonic() + AFTER_EXIT)
                    continue
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    pipes.unregister(key.fileobj)
                    open_pipes -= 1
                key.data.extend(chunk)
            if exit_fd is None and until == deadline and proc.poll() is not None:
                until = min(deadline, time.monotonic() + AFTER_EXIT)
            if len(out) > STDOUT_MAX:
                raise CredentialError(
                    f"exec plugin {name}: printed more than {STDOUT_MAX >> 20} MiB; "
                    "an ExecCredential is a few KB"
                )
            del err[:-STDERR_KEPT]
    return bytes(out), bytes(err), False


@contextlib.contextmanager
def _exit_of(proc: subprocess.Popen[bytes]) -> Iterator[int | None]:
    """A descriptor readable once ``proc`` has exited (a pidfd, Linux 5.3
    and later); None where there is none, and then the caller polls."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        yield None
        return
    try:
        yield fd
    finally:
        os.close(fd)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL to the plugin's process group (its session, made at start)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5.0)


# The plugins running now, by process group (each its own session's leader,
# so its pid is its group's id). Plain dict operations, atomic under the GIL:
# end_all runs in a signal handler, which may interrupt a thread holding a lock.
_LIVE: dict[int, subprocess.Popen[bytes]] = {}
# Set by end_all: the reconciler is stopping, and no plugin is run again.
_ENDED = threading.Event()


def end_all() -> None:
    """Kill the process group of every plugin running, and run none again:
    the reconciler is stopping, and a plugin (or a child of it) must not
    outlive it, nor hold up its stop for a TIMEOUT."""
    _ENDED.set()  # before the look at _LIVE: a plugin started after it sees the flag
    for pgid in list(_LIVE):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


atexit.register(end_all)


# The signals that stop a reconciler and that it can catch, and what they did
# before our handler was installed (called after it: the exit stays as it was).
_STOPPING = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_BEFORE: dict[int, Any] = {}


def _install_signal_handlers() -> None:
    """Once, in the main thread (the only one that may), and only for
    signals not ignored: kill the plugins, then do what the signal did.
    A handler set later (the daemon's) calls end_all itself."""
    if _BEFORE or threading.current_thread() is not threading.main_thread():
        return
    for signum in _STOPPING:
        before = signal.getsignal(signum)
        if before in (signal.SIG_IGN, None):
            continue
        _BEFORE[signum] = before
        signal.signal(signum, _on_signal)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    """Kill the plugins, then stop as the signal would have stopped us."""
    end_all()
    before = _BEFORE.get(signum, signal.SIG_DFL)
    if callable(before):
        before(signum, frame)  # SIGINT's KeyboardInterrupt
        return
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _last_line(stderr: bytes) -> str:
    lines = [line.strip() for line in stderr.decode("utf-8", "replace").splitlines()]
    lines = [line for line in lines if line]
    return lines[-1][:300] if lines else "(nothing on stderr)"


def parse(spec: ExecSpec, output: bytes) -> Credential:
    """The plugin's ExecCredential, checked as client-go checks it."""
    name = os.path.basename(spec.command)
    try:
        doc = json.loads(output)
    except ValueError:
        raise CredentialError(f"exec plugin {name}: its output is not JSON") from None
    if not isinstance(doc, dict) or doc.get("kind") != "ExecCredential":
        raise CredentialError(f"exec plugin {name}: its output is not an ExecCredential")
    if doc.get("apiVersion") != spec.api_version:
        raise CredentialError(
            f"exec plugin {name}: answered {doc.get('apiVersion')!r}, "
            f"the kubeconfig asks for {spec.api_version!r}"
        )
    status = doc.get("status")
    if not isinstance(status, dict):
        raise CredentialError(f"exec plugin {name}: no status in its ExecCredential")
    token = status.get("token") or None
    cert, key = status.get("clientCertificateData"), status.get("clientKeyData")
    if bool(cert) != bool(key):
        raise CredentialError(f"exec plugin {name}: a client certificate without its key")
    if not token and not cert:
        raise CredentialError(f"exec plugin {name}: neither a token nor a client certificate")
    if token and not _TOKEN_CHARS.issuperset(str(token)):
        raise CredentialError(
            f"exec plugin {name}: its token holds a character a header cannot carry "
            "(a space, a control character, or a byte past ASCII)"
        )
    return Credential(
        token=str(token) if token else None,
        cert_pem=str(cert).encode() if cert else None,
        key_pem=str(key).encode() if key else None,
        expires=_expiry(name, status.get("expirationTimestamp")),
    )


def _expiry(name: str, stamp: object) -> float | None:
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise CredentialError(
            f"exec plugin {name}: expirationTimestamp {stamp!r} is not RFC 3339"
        ) from None
