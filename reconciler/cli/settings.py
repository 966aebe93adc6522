"""Where settings come from: defaults, then the YAML file, then RECONCILER_*
environment variables, then flags. Each layer is checked by `config.coerce`,
so a bad value names its source whichever layer it came from; `Layers.traced`
also says, for each key, which layer gave its value (`reconciler config`).
"""

from __future__ import annotations

import dataclasses
import difflib
import ipaddress
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import Field, dataclass
from pathlib import Path
from typing import Any

import yaml

from reconciler.config import FIELDS, Config, ConfigError, coerce
from reconciler.kinds.registry import KINDS

# Each kind's settings (`Kind.settings`): their defaults, and their fields by key.
KIND_DEFAULTS: tuple[object, ...] = tuple(k.settings for k in KINDS if k.settings is not None)
KIND_FIELDS: dict[str, Field[Any]] = {
    f.name: f
    for defaults in KIND_DEFAULTS
    for f in dataclasses.fields(defaults)  # type: ignore[arg-type]
}
# Every key of the file and of RECONCILER_<KEY>: the application's and the kinds'.
KEYS: dict[str, Field[Any]] = {**FIELDS, **KIND_FIELDS}
FLAGS: dict[str, str] = {
    key: f.metadata["flag"] for key, f in KIND_FIELDS.items() if "flag" in f.metadata
}


def _coerce(key: str, value: Any, source: str) -> Any:
    return coerce(key, value, source, KIND_FIELDS.get(key))


def _where(exc: yaml.YAMLError) -> str:
    """ " at line L, column C: what": one line, with the file's own coordinates
    (PyYAML's text names the stream "<unicode string>" and spans lines)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if mark is None:
        return f": {problem}"
    return f" at line {mark.line + 1}, column {mark.column + 1}: {problem}"


def _suggest(name: str, known: list[str]) -> str:
    """ " (did you mean X?)" for a near miss, else the whole list."""
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.8)
    if close:
        return f" (did you mean {close[0]}?)"
    return f" (known: {', '.join(sorted(known))})"


# The file's list of clusters (`reconciler.cli.clusters`): not a key of `Config`.
CLUSTERS_KEY = "clusters"
# What a cluster entry names besides the keys it overrides.
CLUSTER_NAME, CLUSTER_CONTEXT = "name", "context"
# Keys of the process, not of one cluster: only at the top level.
PROCESS_KEYS = frozenset({"metrics_address", "log_level", "log_format", "clusters_in_parallel"})


# systemd's directory of a unit's credentials (LoadCredential=). A `kubeconfig`
# in the file may begin with it: a sandboxed unit reads its own copy of a file
# only root may read, and the same file serves every unit (each has its own
# directory). Unset (not under such a unit), the path is left as written.
CREDENTIALS_DIRECTORY = "CREDENTIALS_DIRECTORY"
CREDENTIALS_REF = f"${{{CREDENTIALS_DIRECTORY}}}"


def _expanded(key: str, value: Any, environ: Mapping[str, str]) -> Any:
    """A `kubeconfig` with CREDENTIALS_REF in it, there expanded."""
    directory = environ.get(CREDENTIALS_DIRECTORY)
    if key != "kubeconfig" or not isinstance(value, str) or not directory:
        return value
    return value.replace(CREDENTIALS_REF, directory)


def read_file(
    path: str | os.PathLike[str], environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Read a YAML config file; unknown keys are errors (a typo must not be silent).
    Its ``clusters`` come back under CLUSTERS_KEY as a tuple of mappings, each
    value checked as the same key at the top level is."""
    environ = os.environ if environ is None else environ
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read config file: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{p}: invalid YAML{_where(exc)}") from None
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{p}: the top level must be a mapping of keys to values")
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key == CLUSTERS_KEY:
            out[key] = _cluster_entries(value, str(p), environ)
            continue
        if key not in KEYS:
            known = [*KEYS, CLUSTERS_KEY]
            raise ConfigError(f"{p}: {key}: unknown key{_suggest(str(key), known)}")
        out[key] = _coerce(key, _expanded(key, value, environ), str(p))
    return out


