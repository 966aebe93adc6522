"""Reads the client's connection settings: a kubeconfig context, or the pod's
service account.

Why not pykube's KubeConfig: importing pykube imports requests, about 6 MB
of resident memory and a fifth of a second of start-up that a daemon or a
cron job with static credentials never uses. pykube is imported only for
what it alone knows (exec plugins, auth providers, proxies); see
``reconciler.client.kube``.
"""

from __future__ import annotations

import atexit
import base64
import binascii
import fcntl
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from reconciler.client.exec_plugin import API_VERSIONS, INTERACTIVE_MODES, ExecSpec

SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class KubeconfigError(Exception):
    """The kubeconfig cannot be used; the message names the file and the field."""


@dataclass(frozen=True)
class KubeConfig:
    """One context of a kubeconfig, resolved: files are absolute paths, and
    inline ``*-data`` certificates are written to files of ``private_dir()``."""

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
    only_pykube: bool = False  # an auth provider: only pykube knows them
    disable_compression: bool = False  # the cluster's disable-compression, as kubectl reads it
    exec: ExecSpec | None = None
    tls_server_name: str | None = None
    proxy_url: str | None = None


def from_file(path: Path, context: str | None = None) -> KubeConfig:
    """The named context of ``path``, or its current context."""
    doc = _read(path)
    contexts = _contexts(doc, path)
    name = context or doc.get("current-context")
    if not name:
        raise KubeconfigError(f"kubeconfig {path}: no current-context; pass --context")
    if name not in contexts:
        have = ", ".join(sorted(contexts)) or "none"
        raise KubeconfigError(f"context {_shown(name)} not found in {path} (have: {have})")
    ctx = _named(doc, "contexts", name, path)
    cluster = _named(doc, "clusters", ctx.get("cluster"), path)
    user = _named(doc, "users", ctx.get("user"), path, optional=True)
    resolve = _Resolver(path)
    ca_file = resolve.file(cluster, "certificate-authority")
    where = f"kubeconfig {path}: users[{ctx.get('user')}].user.exec"
    exec_spec = _exec(user.get("exec"), where, cluster, ca_file, path) if "exec" in user else None
    return KubeConfig(
        source=str(path),
        file=path,
        context=name,
        server=str(cluster.get("server") or "http://localhost"),
        namespace=ctx.get("namespace"),
        ca_file=ca_file,
        insecure=_flag(cluster, "insecure-skip-tls-verify", path),
        cert_file=resolve.file(user, "client-certificate"),
        key_file=resolve.file(user, "client-key"),
        token=user.get("token") or None,
        token_file=resolve.path(str(user["tokenFile"])) if user.get("tokenFile") else None,
        username=user.get("username") or None,
        password=user.get("password") or None,
        only_pykube="auth-provider" in user,
        disable_compression=_flag(cluster, "disable-compression", path),
        exec=exec_spec,
        tls_server_name=cluster.get("tls-server-name") or None,
        proxy_url=cluster.get("proxy-url") or None,
    )


def context_names(path: Path) -> list[str]:
    """Every context of ``path``, in the file's order (`--all-contexts`)."""
    return _contexts(_read(path), path)


def _exec(
    section: object, where: str, cluster: dict[str, Any], ca_file: str | None, path: Path
) -> ExecSpec:
    """A user's exec section, refused as client-go refuses it."""
    if not isinstance(section, dict):
        raise KubeconfigError(f"{where}: not a mapping")
    if not section.get("command"):
        raise KubeconfigError(f"{where}.command: missing")
    version = section.get("apiVersion")
    if not isinstance(version, str) or version not in API_VERSIONS:
        have = " or ".join(sorted(API_VERSIONS))
        raise KubeconfigError(f"{where}.apiVersion: {_shown(version)} is not {have}")
    mode = section.get("interactiveMode")
    if mode is None and version.endswith("/v1"):
        raise KubeconfigError(f"{where}.interactiveMode: required by {version}")
    if mode is not None and (not isinstance(mode, str) or mode not in INTERACTIVE_MODES):
        raise KubeconfigError(
            f"{where}.interactiveMode: {_shown(mode)} is not Never, IfAvailable or Always"
        )
    env = []
    for i, pair in enumerate(section.get("env") or []):
        if not isinstance(pair, dict) or "name" not in pair:
            raise KubeconfigError(f"{where}.env[{i}]: not a name and a value")
        env.append((str(pair["name"]), str(pair.get("value") or "")))
    provide = section.get("provideClusterInfo") is True
    return ExecSpec(
        command=_command(str(section["command"]), path),
        args=tuple(str(a) for a in section.get("args") or []),
        env=tuple(env),
        api_version=version,
        install_hint=section.get("installHint") or None,
        interactive_mode=mode or "IfAvailable",
        cluster=json.dumps(_cluster_info(cluster, ca_file)) if provide else None,
    )


