"""Which transport carries a kubeconfig's requests: ``transport.Direct``
(HTTP/1.1 on a kept-alive socket per thread, a sixth of the CPU), also
through an http proxy. Only an auth provider or an https proxy goes through
pykube's requests session, one per thread because a ``requests.Session`` is
not thread-safe; pykube and requests are imported only then (about 6 MB of
memory; `pykube_session`, the only module that imports pykube)."""

from __future__ import annotations

import logging
import os

from reconciler.client.credentials import Credentials
from reconciler.client.errors import ConfigMissing
from reconciler.client.kubeconfig import KubeConfig
from reconciler.client.proxy import proxy_for
from reconciler.client.pykube_session import PykubeSession, Transport, compression
from reconciler.client.transport import Direct
from reconciler.config import Config

log = logging.getLogger(__name__)


def transport_for(
    kube_config: KubeConfig, settings: Config, credentials: Credentials, server: str
) -> Transport:
    """``Direct`` when it can send these credentials; else pykube's session.
    A TLS file unreadable or not PEM, or a proxy URL we cannot speak, is
    ConfigMissing naming the kubeconfig."""
    proxy = proxy_for(server, kube_config.proxy_url, os.environ)
    try:
        if kube_config.only_pykube or (proxy or "").startswith("https:"):
            log.debug("sending through pykube's session (an auth provider or an https proxy)")
            return PykubeSession(kube_config, settings, proxy)
        direct = Direct(
            server,
            None,
            settings.timeout,
            compression(settings, kube_config),
            contexts=credentials.context,
            proxy=proxy,
            server_name=kube_config.tls_server_name,
        )
        if direct.https and not kube_config.exec:
            credentials.context()  # a TLS file unreadable or not PEM: say so now
        return direct
    except OSError as exc:  # ssl.SSLError too
        raise ConfigMissing(f"kubeconfig {kube_config.source}: TLS files: {exc}") from None
    except ValueError as exc:  # a proxy URL we cannot speak
        raise ConfigMissing(f"kubeconfig {kube_config.source}: {exc}") from None
