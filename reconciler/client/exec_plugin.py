"""Credentials from a kubeconfig's exec plugin, as client-go gets them.

Why our own: pykube runs the plugin for every request and refuses
``client.authentication.k8s.io/v1``. Managed clusters (EKS, GKE, AKS) hand
out tokens through plugins that take up to a second a run, so a pass of
eighty requests took over a minute. Here the plugin runs once, its answer is
kept until its ``expirationTimestamp`` (less a small margin) and shared by
every thread; one thread runs it at a time, and a 401 runs it once more.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
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
        now = self.clock()
        cred = parse(self.spec, self._output())
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
    proc = subprocess.Popen(
        argv,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    deadline = time.monotonic() + TIMEOUT
    try:
        stdout, stderr = _read(proc, name, deadline)
        return _Done(proc.wait(max(deadline - time.monotonic(), 0.0)), stdout, stderr)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise CredentialError(f"exec plugin {name}: no answer in {TIMEOUT:g}s") from None
    except BaseException:
        _kill_group(proc)
        raise
    finally:
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


def _read(proc: subprocess.Popen[bytes], name: str, deadline: float) -> tuple[bytes, bytes]:
    """Its stdout (at most STDOUT_MAX) and the end of its stderr, until both
    are closed; subprocess.TimeoutExpired at the deadline."""
    out, err = bytearray(), bytearray()
    with selectors.DefaultSelector() as pipes:
        assert proc.stdout is not None and proc.stderr is not None
        pipes.register(proc.stdout, selectors.EVENT_READ, out)
        pipes.register(proc.stderr, selectors.EVENT_READ, err)
        while pipes.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(name, TIMEOUT)
            for key, _ in pipes.select(left):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    pipes.unregister(key.fileobj)
                key.data.extend(chunk)
            if len(out) > STDOUT_MAX:
                raise CredentialError(
                    f"exec plugin {name}: printed more than {STDOUT_MAX >> 20} MiB; "
                    "an ExecCredential is a few KB"
                )
            del err[:-STDERR_KEPT]
    return bytes(out), bytes(err)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL to the plugin's process group (its session, made at start)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5.0)


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
