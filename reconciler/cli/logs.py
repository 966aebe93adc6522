"""Logging setup: text or one JSON object per line.

Per-object lines carry a ``[namespace/name]`` prefix in text, and the object,
action, result and pass id as fields in JSON, so they can be filtered either way.
A command serving several clusters names the cluster too: ``[prod
default/redis-sample]`` in text, a ``cluster`` field in JSON. The name is a
context variable of the thread that serves the cluster
(`reconciler.log_cluster`).
"""

from __future__ import annotations

import copy
import json
import logging
import sys
from datetime import UTC, datetime

from reconciler.log_cluster import CLUSTER

EXTRA_FIELDS = ("cluster", "object", "kind", "action", "result", "pass_id")


def prefixed(message: str, cluster: str) -> str:
    """``[ns/name] text`` becomes ``[cluster ns/name] text``; any other line
    ``[cluster] text``."""
    if not cluster:
        return message
    if message.startswith("["):
        return f"[{cluster} {message[1:]}"
    return f"[{cluster}] {message}"


class _NameCluster(logging.Filter):
    """Adds the serving thread's cluster to each record, as ``cluster``."""

    def filter(self, record: logging.LogRecord) -> bool:
        if (name := CLUSTER.get()) and not hasattr(record, "cluster"):
            record.cluster = name
        return True


class TextFormatter(logging.Formatter):
    def formatMessage(self, record: logging.LogRecord) -> str:
        cluster = getattr(record, "cluster", "")
        if cluster:
            record = copy.copy(record)
            record.message = prefixed(record.message, cluster)
        return super().formatMessage(record)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key in EXTRA_FIELDS:
            if hasattr(record, key):
                out[key] = getattr(record, key)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out)


def setup(level: str = "INFO", fmt: str = "text") -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter("%(asctime)s %(levelname)-7s %(message)s"))
    handler.addFilter(_NameCluster())
    handler._reconciler = True  # type: ignore[attr-defined]
    root = logging.getLogger()
    # Replace only our own handler, so embedding code (and pytest) keeps theirs.
    root.handlers[:] = [h for h in root.handlers if not getattr(h, "_reconciler", False)]
    root.addHandler(handler)
    root.setLevel(level)
    for noisy in ("urllib3", "apscheduler"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
