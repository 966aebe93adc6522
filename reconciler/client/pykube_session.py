"""pykube's requests session, for what only it knows (auth providers, https
proxies), and the Transport both it and ``transport.Direct`` are.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, Protocol

from reconciler.client import kubeconfig
from reconciler.client.transport import MAX_HELD, PIECE, Response, Sink, TransportError
from reconciler.config import Config


class Transport(Protocol):
    def send(
        self,
        method: str,
        target: str,
        body: bytes | None,
        headers: Mapping[str, str],
        sink: Sink | None = None,
    ) -> Response: ...


class PykubeSession:
    """pykube's requests session per thread, for what only it knows: auth
    providers, and https proxies (TLS inside TLS), at about three times the
    CPU per request of ``transport.Direct``. pykube is imported here, only
    when it is needed. requests' timeout is each read's, not the request's:
    ``transport.Direct``'s deadline does not hold here (a body held whole is
    bounded as there)."""

    def __init__(
        self, kube_config: kubeconfig.KubeConfig, settings: Config, proxy: str | None
    ) -> None:
        import pykube

        if kube_config.file is None:
            self.pykube_config = pykube.KubeConfig.from_service_account(kube_config.source)
        else:
            self.pykube_config = pykube.KubeConfig.from_file(str(kube_config.file))
            self.pykube_config.set_current_context(kube_config.context)
        self.server = kube_config.server.rstrip("/")
        self.settings = settings
        self.gzip = compression(settings, kube_config)
        self.proxies = {"http": proxy, "https": proxy} if proxy else {}
        self.local = threading.local()

    def _http(self) -> Any:
        import pykube

        api = getattr(self.local, "api", None)
        if api is None:
            api = pykube.HTTPClient(self.pykube_config, timeout=self.settings.timeout)
            api.session.headers["Accept-Encoding"] = "gzip" if self.gzip else "identity"
            # With trust_env on, requests re-reads the proxy variables and looks
            # for ~/.netrc on every request; the proxy is chosen once, as kubectl does.
            api.session.proxies = dict(self.proxies)
            api.session.trust_env = False
            self.local.api = api
        return api

    def send(
        self,
        method: str,
        target: str,
        body: bytes | None,
        headers: Mapping[str, str],
        sink: Sink | None = None,
    ) -> Response:
        import requests

        try:
            resp = self._http().session.request(
                method,
                self.server + target,
                data=body,
                headers=headers,
                timeout=self.settings.timeout,
                stream=True,  # read here, within MAX_HELD when held whole
            )
            with resp:
                status, reason = resp.status_code, resp.reason or ""
                retry_after = resp.headers.get("Retry-After")
                warning = resp.headers.get("Warning") or ""  # requests joins them with ", "
                if sink is None or not 200 <= status < 300:
                    content = _held(resp)
                    return Response(
                        status,
                        reason,
                        content,
                        retry_after,
                        received=_wire(resp, len(content)),
                        warning=warning,
                    )
                inflated = 0
                for piece in resp.iter_content(PIECE):  # inflated as it arrives
                    sink(piece)
                    inflated += len(piece)
                return Response(status, reason, b"", retry_after, _wire(resp, inflated), warning)
        except requests.exceptions.RequestException as exc:
            raise TransportError(str(exc)) from None
        except OSError as exc:  # the sink's ProtocolError: an answer past a bound
            raise TransportError(str(exc)) from None


def _held(resp: Any) -> bytes:
    """The body whole, inflated as it arrives, up to MAX_HELD bytes (as
    transport.Direct holds it): a few kB of gzip can inflate to gigabytes."""
    parts, size = [], 0
    for piece in resp.iter_content(PIECE):
        size += len(piece)
        if size > MAX_HELD:
            raise TransportError(f"a body past the {MAX_HELD} bytes we hold")
        parts.append(piece)
    return b"".join(parts)


def _wire(resp: Any, fallback: int) -> int:
    """The bytes urllib3 read off the connection for this body (gzipped, when
    it was); ``fallback``, the inflated size, if it cannot say."""
    tell = getattr(resp.raw, "tell", None)
    try:
        return int(tell()) if tell is not None else fallback
    except (OSError, ValueError, TypeError):
        return fallback


def compression(settings: Config, kube_config: kubeconfig.KubeConfig) -> bool:
    """Ask for gzip unless the settings or the kubeconfig's cluster turn it
    off: a cluster entry with ``disable-compression: true`` means it for
    kubectl too."""
    return settings.compression and not kube_config.disable_compression
