"""Configuration: the one place where every setting and its default is defined.

Every key is flat and snake_case so the same name works in the file and as
``RECONCILER_<KEY>``; the keys a run often changes are flags too (see
`reconciler.cli.settings`, which reads those sources). Each kind's own keys
are declared with the kind (`Kind.settings`), not here. A bad value raises
ConfigError naming the source, the key and the reason; the CLI turns that
into exit code 2.
"""

from __future__ import annotations

from dataclasses import Field, dataclass, field, fields
from typing import Any

from reconciler.backoff import Policy
from reconciler.constants import MANAGED_POD_SELECTOR


class ConfigError(Exception):
    """A config value is invalid; the message names where and why."""


@dataclass(frozen=True)
class Config:
    # Scope: empty means all namespaces.
    namespaces: tuple[str, ...] = ()
    # Daemon schedule.
    interval: float = 30.0
    jitter: float = 3.0
    # After a pass that wrote or left objects progressing, the next one comes
    # this soon at the earliest, counted from that pass's start
    # (reconciler/run/pacing.py).
    min_interval: float = 1.0
    # While objects move, the share of the time passes may spend looking:
    # the next pass waits until what the recent passes spent observing and
    # planning (wall or client CPU; writes not counted) is this share of the
    # time since the last one started. 1: back to back.
    pace_budget: float = 0.5
    # Pod report: pod phases and conditions, logged as they change.
    pod_report: bool = True
    pod_report_selector: str = MANAGED_POD_SELECTOR
    state_file: str | None = None
    # Client.
    kubeconfig: str | None = None
    context: str | None = None
    timeout: float = 10.0
    # Items per page of the LISTs of whole objects; 0: all in one page. Pods
    # as protobuf are parsed as they arrive, so one page is never held whole;
    # a JSON answer (Redis, Xca; pods with protobuf off) is held a page at a
    # time, so 0 means pages of 500 for those (engine/observe/lister.py).
    page_size: int = 0
    # Items per page of the metadata-only LISTs of the passes after the first;
    # 0: all in one page. Pages cost the apiserver more: its watch cache walks
    # every item left in the LIST for each page, and it reads a page after the
    # first from etcd when nothing of the kind has changed since etcd's last
    # compaction (docs/performance.md). The answer is parsed as it arrives, a
    # batch of items at a time, so one page is never held whole. A JSON answer
    # is (with protobuf off): then 0 means pages of 2000 (engine/observe/lister.py).
    metadata_page_size: int = 0
    # Ask for gzip-compressed responses (bench/lists.py: even on loopback, TLS
    # over uncompressed pages costs this client more than inflating them).
    # The kubeconfig cluster's disable-compression turns it off as well.
    compression: bool = True
    protobuf: bool = True  # pods and metadata LISTs as protobuf (full CRD objects: JSON only)
    write_concurrency: int = 8
    # Clusters served at once by a command given several (`cli/clusters.py`).
    clusters_in_parallel: int = 4
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
    # Split the objects between replicas, each bucket held through a Lease in
    # leader_election_namespace (reconciler/run/shard.py); not with leader_elect.
    shard: bool = False
    shard_buckets: int = 32
    # Metrics and health endpoints (`reconciler run` only); empty disables.
    metrics_address: str = ""
    healthz_intervals: float = 3.0
    # After this many passes in a row that could not use a cluster (it could
    # not be reached, or refused every LIST: 401, 403), systemd's STATUS line
    # and /readyz say why (`reconciler run` only; reconciler/run/daemon.py).
    unready_after: int = 3
    # Output.
    log_level: str = "INFO"
    log_format: str = "text"
    dry_run: bool = False
    # Each kind's own settings (`Kind.settings`; `kinds.base.settings_of`
    # finds one), read from the same file, variables and flags as the rest.
    kind_settings: tuple[object, ...] = field(default=(), metadata={"key": False})

    @property
    def backoff(self) -> Policy:
        return Policy(self.failure_threshold, self.backoff_base, self.backoff_max)


# The keys of the file and of RECONCILER_<KEY> (kind_settings is not one).
FIELDS = {f.name: f for f in fields(Config) if f.metadata.get("key", True)}
_CHOICES = {"log_format": ("text", "json"), "log_level": ("DEBUG", "INFO", "WARNING", "ERROR")}
_POSITIVE = {
    "interval",
    "min_interval",
    "pace_budget",
    "timeout",
    "write_concurrency",
    "clusters_in_parallel",
    "qps",
    "burst",
    "failure_threshold",
    "backoff_base",
    "backoff_max",
    "lease_duration",
    "renew_deadline",
    "retry_period",
    "shard_buckets",
    "healthz_intervals",
    "unready_after",
}
_AT_MOST_ONE = {"pace_budget"}
_NON_NEGATIVE = {"jitter", "max_retries", "page_size", "metadata_page_size"}


def _words(value: Any, what: str) -> tuple[str, ...]:
    """A list from the file, or the words of a comma-separated string."""
    if isinstance(value, str):
        value = [v for v in (s.strip() for s in value.split(",")) if v]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"must be a list of {what}")
    return tuple(value)


def coerce(key: str, value: Any, source: str, spec: Field[Any] | None = None) -> Any:
    """Convert one raw value to the field's type, or explain why it cannot be.
    ``spec``: a kind's settings field (`Kind.settings`); default, Config's."""
    spec = spec or FIELDS[key]
    kind = str(spec.type)
    where = f"{source}: {key}"
    try:
        if kind.startswith("tuple"):
            return _words(value, "namespace names" if key == "namespaces" else "strings")
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
    if (key in _POSITIVE or spec.metadata.get("positive")) and value <= 0:
        raise ConfigError(f"{where}: must be greater than 0, got {value!r}")
    if key in _AT_MOST_ONE and value > 1:
        raise ConfigError(f"{where}: must be at most 1, got {value!r}")
    if key in _NON_NEGATIVE and value < 0:
        raise ConfigError(f"{where}: must not be negative, got {value!r}")
    return value
