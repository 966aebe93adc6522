"""config/reconciler.yaml, written from the code: every key of
`reconciler.cli.settings.KEYS`, commented out, with the code's default and a
note, so that the file a bastion installs sets nothing. `reconciler config`
then says "default" for every key a user has not uncommented, and a default
changed by a later release reaches them.

The one key it sets is in SET: the images the docs name, which the overlays
and the chart set too (tests/unit/test_manifests.py holds them equal).

    .venv/bin/python -m hack.config_file           # rewrite config/reconciler.yaml
    .venv/bin/python -m hack.config_file --check   # exit 1 when it differs

A new key needs its line in NOTES first; tests/hack/test_config_file.py fails
until the file is written again.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

from reconciler.cli.settings import CLUSTERS_KEY, KEYS

PATH = Path(__file__).resolve().parents[1] / "config" / "reconciler.yaml"
COMMAND = ".venv/bin/python -m hack.config_file"

# The keys the shipped file sets, and why in a line.
SET: dict[str, tuple[Any, str]] = {
    "allowed_images": (
        ["redis", "oliver006/redis_exporter"],
        "set here to the images the docs name (the code's default is [])",
    ),
}

HEADER = f"""\
# reconciler configuration. Every key is here, commented out with the code's
# default: remove its "#" to set it. `reconciler config --config FILE` then says
# "file" for it and "default" for the rest, whose defaults follow new releases.
# Precedence: flags, then RECONCILER_<KEY> variables (RECONCILER_INTERVAL=60,
# RECONCILER_NAMESPACES=a,b), then this file, then the defaults.
# Written by `{COMMAND}` from the code's keys and defaults.
"""

# One line per key: what it does, and where the docs say more.
NOTES: dict[str, str] = {
    "namespaces": "namespaces to reconcile; empty: every namespace (cluster-wide LISTs)",
    "interval": "`run`: seconds between passes while nothing moves",
    "jitter": "`run`: up to this many seconds more, so that reconcilers do not pass in step",
    "min_interval": "`run`, `sync --wait`: while objects move, the least seconds from a "
    "pass's start to the next's",
    "pace_budget": "while objects move, the share of the time passes may spend looking "
    "(docs/operations.md)",
    "pod_report": "log pods added, deleted, and their phase and condition transitions",
    "pod_report_selector": "the pods the report follows (a label selector; empty: every pod)",
    "state_file": "where one-shot runs keep the pod report's last view (null: none)",
    "kubeconfig": "the kubeconfig; null: $KUBECONFIG, else ~/.kube/config, else in-cluster",
    "context": "the kubeconfig's context; null: its current one",
    "timeout": "seconds an HTTP request may take",
    "page_size": "items per page of the LISTs of whole objects; 0: one page (docs/performance.md)",
    "metadata_page_size": "items per page of the metadata-only LISTs; 0: one page "
    "(docs/performance.md)",
    "compression": "ask for gzip-compressed responses (a kubeconfig cluster's "
    "disable-compression turns it off)",
    "protobuf": "ask for pods and metadata-only LISTs as protobuf",
    "write_concurrency": "objects written at once within a pass",
    "clusters_in_parallel": "clusters served at once by one process",
    "qps": "client-side rate limit of a pass: requests per second",
    "burst": "requests a pass may make at once above qps",
    "max_retries": "retries of a request answered 429 or 5xx, honouring Retry-After",
    "failure_threshold": "failed passes in a row before an object backs off",
    "backoff_base": "it is then retried every backoff_base * 2^n seconds",
    "backoff_max": "and at least every backoff_max seconds",
    "leader_elect": "`run`: only the holder of the Lease reconciles (not with shard)",
    "leader_election_namespace": "the namespace of the Leases of leader_elect and shard",
    "leader_election_id": "the Lease's name, and the prefix of shard's",
    "lease_duration": "seconds a Lease holds after its holder last renewed it",
    "renew_deadline": "a holder that cannot renew within this stops writing",
    "retry_period": "seconds between renewals",
    "shard": "`run`: every replica works, on the buckets it holds (not with leader_elect)",
    "shard_buckets": "buckets the objects are split into: the same on every replica",
    "metrics_address": '`run`: serve /metrics, /healthz and /readyz here (":8080"); empty: off',
    "healthz_intervals": "/healthz fails once no pass has completed for this many intervals",
    "unready_after": "`run`: passes in a row that could not use a cluster before "
    "/readyz and systemd's STATUS say why",
    "log_level": "DEBUG, INFO, WARNING or ERROR",
    "log_format": "text, or json: one object per line",
    "dry_run": "plan and log every pass, write nothing",
    "image": "the image of a Redis whose spec.image is empty",
    "allowed_images": "repositories a Redis's images may come from; empty: any (docs/install.md)",
    "progress_deadline": "seconds a Redis may wait on pods that do not move before "
    "ProgressDeadlineExceeded",
}

# After `context`: the file's list of clusters, which is not a key.
CLUSTERS = f"""\
# Several clusters from one process: each entry names a kubeconfig context, and
# may set any key but the process's (metrics_address, log_level, log_format,
# clusters_in_parallel) for that cluster alone (config/reconciler-fleet.yaml).
#{CLUSTERS_KEY}:
#  - name: prod            # default: the context
#    context: prod-admin
#    namespaces: [cache]
"""
AFTER = {"context": CLUSTERS}
# A heading before the first key of each group; a new key joins the group above it.
GROUPS = {
    "namespaces": "Scope and pace of passes",
    "pod_report": "The pod report",
    "kubeconfig": "The cluster and the client",
    "failure_threshold": "An object's backoff after failed passes",
    "leader_elect": "Beside other replicas",
    "metrics_address": "Health, metrics and logs",
    "image": "Redis",
}


class MissingNote(Exception):
    """A key of the code has no line in NOTES."""


def _value(value: Any) -> str:
    """A value as YAML on one line: ``30``, ``[]``, ``''``, ``null``."""
    if isinstance(value, tuple):
        value = list(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return yaml.safe_dump([value], default_flow_style=True, width=1000).strip()[1:-1]


def _sentence(note: str) -> str:
    return note[0].upper() + note[1:]


def render() -> str:
    missing = sorted(set(KEYS) - set(NOTES))
    if missing:
        raise MissingNote(f"no line in hack/config_file.py's NOTES for {', '.join(missing)}")
    lines = [HEADER]
    for key, spec in KEYS.items():
        if key in GROUPS:
            lines.append(f"\n# --- {GROUPS[key]}\n")
        if key in SET:
            value, why = SET[key]
            lines.append(f"# {_sentence(NOTES[key])};\n# {why}.\n{key}: {_value(value)}\n")
        else:
            lines.append(f"# {_sentence(NOTES[key])}.\n#{key}: {_value(spec.default)}\n")
        if key in AFTER:
            lines.append(f"\n{AFTER[key]}\n")
    return "".join(lines)


def main(argv: list[str]) -> int:
    text = render()
    if argv[1:] == ["--check"]:
        if PATH.read_text() == text:
            return 0
        print(f"{PATH} is not what `{COMMAND}` writes: run it", file=sys.stderr)
        return 1
    PATH.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
