"""Logging setup: text or one JSON object per line.

Per-object lines carry a ``[namespace/name]`` prefix in text, and the object,
action, result and pass id as fields in JSON, so they can be filtered either way.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

EXTRA_FIELDS = ("object", "kind", "action", "result", "pass_id")


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
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(message)s"))
    handler._reconciler = True  # type: ignore[attr-defined]
    root = logging.getLogger()
    # Replace only our own handler, so embedding code (and pytest) keeps theirs.
    root.handlers[:] = [h for h in root.handlers if not getattr(h, "_reconciler", False)]
    root.addHandler(handler)
    root.setLevel(level)
    for noisy in ("urllib3", "apscheduler"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
