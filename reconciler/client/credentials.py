"""Who we are to the apiserver, kept current for a process that outlives its
credentials.

A daemon runs for months; its credentials do not. A projected token file is
rewritten every hour, a client certificate is renewed on disk before it
expires, an exec plugin's token lives an hour or a minute, and a kubeconfig's
inline token is replaced by whoever manages it. So the TLS context is
rebuilt when the certificate or key files change (looked at once a second),
the token file is read again when it changes, the exec plugin runs again
when its credential is about to expire, and a 401 re-reads the kubeconfig and
runs the plugin once more before the request is sent again.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import os
import ssl
import threading
import time
from collections.abc import Callable
from pathlib import Path

from reconciler.client import kubeconfig
from reconciler.client.exec_plugin import CredentialError, ExecPlugin, ExecSpec
from reconciler.client.presented import Presented, cert_expiry, token_expiry
from reconciler.client.transport import Tls

log = logging.getLogger(__name__)

# How often the certificate and key files are looked at for a change.
CHECK_EVERY = 1.0


class _TokenFile:
    """Re-reads a rotated token file (a projected service-account token expires)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.mtime = -1.0
        self.token = ""
        self.lock = threading.Lock()

    def header(self) -> str | None:
        try:
            mtime = self.path.stat().st_mtime
        except OSError:
            return None
        with self.lock:
            if mtime != self.mtime:
                self.token = self.path.read_text().strip()
                self.mtime = mtime
            return f"Bearer {self.token}" if self.token else None


def static_auth(config: kubeconfig.KubeConfig) -> str | None:
    """The Authorization header of static credentials, as kubectl would send it."""
    if config.token:
        return f"Bearer {config.token}"
    if config.username and config.password:
        pair = f"{config.username}:{config.password}".encode("latin1")
        return "Basic " + base64.b64encode(pair).decode()
    return None


def _tls(config: kubeconfig.KubeConfig) -> Tls:
    """How the server is verified, and the client certificate's files."""
    ca = os.environ.get("PYKUBE_SSL_CERTIFICATE_AUTHORITY", config.ca_file)
    verify = not config.insecure or ca is not None
    return Tls(ca, verify, config.cert_file, config.key_file)


def _mtime(path: str | None) -> float | None:
    if path is None:
        return None
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


# What of a kubeconfig says who we are: a change of any of it after a 401 is
# worth sending the request again.
def _identity(c: kubeconfig.KubeConfig) -> tuple[object, ...]:
    return (c.token, c.token_file, c.username, c.password, c.cert_file, c.key_file, c.exec)


