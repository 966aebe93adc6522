"""A text log line cannot be forged by what it quotes: control characters in
a name, a message, an argument, a cluster's name or an exception's text are
escaped, so a record is one line and what follows it (its traceback) is
indented; JSON lines escape them too."""

from __future__ import annotations

import io
import json
import logging
import re
import sys
import traceback
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.cli import logs
from reconciler.cli.logs import CONTINUATION, CONTROLS, TEXT_FORMAT, JsonFormatter, TextFormatter

# What a forger would write after a newline: a record of its own.
FORGED = "2026-01-01 00:00:00,000 ERROR   [default/redis] deleted everything"
RECORD_START = re.compile(r"\d{4}-\d\d-\d\d ")
# Each character a forger could use, and how a line shows it.
SHOWN = {
    "\r": "\\r",
    "\n": "\\n",
    "\t": "\\t",
    "\x1b": "\\x1b",
    "\x00": "\\x00",
    "\x07": "\\x07",
    "\x0b": "\\x0b",
    "\x0c": "\\x0c",
    "\x1c": "\\x1c",
    "\x7f": "\\x7f",
    "\x85": "\\x85",
    "\x9b": "\\x9b",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
    "\u202e": "\\u202e",
    "\u2066": "\\u2066",
}


@pytest.fixture
def lines() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    """A logger writing through TextFormatter, as `logs.setup` makes it, to a buffer."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(TextFormatter(TEXT_FORMAT))
    logger = logging.getLogger("test_logs")
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    yield logger, stream
    logger.removeHandler(handler)
    logger.propagate = True


def records(stream: io.StringIO) -> list[str]:
    """The lines of the buffer that begin a record."""
    return [line for line in stream.getvalue().split("\n") if RECORD_START.match(line)]


@pytest.mark.parametrize(("char", "shown"), SHOWN.items())
def test_a_control_character_in_a_name_is_escaped(lines, char: str, shown: str):
    logger, stream = lines
    logger.warning("[%s/%s] pod %s", "default", f"r{char}x", "created")
    text = stream.getvalue()
    assert text.count("\n") == 1 and text.endswith("\n")
    (line,) = records(stream)
    assert line.endswith(f" [default/r{shown}x] pod created")
    assert char not in line


def test_the_escapes_are_pythons():
    for code in CONTROLS:
        assert logs.escaped(chr(code)) == repr(chr(code))[1:-1], hex(code)


def test_every_line_break_python_knows_is_a_control():
    breaks = {c for c in map(chr, range(0x110000)) if len(f"a{c}b".splitlines()) > 1}
    assert {ord(c) for c in breaks} <= set(CONTROLS)


def test_a_forged_record_in_a_message_or_an_argument_stays_in_its_line(lines):
    logger, stream = lines
    logger.info(f"[default/r] note\n{FORGED}")
    logger.info("[%s] %s", "default/r", f"patched\r\n{FORGED}")
    first, second = records(stream)
    assert first.endswith(f" [default/r] note\\n{FORGED}")
    assert second.endswith(f" [default/r] patched\\r\\n{FORGED}")
    assert len(stream.getvalue().splitlines()) == 2


def test_the_clusters_name_in_the_prefix_is_escaped(lines):
    logger, stream = lines
    logger.info("[default/r] created", extra={"cluster": "prod\n\x1b[2J"})
    (line,) = records(stream)
    assert line.endswith(" [prod\\n\\x1b[2J default/r] created")


def test_a_traceback_is_indented_and_its_text_escaped(lines):
    logger, stream = lines
    try:
        raise ValueError(f"bad\n{FORGED}\r\x1b[1A")
    except ValueError:
        logger.exception("[default/r] failed")
    (record, *rest) = stream.getvalue().rstrip("\n").split("\n")
    assert RECORD_START.match(record) and record.endswith(" [default/r] failed")
    assert rest[0] == f"{CONTINUATION}Traceback (most recent call last):"
    assert all(line.startswith(CONTINUATION) for line in rest)
    assert rest[-2:] == [f"{CONTINUATION}ValueError: bad", f"{CONTINUATION}{FORGED}\\r\\x1b[1A"]
    assert records(stream) == [record]


def test_a_stack_is_indented(lines):
    logger, stream = lines
    logger.info("[default/r] here", stack_info=True)
    (_, *rest) = stream.getvalue().rstrip("\n").split("\n")
    assert rest[0] == f"{CONTINUATION}Stack (most recent call last):"
    assert all(line.startswith(CONTINUATION) for line in rest)


def test_other_handlers_are_given_their_own_traceback():
    """logging caches a record's traceback text on it: ours must not be what
    another handler (pytest's, an embedding program's) prints, nor theirs
    what ours prints unescaped."""
    try:
        raise ValueError("bad\nline")
    except ValueError:
        record = logging.LogRecord("t", logging.ERROR, __file__, 1, "failed", None, sys.exc_info())
    assert record.exc_info is not None
    plain = logging.Formatter("%(message)s")
    ours = TextFormatter(TEXT_FORMAT).format(record)
    assert record.exc_text is None
    raw = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
    assert plain.format(record) == f"failed\n{raw}"
    # Now cached by the other formatter, unescaped: ours still indents it.
    assert record.exc_text is not None and "\nline" in record.exc_text
    assert TextFormatter(TEXT_FORMAT).format(record) == ours
    assert f"\n{CONTINUATION}line" in ours


def test_a_plain_line_is_not_copied():
    """The usual line costs one isprintable() scan: the same string back."""
    text = "[default/redis-sample] pod redis-sample-0 created (3/3 ready) é ü 日本"
    assert logs.escaped(text) is text


def test_json_lines_escape_them_too():
    try:
        raise ValueError("bad\u2028x")
    except ValueError:
        record = logging.LogRecord(
            "t", logging.ERROR, __file__, 1, "[%s] %s", ("default/r\n", "a\x1b"), sys.exc_info()
        )
    record.cluster = "prod\r"
    line = JsonFormatter().format(record)
    assert "\n" not in line and all(ord(c) not in CONTROLS for c in line)
    doc = json.loads(line)
    assert doc["message"] == "[default/r\n] a\x1b" and doc["cluster"] == "prod\r"
    assert "bad\u2028x" in doc["exc"]


@given(st.text(), st.text(), st.text())
def test_any_name_message_and_cluster_make_one_line_without_controls(name, message, cluster):
    record = logging.LogRecord("t", logging.INFO, __file__, 1, "[%s] %s", (name, message), None)
    record.cluster = cluster
    line = TextFormatter(TEXT_FORMAT).format(record)
    assert not [c for c in line if ord(c) in CONTROLS]
    assert len(line.splitlines()) == 1
