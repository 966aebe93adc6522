"""What the docs state of the exit codes, the settings and their defaults is
what the code does: each fact has one home, and a change of the code that
leaves a doc behind fails here."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from reconciler.cli import commands, served
from reconciler.cli.settings import CONFIG_FILE_ENV, ENV_PREFIX, KEYS

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted(
    [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *(ROOT / "docs").rglob("*.md")],
)
SHIPPED = [
    *(ROOT / "config").rglob("*.yaml"),
    *(ROOT / "dist" / "chart").rglob("*.yaml"),
    *(ROOT / "systemd").glob("*"),
]
TABLE_ROW = re.compile(r"^\| (\d) \| (.+) \|$")


def text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def exit_code_tables() -> dict[Path, dict[int, str]]:
    """Every table whose rows start with a one-digit code, by file."""
    found: dict[Path, dict[int, str]] = {}
    for doc in DOCS:
        rows = {int(m[1]): m[2] for m in map(TABLE_ROW.match, text(doc).splitlines()) if m}
        if rows:
            found[doc] = rows
    return found


def test_the_exit_codes_have_one_home_and_it_lists_the_code_s():
    tables = exit_code_tables()
    assert list(tables) == [ROOT / "README.md"], "the exit codes are told in one table"
    readme = tables[ROOT / "README.md"]
    codes = {
        served.EXIT_OK,
        served.EXIT_FAILED,
        served.EXIT_USAGE,
        served.EXIT_UNREACHABLE,
        served.EXIT_TIMEOUT,
    }
    assert set(readme) == codes
    assert "--wait" in readme[served.EXIT_TIMEOUT]
    assert "unreachable" in readme[served.EXIT_UNREACHABLE]
    assert "config" in readme[served.EXIT_USAGE]


# "(0 converged, 1 some objects failed, ...": the codes told again in prose.
RETOLD = re.compile(r"\(0 [a-z][^,;)]*[,;] 1 [a-z]")


def test_no_other_doc_tells_the_exit_codes_again():
    retold = [
        str(doc.relative_to(ROOT)) for doc in DOCS if RETOLD.search(re.sub(r"\s+", " ", text(doc)))
    ]
    assert retold == []


def test_the_pass_outcomes_exit_as_the_table_says():
    table = exit_code_tables()[ROOT / "README.md"]
    for outcome, code in served.EXIT_CODES.items():
        assert code in table, outcome
    for end, code in served.WAIT_EXIT_CODES.items():
        assert code in table, end


def variables_named() -> set[str]:
    names: set[str] = set()
    for path in [*DOCS, *SHIPPED]:
        if path.is_file():
            names |= set(re.findall(rf"\b{ENV_PREFIX}[A-Z][A-Z_]*[A-Z]\b", text(path)))
    return names


def test_every_variable_the_docs_and_manifests_name_is_one_the_code_reads():
    known = {f"{ENV_PREFIX}{key.upper()}" for key in KEYS} | {CONFIG_FILE_ENV}
    named = variables_named()
    assert named, "the docs name some RECONCILER_ variables"
    assert named <= known, sorted(named - known)


def options_of(command: click.Command) -> set[str]:
    return {opt for p in command.params if isinstance(p, click.Option) for opt in p.opts}


GLOBAL = options_of(commands.cli)
COMMANDS = {name: options_of(c) | GLOBAL for name, c in commands.cli.commands.items()}
# `reconciler <command> ...` up to what ends a command line in prose or a table.
INVOCATION = re.compile(r"\breconciler (sync|plan|run)\b([^`|\n#]*)")


def invocations() -> list[tuple[Path, str, str]]:
    found = []
    for path in [*DOCS, *SHIPPED]:
        if path.is_file():
            for m in INVOCATION.finditer(text(path)):
                for flag in re.findall(r"(?<![\w-])--[a-z][a-z-]*", m[2]):
                    found.append((path, m[1], flag))
    return found


def test_every_flag_the_docs_give_a_command_is_one_it_takes():
    found = invocations()
    assert found, "the docs show some invocations with flags"
    wrong = [
        f"{path.relative_to(ROOT)}: reconciler {cmd} {flag}"
        for path, cmd, flag in found
        if flag not in COMMANDS[cmd]
    ]
    assert wrong == []


def default_of(name: str) -> float:
    """The code's default of a key, or of a flag named by its option."""
    if name == "--timeout":
        return commands.DEFAULT_WAIT_TIMEOUT
    key = name.removeprefix("--").replace("-", "_")
    return float(KEYS[key].default)


# "`progress_deadline` (600 s by default)", "`--timeout` defaults to 300 s".
STATED = re.compile(
    r"`(--?[a-z][a-z-]*|[a-z][a-z_]*)`\s*(?:\((\d+(?:\.\d+)?) ?s? by default\)|"
    r"defaults to (\d+(?:\.\d+)?))"
)


def stated_defaults() -> list[tuple[Path, str, float]]:
    found = []
    for doc in DOCS:
        flat = re.sub(r"\s+", " ", text(doc))
        for m in STATED.finditer(flat):
            found.append((doc, m[1], float(m[2] or m[3])))
    return found


def test_every_default_the_docs_state_is_the_code_s():
    stated = stated_defaults()
    assert len(stated) >= 3, stated
    wrong = [
        f"{doc.relative_to(ROOT)}: {name} is said to default to {value:g}, "
        f"the code's is {default_of(name):g}"
        for doc, name, value in stated
        if default_of(name) != value
    ]
    assert wrong == []


@pytest.mark.parametrize("flag", ["--qps", "--image"])
def test_a_key_without_a_flag_is_not_offered_as_one(flag: str):
    """The config keys a run rarely changes are keys only (config.py)."""
    assert all(flag not in options for options in COMMANDS.values())
