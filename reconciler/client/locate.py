"""Which kubeconfig to read, as kubectl chooses: --kubeconfig, then
$KUBECONFIG, then ~/.kube/config, then the pod's service account.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from reconciler.client import kubeconfig
from reconciler.client.errors import (
    ConfigMissing,
)
from reconciler.config import Config


def _home_kubeconfig() -> str | None:
    """~/.kube/config if it exists. A service with no home directory (systemd's
    DynamicUser, a pod with a random uid) simply has none."""
    try:
        default = Path("~/.kube/config").expanduser()
    except RuntimeError:
        return None
    return str(default) if default.is_file() else None


def _kubeconfig_path(settings: Config) -> str | None:
    path = settings.kubeconfig or os.environ.get("KUBECONFIG") or _home_kubeconfig()
    if path and not Path(path).is_file():
        source = "--kubeconfig" if settings.kubeconfig else "$KUBECONFIG"
        raise ConfigMissing(f"{source} {path}: no such file")
    return path


def context_names(settings: Config) -> list[str]:
    """Every context of the kubeconfig ``settings`` would read (kubectl's
    ``config get-contexts -o name``); in a pod, there is none to name."""
    path = _kubeconfig_path(settings)
    if not path:
        raise ConfigMissing("--all-contexts: no kubeconfig to read the contexts of")
    try:
        return kubeconfig.context_names(Path(path))
    except kubeconfig.KubeconfigError as exc:
        raise ConfigMissing(str(exc)) from None


def load_kubeconfig(settings: Config) -> kubeconfig.KubeConfig:
    """kubeconfig flag, then $KUBECONFIG or ~/.kube/config, then in-cluster."""
    path = _kubeconfig_path(settings)
    try:
        if path:
            return kubeconfig.from_file(Path(path), settings.context)
        if pod := kubeconfig.in_cluster():
            return pod
    except (kubeconfig.KubeconfigError, OSError) as exc:
        raise ConfigMissing(str(exc)) from None
    raise ConfigMissing(
        "no kubeconfig: pass --kubeconfig, set KUBECONFIG, create ~/.kube/config, "
        "or run in a pod with a service account"
    )


def kubeconfig_reloader(
    settings: Config, kube_config: kubeconfig.KubeConfig
) -> Callable[[], kubeconfig.KubeConfig] | None:
    """Reads the same kubeconfig context again (after a 401); None in a pod."""
    path = kube_config.file
    if path is None:
        return None
    return lambda: kubeconfig.from_file(path, settings.context)