def _cluster_entries(
    value: Any, source: str, environ: Mapping[str, str]
) -> tuple[dict[str, Any], ...]:
    """Each entry: a ``context``, an optional ``name`` (default: the context),
    and any other key, which the cluster takes in place of the top level's."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ConfigError(f"{source}: {CLUSTERS_KEY}: must be a list of clusters")
    entries = []
    for i, entry in enumerate(value):
        where = f"{source}: {CLUSTERS_KEY}[{i}]"
        if not isinstance(entry, Mapping):
            raise ConfigError(f"{where}: must be a mapping with a context")
        context = entry.get(CLUSTER_CONTEXT)
        if not isinstance(context, str) or not context:
            raise ConfigError(f"{where}: {CLUSTER_CONTEXT}: a kubeconfig context is required")
        name = entry.get(CLUSTER_NAME, context)
        if not isinstance(name, str) or not name or any(c.isspace() for c in name):
            raise ConfigError(f"{where}: {CLUSTER_NAME}: must be a word, got {name!r}")
        out: dict[str, Any] = {CLUSTER_NAME: name}
        for key, raw in entry.items():
            if key == CLUSTER_NAME:
                continue
            if key not in KEYS:
                raise ConfigError(f"{where}: {key}: unknown key{_suggest(str(key), list(KEYS))}")
            if key in PROCESS_KEYS:
                raise ConfigError(f"{where}: {key}: a setting of the process: set it at the top")
            out[key] = _coerce(key, _expanded(key, raw, environ), where)
        entries.append(out)
    names = [e[CLUSTER_NAME] for e in entries]
    if twice := sorted({n for n in names if names.count(n) > 1}):
        raise ConfigError(f"{source}: {CLUSTERS_KEY}: the name {twice[0]} is given twice")
    return tuple(entries)


ENV_PREFIX = "RECONCILER_"
CONFIG_FILE_ENV = f"{ENV_PREFIX}CONFIG"


# The variables a kubelet gives every pod (unless the pod sets
# enableServiceLinks: false) for each Service of its namespace with a cluster
# IP, as pkg/kubelet/envvars writes them. <SVC> is the Service's name
# upper-cased, "-" made "_": a Service named reconciler or reconciler-metrics
# gives variables that begin with ENV_PREFIX, which must not stop the pod.
#   <SVC>_SERVICE_HOST=<ip>            <SVC>_SERVICE_PORT[_<PORT NAME>]=<port>
#   <SVC>_PORT=<proto>://<ip>:<port>   (the first port)
#   <SVC>_PORT_<port>_<PROTO>=<proto>://<ip>:<port>
#   <SVC>_PORT_<port>_<PROTO>_PROTO=<proto>, _PORT=<port>, _ADDR=<ip>
SERVICE_HOST = "_SERVICE_HOST"
# A Service port's protocols, as the kubelet spells them in a name.
PROTOCOLS = ("TCP", "UDP", "SCTP")
_LINK_SUFFIX = (
    r"_SERVICE_PORT(?:_[A-Z0-9_]+)?"
    rf"|_PORT(?:_(?P<port>[0-9]+)_(?P<proto>{'|'.join(PROTOCOLS)})(?:_(?P<part>PROTO|PORT|ADDR))?)?"
)
LINK_SUFFIX = re.compile(_LINK_SUFFIX)
# <SVC>, and a name of one of those shapes whatever its value: no key's
# variable may have one (tests/unit/cli/test_settings.py), or a Service could set it.
_SERVICE = "[A-Z][A-Z0-9_]*"
SERVICE = re.compile(_SERVICE)
SERVICE_LINK_SHAPE = re.compile(rf"{_SERVICE}(?:{SERVICE_HOST}|{_LINK_SUFFIX})")


def _ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def _number(value: str) -> bool:
    return value.isascii() and value.isdigit()


def _url(proto: str, host: str, port: str) -> str:
    """As Go's net.JoinHostPort: an IPv6 address in brackets."""
    return f"{proto}://[{host}]:{port}" if ":" in host else f"{proto}://{host}:{port}"


