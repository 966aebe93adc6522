"""Reads the client's connection settings: a kubeconfig context, or the pod's
service account.

Why not pykube's KubeConfig: importing pykube imports requests, about 6 MB
of resident memory and a fifth of a second of start-up that a daemon or a
cron job with static credentials never uses. pykube is imported only for
what it alone knows (exec plugins, auth providers, proxies); see
``reconciler.client.kube``. Only reconciler.client.kube imports this module.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class KubeconfigError(Exception):
    """The kubeconfig cannot be used; the message names the file and the field."""


@dataclass(frozen=True)
class KubeConfig:
    """One context of a kubeconfig, resolved: files are absolute paths, and
    inline ``*-data`` certificates are written to private files."""

    source: str  # the kubeconfig's path, or the service-account directory
    file: Path | None  # the kubeconfig; None in a pod
    context: str | None
    server: str
    namespace: str | None
    ca_file: str | None = None
    insecure: bool = False
    cert_file: str | None = None
    key_file: str | None = None
    token: str | None = None
    token_file: Path | None = None
    username: str | None = None
    password: str | None = None
    only_pykube: bool = False  # exec plugin, auth provider or tls-server-name
    disable_compression: bool = False  # the cluster's disable-compression, as kubectl reads it


def from_file(path: Path, context: str | None = None) -> KubeConfig:
    """The named context of ``path``, or its current context."""
    doc = _read(path)
    contexts = _contexts(doc)
    name = context or doc.get("current-context")
    if not name:
        raise KubeconfigError(f"kubeconfig {path}: no current-context; pass --context")
    if name not in contexts:
        have = ", ".join(sorted(contexts)) or "none"
        raise KubeconfigError(f"context {name!r} not found in {path} (have: {have})")
    ctx = _named(doc, "contexts", name, path)
    cluster = _named(doc, "clusters", ctx.get("cluster"), path)
    user = _named(doc, "users", ctx.get("user"), path, optional=True)
    resolve = _Resolver(path)
    return KubeConfig(
        source=str(path),
        file=path,
        context=name,
        server=str(cluster.get("server") or "http://localhost"),
        namespace=ctx.get("namespace"),
        ca_file=resolve.file(cluster, "certificate-authority"),
        insecure=_flag(cluster, "insecure-skip-tls-verify", path),
        cert_file=resolve.file(user, "client-certificate"),
        key_file=resolve.file(user, "client-key"),
        token=user.get("token") or None,
        token_file=resolve.path(str(user["tokenFile"])) if user.get("tokenFile") else None,
        username=user.get("username") or None,
        password=user.get("password") or None,
        only_pykube="exec" in user or "auth-provider" in user or "tls-server-name" in cluster,
        disable_compression=_flag(cluster, "disable-compression", path),
    )


def in_cluster(directory: Path = SA_DIR) -> KubeConfig | None:
    """The pod's service account, or None outside a pod."""
    host = os.environ.get("KUBERNETES_SERVICE_HOST")
    if not host or not (directory / "token").is_file():
        return None
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    namespace_file = directory / "namespace"
    return KubeConfig(
        source=str(directory),
        file=None,
        context=None,
        server=f"https://{host}:{port}",
        namespace=namespace_file.read_text().strip() if namespace_file.is_file() else None,
        ca_file=str(directory / "ca.crt"),
        token_file=directory / "token",
    )


def _read(path: Path) -> dict[str, Any]:
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise KubeconfigError(f"cannot load kubeconfig {path}: {exc}") from None
    if not isinstance(doc, dict):
        raise KubeconfigError(f"kubeconfig {path}: not a kubeconfig (a YAML mapping)")
    return doc


_YAML11_LETTERS = {"y": True, "Y": True, "n": False, "N": False}


def _flag(section: dict[str, Any], field: str, path: Path) -> bool:
    """A boolean field as kubectl reads it: empty is false, and y/n are
    booleans to its YAML reader (strings to PyYAML). A quoted "false", which
    Python would take as true, is refused, as kubectl refuses it."""
    value = section.get(field)
    if value is None:
        return False
    if isinstance(value, str) and value in _YAML11_LETTERS:
        return _YAML11_LETTERS[value]
    if not isinstance(value, bool):
        raise KubeconfigError(f"kubeconfig {path}: {field}: {value!r} is not true or false")
    return value


def _contexts(doc: dict[str, Any]) -> list[str]:
    return [str(c.get("name")) for c in doc.get("contexts") or [] if isinstance(c, dict)]


def _named(
    doc: dict[str, Any], section: str, name: object, path: Path, optional: bool = False
) -> dict[str, Any]:
    """The body of the entry ``name`` of ``section`` (``clusters[c].cluster``)."""
    key = section[:-1]
    for entry in doc.get(section) or []:
        if isinstance(entry, dict) and entry.get("name") == name:
            body = entry.get(key)
            if not isinstance(body, dict):
                raise KubeconfigError(f"kubeconfig {path}: {section}[{name}].{key}: not a mapping")
            return body
    if optional:
        return {}
    raise KubeconfigError(f"kubeconfig {path}: {section} has no entry named {name!r}")


class _Resolver:
    """File references are relative to the kubeconfig's directory, as kubectl
    reads them; inline data goes to a private file named by its digest, so a
    cron job that starts every minute reuses one file."""

    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig

    def path(self, name: str) -> Path:
        path = Path(name).expanduser()
        return path if path.is_absolute() else self.kubeconfig.parent / path

    def file(self, section: dict[str, Any], field: str) -> str | None:
        if data := section.get(f"{field}-data"):
            try:
                return _private_file(base64.b64decode(data, validate=True))
            except (binascii.Error, ValueError):
                raise KubeconfigError(
                    f"kubeconfig {self.kubeconfig}: {field}-data is not base64"
                ) from None
        if name := section.get(field):
            path = self.path(str(name))
            if not path.is_file():
                raise KubeconfigError(f"kubeconfig {self.kubeconfig}: {field} {path}: no such file")
            return str(path)
        return None


def _private_file(data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()[:32]
    path = Path(tempfile.gettempdir()) / f"reconciler-{os.getuid()}-{digest}.pem"
    try:
        if path.read_bytes() == data:
            return str(path)
    except OSError:
        pass
    fd, tmp = tempfile.mkstemp(prefix=path.name, dir=path.parent)  # mode 0600
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.replace(tmp, path)
    return str(path)
