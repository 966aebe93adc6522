"""Logging setup: text or one JSON object per line.

Per-object lines carry a ``[namespace/name]`` prefix in text, and the object,
action, result and pass id as fields in JSON, so they can be filtered either way.
A command serving several clusters names the cluster too: ``[prod
default/redis-sample]`` in text, a ``cluster`` field in JSON. The name is a
context variable of the thread that serves the cluster
(`reconciler.log_cluster`).

A text line cannot be forged by what it quotes: a name, a message, an
exception's text may hold any character, and a newline or a carriage return
in them could start what looks like a record of its own, an escape sequence
could rewrite the terminal. So the text format shows every control character
(C0, DEL, C1, the Unicode line and paragraph separators, the bidirectional
overrides) escaped as Python writes it in a literal: ``\n``, ``\r``, ``\t``,
``\x1b``, ``\u2028``. A backslash stays as it is: a name cannot hold one, and
a message that does is still one line. A traceback keeps its own line breaks,
but every line of it is indented, so none begins as a record does (with the
time). JSON escapes all of these already.
"""

from __future__ import annotations

import copy
import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

from reconciler.log_cluster import CLUSTER

EXTRA_FIELDS = ("cluster", "object", "kind", "action", "result", "pass_id")

# What no text line shows as it is (str.isprintable is false for each).
CONTROLS = (
    *range(0x20),
    *range(0x7F, 0xA0),
    0x2028,
    0x2029,
    *range(0x202A, 0x202F),
    *range(0x2066, 0x206A),
)
# A text record: it begins with the time, which no line of a traceback does.
TEXT_FORMAT = "%(asctime)s %(levelname)-7s %(message)s"
# Each line of a traceback or a stack in a text record begins with this.
CONTINUATION = "  "


def _escape(code: int) -> str:
    """As repr() writes the character in a string literal."""
    named = {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}
    return named.get(code) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


ESCAPES = {code: _escape(code) for code in CONTROLS}


def escaped(text: str) -> str:
    """``text`` with every control character escaped; a line with none (the
    usual one) is returned as it is after one scan in C."""
    return text if text.isprintable() else text.translate(ESCAPES)


def indented(block: str) -> str:
    """A traceback or a stack: its lines escaped and indented, its own line
    breaks kept."""
    return "\n".join(CONTINUATION + escaped(line) for line in block.split("\n"))


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
    """One line a record, escaped (`escaped`), then its traceback indented."""

    def format(self, record: logging.LogRecord) -> str:
        """Ours on a copy, so that no other handler's formatter is given
        our traceback (logging caches it on the record); one another
        handler's formatter cached, unescaped, is escaped here."""
        if record.exc_info or record.exc_text:
            cached = record.exc_text
            record = copy.copy(record)
            record.exc_text = indented(cached) if cached else None
        return super().format(record)

    def formatMessage(self, record: logging.LogRecord) -> str:
        cluster = getattr(record, "cluster", "")
        message = escaped(prefixed(record.message, cluster))
        if message is not record.message:
            record = copy.copy(record)
            record.message = message
        return super().formatMessage(record)

    def formatException(self, ei: Any) -> str:
        return indented(super().formatException(ei))

    def formatStack(self, stack_info: str) -> str:
        return indented(super().formatStack(stack_info))


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
        handler.setFormatter(TextFormatter(TEXT_FORMAT))
    handler.addFilter(_NameCluster())
    handler._reconciler = True  # type: ignore[attr-defined]
    root = logging.getLogger()
    # Replace only our own handler, so embedding code (and pytest) keeps theirs.
    root.handlers[:] = [h for h in root.handlers if not getattr(h, "_reconciler", False)]
    root.addHandler(handler)
    root.setLevel(level)
    for noisy in ("urllib3", "apscheduler"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