def _first_port_url(value: str, host: str) -> bool:
    """``<SVC>_PORT``: the URL of the Service's first port, whichever it is."""
    scheme, _, rest = value.partition("://")
    port = rest.rpartition(":")[2]
    protocols = {p.lower() for p in PROTOCOLS}
    return scheme in protocols and _number(port) and value == _url(scheme, host, port)


def _link_of(suffix: str, value: str, host: str) -> bool:
    """Whether ``<SVC>{suffix}={value}`` is what a kubelet sets for a
    Service <SVC> whose cluster IP is ``host``: the value too, so that a
    mistyped setting of a link's shape (RECONCILER_METRICS_PORT=9090) is still
    refused as unknown."""
    match = LINK_SUFFIX.fullmatch(suffix)
    if match is None:
        return False
    if suffix.startswith("_SERVICE_PORT"):
        return _number(value)
    port, proto, part = match["port"], match["proto"], match["part"]
    if port is None:
        return _first_port_url(value, host)
    url = _url(proto.lower(), host, port)
    return value == {None: url, "PROTO": proto.lower(), "PORT": port, "ADDR": host}[part]


def service_links(environ: Mapping[str, str]) -> set[str]:
    """The ENV_PREFIX variables a kubelet set for the pod's Services: each
    <SVC>_SERVICE_HOST holding an IP, and each variable of a link's shape and
    value after such an <SVC>."""
    hosts = {
        name.removesuffix(SERVICE_HOST): value
        for name, value in environ.items()
        if name.startswith(ENV_PREFIX)
        and name.endswith(SERVICE_HOST)
        and SERVICE.fullmatch(name.removesuffix(SERVICE_HOST))
        and _ip(value)
    }
    links = {f"{svc}{SERVICE_HOST}" for svc in hosts}
    for name, value in environ.items():
        if name.startswith(ENV_PREFIX) and any(
            name.startswith(svc) and _link_of(name[len(svc) :], value, host)
            for svc, host in hosts.items()
        ):
            links.add(name)
    return links


def read_env(environ: Mapping[str, str]) -> dict[str, Any]:
    """RECONCILER_<KEY> for each key; any other RECONCILER_ variable is an
    error, as an unknown key in the file is (RECONCILER_NAMESPACE, singular,
    must not silently reconcile every namespace), but for a Service's
    (`service_links`): no key's variable has their shape."""
    known = {f"{ENV_PREFIX}{key.upper()}": key for key in KEYS}
    links = service_links(environ)
    out: dict[str, Any] = {}
    for name in sorted(environ):
        if not name.startswith(ENV_PREFIX) or name == CONFIG_FILE_ENV:
            continue
        if name in known:
            out[known[name]] = _coerce(known[name], environ[name], name)
        elif name not in links:
            raise ConfigError(
                f"{name}: unknown variable{_suggest(name, [CONFIG_FILE_ENV, *known])}"
            )
    return out


def load(
    config_file: str | None,
    flags: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
) -> Config:
    """Merge the layers; ``flags`` holds only options given on the command line."""
    return Layers.read(config_file, environ).config(flags)


# Where a key's value came from when no layer set it.
DEFAULT = "default"


def _flag_source(key: str, value: Any) -> str:
    """The flag that sets ``key``: its own name, but for the namespaces."""
    if key == "namespaces":
        return "flag --all-namespaces" if value == () else "flag --namespace"
    return f"flag --{key.replace('_', '-')}"


@dataclass(frozen=True)
class Traced:
    """A cluster's settings, and for each key a layer set, that layer
    (``file <path>``, ``file <path> clusters[i]``, ``env RECONCILER_<KEY>``,
    ``flag --x``): what `reconciler config` prints."""

    config: Config
    sources: Mapping[str, str]

    def source(self, key: str) -> str:
        return self.sources.get(key, DEFAULT)


