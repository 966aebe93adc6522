"""Configuration: defaults, then the YAML file, then RECONCILER_* env, then flags.

Every key is flat and snake_case so the same name works in the file, as
``RECONCILER_<KEY>`` and as ``--<key>``. A bad value raises ConfigError naming
the source, the key and the reason; the CLI turns that into exit code 2.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import yaml


class ConfigError(Exception):
    """A config value is invalid; the message names where and why."""


@dataclass(frozen=True)
class Config:
    # Scope: empty means all namespaces.
    namespaces: tuple[str, ...] = ()
    # Daemon schedule.
    interval: float = 30.0
    jitter: float = 3.0
    # Redis pods.
    image: str = "redis:5-alpine"
    # Pod report (seeds 000/001).
    pod_report: bool = True
    pod_report_selector: str = "app.kubernetes.io/managed-by=reconciler"
    state_file: str | None = None
    # Client.
    kubeconfig: str | None = None
    context: str | None = None
    timeout: float = 10.0
    page_size: int = 500
    write_concurrency: int = 8
    qps: float = 50.0
    burst: int = 100
    max_retries: int = 3
    # Per-object backoff after repeated failures.
    failure_threshold: int = 3
    backoff_base: float = 30.0
    backoff_max: float = 600.0
    # Running beside other replicas (`reconciler run` only).
    leader_elect: bool = False
    leader_election_namespace: str = "reconciler-system"
    leader_election_id: str = "reconciler"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    # Metrics and health endpoints (`reconciler run` only); empty disables.
    metrics_address: str = ""
    healthz_intervals: float = 3.0
    # Output.
    log_level: str = "INFO"
    log_format: str = "text"
    dry_run: bool = False


_FIELDS = {f.name: f for f in fields(Config)}
_CHOICES = {"log_format": ("text", "json"), "log_level": ("DEBUG", "INFO", "WARNING", "ERROR")}
_POSITIVE = {
    "interval",
    "timeout",
    "page_size",
    "write_concurrency",
    "qps",
    "burst",
    "failure_threshold",
    "backoff_base",
    "backoff_max",
    "lease_duration",
    "renew_deadline",
    "retry_period",
    "healthz_intervals",
}
_NON_NEGATIVE = {"jitter", "max_retries"}


def _coerce(key: str, value: Any, source: str) -> Any:
    """Convert one raw value to the field's type, or explain why it cannot be."""
    kind = _FIELDS[key].type
    where = f"{source}: {key}"
    try:
        if key == "namespaces":
            if isinstance(value, str):
                value = [v for v in (s.strip() for s in value.split(",")) if v]
            if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
                raise ValueError("must be a list of namespace names")
            return tuple(value)
        if "bool" in kind:
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lower() in ("1", "true", "yes", "on"):
                return True
            if isinstance(value, str) and value.lower() in ("0", "false", "no", "off", ""):
                return False
            raise ValueError(f"must be true or false, got {value!r}")
        if value is None and "None" in kind:
            return None
        if kind.startswith("int"):
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError(f"must be an integer, got {value!r}")
            value = int(value)
        elif kind.startswith("float"):
            if isinstance(value, bool):
                raise ValueError(f"must be a number, got {value!r}")
            value = float(value)
        elif "str" in kind:
            if not isinstance(value, (str, int, float)) or isinstance(value, bool):
                raise ValueError(f"must be a string, got {value!r}")
            value = str(value)
    except (TypeError, ValueError) as exc:
        msg = str(exc) if "must" in str(exc) else f"must be of type {kind}, got {value!r}"
        raise ConfigError(f"{where}: {msg}") from None
    if key in _CHOICES:
        value = value.upper() if key == "log_level" else value.lower()
        if value not in _CHOICES[key]:
            raise ConfigError(f"{where}: must be one of {', '.join(_CHOICES[key])}, got {value!r}")
    if key in _POSITIVE and value <= 0:
        raise ConfigError(f"{where}: must be greater than 0, got {value!r}")
    if key in _NON_NEGATIVE and value < 0:
        raise ConfigError(f"{where}: must not be negative, got {value!r}")
    return value


def read_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a YAML config file; unknown keys are errors (a typo must not be silent)."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read config file: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{p}: invalid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{p}: the top level must be a mapping of keys to values")
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key not in _FIELDS:
            raise ConfigError(f"{p}: {key}: unknown key (known: {', '.join(sorted(_FIELDS))})")
        out[key] = _coerce(key, value, str(p))
    return out


def read_env(environ: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in _FIELDS:
        name = f"RECONCILER_{key.upper()}"
        if name in environ:
            out[key] = _coerce(key, environ[name], name)
    return out


def load(
    config_file: str | None,
    flags: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
) -> Config:
    """Merge the layers; ``flags`` holds only options given on the command line."""
    environ = os.environ if environ is None else environ
    merged: dict[str, Any] = {}
    config_file = config_file or environ.get("RECONCILER_CONFIG")
    if config_file:
        merged.update(read_file(config_file))
    merged.update(read_env(environ))
    for key, value in flags.items():
        if key not in _FIELDS:
            raise ConfigError(f"--{key.replace('_', '-')}: unknown option")
        merged[key] = _coerce(key, value, f"--{key.replace('_', '-')}")
    config = dataclasses.replace(Config(), **merged)
    if not config.retry_period < config.renew_deadline < config.lease_duration:
        raise ConfigError(
            "leader election: need retry_period < renew_deadline < lease_duration, got "
            f"{config.retry_period} < {config.renew_deadline} < {config.lease_duration}"
        )
    return config