class Credentials:
    """The Authorization header and the TLS context to send now."""

    def __init__(
        self,
        config: kubeconfig.KubeConfig,
        reload: Callable[[], kubeconfig.KubeConfig] | None = None,
        clock: Callable[[], float] = time.monotonic,
        plugin: Callable[[ExecSpec], ExecPlugin] = ExecPlugin,
    ) -> None:
        """``reload`` reads the kubeconfig again (None in a pod: its files are
        re-read on their own)."""
        self.reload, self.clock, self.make_plugin = reload, clock, plugin
        self.lock = threading.Lock()
        self.generation = 0  # bumped by every change of what is presented
        self._context: ssl.SSLContext | None = None
        self._context_key: tuple[object, ...] | None = None
        self._checked = float("-inf")
        self._context_pem: bytes | None = None  # the plugin's certificate in the context
        # The plugin's certificate and key as written for the TLS context:
        # (certificate, key, their files), the files ours to remove.
        self._plugin_files: tuple[bytes, bytes, str, str] | None = None
        self._take(config)

    def _take(self, config: kubeconfig.KubeConfig) -> None:
        self.config = config
        self.static = static_auth(config)
        self.token_file = _TokenFile(config.token_file) if config.token_file else None
        self.plugin = self.make_plugin(config.exec) if config.exec else None
        self.tls = _tls(config)
        self._checked = float("-inf")

    def authorization(self) -> str | None:
        if self.plugin is not None:
            token = self.plugin.credential().token
            return f"Bearer {token}" if token else None
        if self.token_file is not None and (header := self.token_file.header()):
            return header
        return self.static

    def context(self) -> ssl.SSLContext:
        """The TLS context for a new connection: rebuilt when the client
        certificate changed (on disk, or from the plugin)."""
        cert_pem = None
        if self.plugin is not None:
            cert_pem = self.plugin.credential().cert_pem
        now = self.clock()
        if self._context is not None and now < self._checked and cert_pem is self._context_pem:
            return self._context
        with self.lock:
            return self._rebuild(now)

    def _rebuild(self, now: float) -> ssl.SSLContext:
        tls = self.tls
        held = self.plugin.credential() if self.plugin is not None else None
        if held is not None and held.cert_pem is not None and held.key_pem is not None:
            cert, key_file = self._plugin_tls_files(held.cert_pem, held.key_pem)
            tls = Tls(tls.ca_file, tls.verify, cert, key_file)
        key = (tls, _mtime(tls.ca_file), _mtime(tls.cert_file), _mtime(tls.key_file))
        if self._context is None or key != self._context_key:
            if self._context is not None:
                log.info("client certificate or CA changed: new connections use it")
                self.generation += 1
            self._context, self._context_key = tls.context(), key
        self._context_pem = held.cert_pem if held is not None else None
        self._checked = now + CHECK_EVERY
        return self._context

    def _plugin_tls_files(self, cert_pem: bytes, key_pem: bytes) -> tuple[str, str]:
        """Files holding the plugin's certificate and key, written once per
        credential; those of the credential it replaced are removed (a TLS
        context reads them when it is made, not after)."""
        held = self._plugin_files
        if held is not None and held[:2] == (cert_pem, key_pem) and os.path.exists(held[3]):
            return held[2], held[3]
        cert, key = kubeconfig.new_private_file(cert_pem), kubeconfig.new_private_file(key_pem)
        self._plugin_files = (cert_pem, key_pem, cert, key)
        for old in held[2:] if held is not None else ():
            with contextlib.suppress(OSError):
                os.unlink(old)
        return cert, key

    def refused(self, sent: str | None, generation: int) -> bool:
        """After a 401 for a request sent with ``sent`` at ``generation``:
        whether there is something new to send it again with."""
        with self.lock:
            if generation != self.generation or self._header_now() != sent:
                return True
            changed = self._reloaded() or self._renewed_on_disk()
            if not changed and self.plugin is not None and self.plugin.held is not None:
                self.plugin.refused(self.plugin.held)
                changed = True
            if changed:
                self.generation += 1
                self._checked = float("-inf")
            return changed

    def _header_now(self) -> str | None:
        try:
            return self.authorization()
        except CredentialError:  # the caller hears it when it sends again
            return None

    def _renewed_on_disk(self) -> bool:
        """Whether the certificate files changed since they were last looked at."""
        if self._context is None:
            return False  # no TLS, or no connection made yet
        before = self._context
        self._rebuild(self.clock())
        return self._context is not before

    def _reloaded(self) -> bool:
        """Read the kubeconfig again; take it if who we are has changed."""
        if self.reload is None:
            return False
        try:
            fresh = self.reload()
        except (kubeconfig.KubeconfigError, OSError) as exc:
            log.warning("after a 401, the kubeconfig cannot be read again: %s", exc)
            return False
        if _identity(fresh) == _identity(self.config):
            return False
        log.info("after a 401: the kubeconfig's credentials changed; using them")
        self._take(fresh)
        return True

    def presented(self) -> Presented:
        """Run the exec plugin if there is one (the check is that it runs), and
        read the expiry a token or certificate carries in itself."""
        config = self.config
        if self.plugin is not None:
            name = os.path.basename(self.plugin.spec.command)
            try:
                held = self.plugin.credential()
            except CredentialError as exc:
                return Presented(f"exec plugin {name}", error=str(exc))
            kind = "certificate" if held.cert_pem else "token"
            expires = held.expires or (token_expiry(held.token) if held.token else None)
            return Presented(f"exec plugin {name} ({kind})", expires)
        if config.token_file is not None:
            header = self.token_file.header() if self.token_file else None
            token = header.removeprefix("Bearer ") if header else None
            return Presented(f"token file {config.token_file}", token_expiry(token))
        if config.token:
            return Presented("bearer token", token_expiry(config.token))
        if config.cert_file:
            expires = cert_expiry(config.cert_file)
            return Presented(f"client certificate {config.cert_file}", expires)
        if config.username:
            return Presented("basic auth")
        if config.only_pykube:
            return Presented("auth provider")
        return Presented("none (anonymous)")