@dataclass(frozen=True)
class Layers:
    """The file and the environment, read once; `config` adds the flags and,
    for one cluster of the file's list, that cluster's keys over the file's.
    ``path``: the file's, to name it as a source."""

    file: Mapping[str, Any]
    env: Mapping[str, Any]
    path: str | None = None

    @classmethod
    def read(cls, config_file: str | None, environ: Mapping[str, str] | None = None) -> Layers:
        environ = os.environ if environ is None else environ
        config_file = config_file or environ.get(CONFIG_FILE_ENV)
        if not config_file:
            return cls({}, read_env(environ))
        return cls(read_file(config_file, environ), read_env(environ), str(config_file))

    @property
    def clusters(self) -> tuple[Mapping[str, Any], ...]:
        """The file's cluster entries, as `_cluster_entries` checked them."""
        return tuple(self.file.get(CLUSTERS_KEY, ()))

    def entry_source(self, cluster: Mapping[str, Any]) -> str:
        """How a source names one of `clusters` (the very mapping)."""
        index = next(i for i, e in enumerate(self.clusters) if e is cluster)
        return f"file {self.path} {CLUSTERS_KEY}[{index}]"

    def config(self, flags: Mapping[str, Any], cluster: Mapping[str, Any] | None = None) -> Config:
        return self.traced(flags, cluster).config

    def traced(
        self,
        flags: Mapping[str, Any],
        cluster: Mapping[str, Any] | None = None,
        flag_sources: Mapping[str, str] | None = None,
    ) -> Traced:
        """`config`, with the source of each key; ``flag_sources`` names it
        for a flag the command set on the user's behalf (a cluster's context)."""
        merged: dict[str, Any] = {}
        sources: dict[str, str] = {}
        top = {k: v for k, v in self.file.items() if k != CLUSTERS_KEY}
        _lay(merged, sources, top, lambda _: f"file {self.path}")
        if cluster is not None:
            entry = {k: v for k, v in cluster.items() if k != CLUSTER_NAME}
            where = self.entry_source(cluster)
            _lay(merged, sources, entry, lambda _: where)
        _lay(merged, sources, self.env, lambda key: f"env {ENV_PREFIX}{key.upper()}")
        given = {}
        for key, value in flags.items():
            if key not in KEYS:
                raise ConfigError(f"--{key.replace('_', '-')}: unknown option")
            given[key] = _coerce(key, value, f"--{key.replace('_', '-')}")
        named = flag_sources or {}
        _lay(merged, sources, given, lambda key: named.get(key) or _flag_source(key, given[key]))
        return Traced(_checked(_config(merged)), sources)


def _lay(
    merged: dict[str, Any],
    sources: dict[str, str],
    layer: Mapping[str, Any],
    source: Callable[[str], str],
) -> None:
    """One layer over those below it."""
    for key, value in layer.items():
        merged[key] = value
        sources[key] = source(key)


def _checked(config: Config) -> Config:
    """Refuse the combinations no single key's check can see."""
    if not config.retry_period < config.renew_deadline < config.lease_duration:
        raise ConfigError(
            "leader election: need retry_period < renew_deadline < lease_duration, got "
            f"{config.retry_period} < {config.renew_deadline} < {config.lease_duration}"
        )
    if config.shard and config.leader_elect:
        raise ConfigError(
            "shard and leader_elect: choose one (sharded replicas all work; "
            "leader election keeps one working and the others waiting)"
        )
    return config


def _config(merged: Mapping[str, Any]) -> Config:
    """The application's keys into `Config`, each kind's into its settings
    (kept only when they differ from its defaults, so equal settings make
    equal configs however they were written)."""
    kinds = []
    for defaults in KIND_DEFAULTS:
        names = [f.name for f in dataclasses.fields(defaults) if f.name in merged]  # type: ignore[arg-type]
        given = dataclasses.replace(defaults, **{n: merged[n] for n in names})  # type: ignore[type-var]
        if given != defaults:
            kinds.append(given)
    own = {key: value for key, value in merged.items() if key in FIELDS}
    return dataclasses.replace(Config(), **own, kind_settings=tuple(kinds))
