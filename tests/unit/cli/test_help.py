"""`--help` a user can live in: every option says its default and, when it
sets a key, its RECONCILER_<KEY> variable; every key can be found from the
top-level help; each command has an example; exit codes are reconciler/run/turn.py's."""

from __future__ import annotations

import re
from typing import Any

import click
import pytest
from click.testing import CliRunner

from reconciler.cli import cli, commands
from reconciler.cli.settings import ENV_PREFIX, KEYS
from reconciler.run import turn

GROUP_ONLY = {p.name for p in cli.params}
RESTART = cli.commands["restart"]
assert isinstance(RESTART, click.Group)
COMMANDS: dict[str, click.Command] = {
    "reconciler": cli,
    "sync": cli.commands["sync"],
    "plan": cli.commands["plan"],
    "run": cli.commands["run"],
    "config": cli.commands["config"],
    "check": cli.commands["check"],
    "restart": RESTART,
    "restart redis": RESTART.commands["redis"],
}
# click's own, which set nothing.
CLICKS = {"help", "version"}
# Options whose name is not their key's.
KEY_OF = {"contexts": "context", "all_namespaces": "namespaces"}
# In `restart`, -n names where the Redis is, not the scope of passes: no key.
UNKEYED = {("restart", "namespaces"), ("restart redis", "namespaces")}


def options() -> list[tuple[str, click.Option]]:
    return [
        (name, p)
        for name, command in COMMANDS.items()
        for p in command.params
        if isinstance(p, click.Option) and not p.hidden and p.name not in CLICKS
    ]


def help_of(*args: str) -> str:
    result = CliRunner().invoke(cli, [*args, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


def shown(value: Any) -> str | None:
    """The code's default as help would show it; None when help says what none means."""
    if value is None or value in ("", ()):
        return None
    if isinstance(value, bool):
        return str(value).lower()
    return f"{value:g}" if isinstance(value, float) else str(value)


@pytest.mark.parametrize(("command", "option"), options(), ids=lambda x: getattr(x, "name", x))
def test_every_option_says_its_default_and_its_keys_variable(command: str, option: click.Option):
    text = " ".join((option.help or "").split())
    assert "default: " in text, f"{command} {option.opts}: {text!r}"
    key = KEY_OF.get(str(option.name), str(option.name))
    if (command, option.name) in UNKEYED or key not in KEYS:
        return
    if option.name == "timeout":  # sync's --timeout is the wait's, and points at the key's
        assert f"default: {commands.DEFAULT_WAIT_TIMEOUT:g}]" in text
        assert f"{ENV_PREFIX}TIMEOUT" in text
        return
    assert f"env var: {ENV_PREFIX}{key.upper()}" in text, f"{command} {option.opts}: {text!r}"
    want = shown(KEYS[key].default)
    if want is not None and option.name not in KEY_OF:
        assert f"default: {want}]" in text, f"{command} {option.opts}: {text!r}"


def test_every_key_is_found_from_the_top_level_help():
    """A key is an option's (whose help names its variable) or listed with
    the keys that have none; qps and timeout among them."""
    top = help_of()
    assert f"{ENV_PREFIX}<KEY>" in top
    listed = top.split("Keys with no option", 1)[1]
    named = " ".join(help_of(c) for c in ("sync", "plan", "run"))
    for key in KEYS:
        variable = f"{ENV_PREFIX}{key.upper()}"
        in_list = re.search(rf"\b{key}\b", listed) is not None
        assert in_list or f"env var: {variable};" in named, key
    assert re.search(r"\bqps\b", listed) and re.search(r"\btimeout\b", listed)


@pytest.mark.parametrize("args", [(), *([c] for c in cli.commands), ("restart", "redis")])
def test_each_command_has_an_example(args: tuple[str, ...]):
    assert "Example:" in help_of(*args)


def exit_codes(*args: str) -> dict[int, str]:
    result = CliRunner().invoke(cli, [*args, "--help"], terminal_width=200)
    block = result.output.split("Exit codes:\n", 1)[1]
    lines = [m for line in block.splitlines() if (m := re.match(r"\s+(\d+)\s+(.*)", line))]
    return {int(m[1]): m[2] for m in lines}


@pytest.mark.parametrize(
    ("command", "want"),
    [
        (
            "sync",
            {
                turn.EXIT_OK: "no errors",
                turn.EXIT_FAILED: "some objects failed",
                turn.EXIT_USAGE: "bad usage or config",
                turn.EXIT_UNREACHABLE: "unreachable",
                turn.EXIT_TIMEOUT: "the timeout passed",
            },
        ),
        (
            "plan",
            {
                turn.EXIT_OK: "no errors",
                turn.EXIT_FAILED: "some objects failed",
                turn.EXIT_USAGE: "bad usage or config",
                turn.EXIT_CHANGES: "changes are pending",
                turn.EXIT_UNREACHABLE: "unreachable",
            },
        ),
        ("run", {turn.EXIT_OK: "SIGTERM", turn.EXIT_USAGE: "bad usage or config"}),
        (
            "check",
            {
                turn.EXIT_OK: "every check passed",
                turn.EXIT_FAILED: "some check failed",
                turn.EXIT_USAGE: "bad usage",
                turn.EXIT_UNREACHABLE: "cannot be reached",
            },
        ),
    ],
)
def test_exit_codes_listed_are_the_turns(command: str, want: dict[int, str]):
    listed = exit_codes(command)
    assert set(listed) == set(want)
    for code, words in want.items():
        assert words in listed[code], (code, listed[code])