def _command(command: str, kubeconfig: Path) -> str:
    """As client-go finds a plugin: a relative path (``./bin/cred``) is
    relative to the kubeconfig's directory, not to wherever we were started;
    a bare name is looked up on the PATH."""
    if os.sep not in command or os.path.isabs(command):
        return command
    return os.path.normpath(os.path.join(kubeconfig.parent.absolute(), command))


def _cluster_info(cluster: dict[str, Any], ca_file: str | None) -> dict[str, Any]:
    """ExecCredential's spec.cluster: the cluster entry as the plugin needs it,
    its CA inline, and the extension client.authentication.k8s.io/exec."""
    info: dict[str, Any] = {"server": cluster.get("server") or ""}
    for field in ("tls-server-name", "insecure-skip-tls-verify", "proxy-url"):
        if cluster.get(field):
            info[field] = cluster[field]
    if ca_file:
        info["certificate-authority-data"] = base64.b64encode(Path(ca_file).read_bytes()).decode()
    for ext in cluster.get("extensions") or []:
        if isinstance(ext, dict) and ext.get("name") == "client.authentication.k8s.io/exec":
            info["config"] = ext.get("extension")
    return info


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
        data = path.read_bytes()
    except OSError as exc:
        raise KubeconfigError(f"cannot load kubeconfig {path}: {exc.strerror or exc}") from None
    try:
        doc = yaml.safe_load(data)
    except yaml.YAMLError as exc:
        raise KubeconfigError(f"kubeconfig {path}: {_yaml_problem(exc, data)}") from None
    if not isinstance(doc, dict):
        raise KubeconfigError(f"kubeconfig {path}: not a kubeconfig (a YAML mapping)")
    return doc


def _yaml_problem(exc: yaml.YAMLError, data: bytes) -> str:
    """Where and what, never the text: PyYAML's own message quotes the
    offending line, and in a kubeconfig half-way rewritten that is a token."""
    if isinstance(exc, yaml.reader.ReaderError):
        line = data[: exc.position].count(b"\n") + 1
        return f"line {line}: not UTF-8 or UTF-16 text ({exc.reason})"
    if not isinstance(exc, yaml.MarkedYAMLError):
        return "could not parse YAML"
    mark = exc.problem_mark or exc.context_mark
    where = f"line {mark.line + 1}: " if mark is not None else ""
    problem = _QUOTED.sub(_short_or_elided, exc.problem or "")
    return f"{where}could not parse YAML" + (f" ({problem})" if problem else "")


# PyYAML quotes what it found (a character, a token's kind, or an alias, tag
# or anchor name, which may be part of a secret) with %r.
_QUOTED = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"")
_TOKEN_KIND = re.compile(r"<[a-z ]+>")


def _short_or_elided(match: re.Match[str]) -> str:
    inner = match.group()[1:-1]
    return match.group() if len(inner) <= 2 or _TOKEN_KIND.fullmatch(inner) else "…"


# What a field may hold to be quoted in an error: a word such as a version,
# a mode or a name. Anything else is named by its type, since a field of the
# wrong type may hold what belonged to the next one (a token, a key).
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9.:@/_-]{0,99}")


def _shown(value: object) -> str:
    """``value`` quoted if it is a word, else what kind of value it is."""
    if isinstance(value, str):
        return repr(value) if _WORD.fullmatch(value) else f"a string of {len(value)} characters"
    if isinstance(value, bool | int | float) or value is None:
        return repr(value)
    return "a mapping" if isinstance(value, dict) else f"a {type(value).__name__}"


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
        raise KubeconfigError(f"kubeconfig {path}: {field}: {_shown(value)} is not true or false")
    return value


def _contexts(doc: dict[str, Any], path: Path) -> list[str]:
    return [str(c.get("name")) for c in _entries(doc, "contexts", path) if isinstance(c, dict)]


def _entries(doc: dict[str, Any], section: str, path: Path) -> list[Any]:
    """A section's list; an empty one may be absent or null."""
    entries = doc.get(section) or []
    if not isinstance(entries, list):
        raise KubeconfigError(f"kubeconfig {path}: {section}: {_shown(entries)}, not a list")
    return entries


def _named(
    doc: dict[str, Any], section: str, name: object, path: Path, optional: bool = False
) -> dict[str, Any]:
    """The body of the entry ``name`` of ``section`` (``clusters[c].cluster``)."""
    key = section[:-1]
    for entry in _entries(doc, section, path):
        if isinstance(entry, dict) and entry.get("name") == name:
            body = entry.get(key)
            if not isinstance(body, dict):
                raise KubeconfigError(f"kubeconfig {path}: {section}[{name}].{key}: not a mapping")
            return body
    if optional:
        return {}
    raise KubeconfigError(f"kubeconfig {path}: {section} has no entry named {_shown(name)}")


class _Resolver:
    """File references are relative to the kubeconfig's directory, as kubectl
    reads them; inline data goes to a file of this process's private
    directory."""

    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig

    def path(self, name: str) -> Path:
        path = Path(name).expanduser()
        return path if path.is_absolute() else self.kubeconfig.parent / path

    def file(self, section: dict[str, Any], field: str) -> str | None:
        if data := section.get(f"{field}-data"):
            try:
                return private_file(base64.b64decode(data, validate=True))
            except (binascii.Error, TypeError, ValueError):
                raise KubeconfigError(
                    f"kubeconfig {self.kubeconfig}: {field}-data is not base64"
                ) from None
        if name := section.get(field):
            path = self.path(str(name))
            if not path.is_file():
                raise KubeconfigError(f"kubeconfig {self.kubeconfig}: {field} {path}: no such file")
            return str(path)
        return None


def private_file(data: bytes) -> str:
    """A file of this process's private directory holding ``data``, named by
    its digest: reading the kubeconfig again (after a 401) reuses it."""
    directory = private_dir()
    path = directory / f"{hashlib.sha256(data).hexdigest()[:32]}.pem"
    try:
        if path.read_bytes() == data:
            return str(path)
    except OSError:
        pass
    os.replace(new_private_file(data, directory), path)
    return str(path)


def new_private_file(data: bytes, directory: Path | None = None) -> str:
    """A new file of the private directory holding ``data`` (mode 0600), for a
    caller that removes it when done with it (an exec plugin's key)."""
    fd, name = tempfile.mkstemp(suffix=".pem", dir=directory or private_dir())
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    return name


_private: tuple[int, Path] | None = None  # (the process that made it, the directory)
_held: list[int] = []  # descriptors of the directories made, each flocked
_private_lock = threading.Lock()


def private_dir() -> Path:
    """This process's directory for certificates and keys: made by mkdtemp
    (mode 0700, ours, a name nobody can guess) under $XDG_RUNTIME_DIR if it is
    a directory of ours, else the temp dir; removed at exit. A shared path
    would let another local user plant a CA of theirs; made again if it is
    gone (a tmp cleaner) or no longer ours."""
    global _private
    with _private_lock:
        if _private is None or _private[0] != os.getpid() or not _ours(_private[1], closed=True):
            path = Path(tempfile.mkdtemp(prefix="reconciler-", dir=_runtime_dir()))
            _private = (os.getpid(), path)
            _held.append(_flocked(path))
            atexit.register(_remove, os.getpid(), path)
        return _private[1]


def _flocked(path: Path) -> int:
    """A descriptor holding a shared flock on ``path`` until exit:
    systemd-tmpfiles leaves a locked directory alone, however old."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(fd, fcntl.LOCK_SH)
    return fd


def _runtime_dir() -> str | None:
    """$XDG_RUNTIME_DIR, if it is a directory that only we may write to."""
    run = os.environ.get("XDG_RUNTIME_DIR")
    return run if run and _ours(Path(run)) else None


def _ours(path: Path, closed: bool = False) -> bool:
    """Whether ``path`` is a directory (not a link to one) of ours that no one
    else may write to (``closed``: nor read or enter)."""
    try:
        st = path.lstat()
    except OSError:
        return False
    others = 0o077 if closed else stat.S_IWGRP | stat.S_IWOTH
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & others


def _remove(pid: int, path: Path) -> None:
    """At exit, the directory and what is in it; a forked child leaves it."""
    if os.getpid() == pid:
        shutil.rmtree(path, ignore_errors=True)
