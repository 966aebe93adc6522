"""What a command came to in one cluster, and how that is printed.

A command builds one `Served` per cluster; `emit` prints one as the command
always has, and a list of them with each cluster named: text lines under
``[name]``, JSON keyed by cluster, and the exit code the worst of theirs.
The codes are reconciler/run/turn.py's, read from the command's turns.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import click

from reconciler.cli import render
from reconciler.result import PassResult
from reconciler.run.turn import (
    EXIT_UNREACHABLE,
    PASS_EXIT_CODES,
    WAIT_EXIT_CODES,
    plan_exit_code,
    worst,
)
from reconciler.run.wait import WaitResult


@dataclass(frozen=True)
class Served:
    """One cluster's part of a command's output."""

    code: int
    doc: dict[str, Any]  # its JSON
    lines: tuple[str, ...] = ()  # its text on stdout
    errors: tuple[str, ...] = field(default=())  # on stderr, one line each
    error: str | None = None  # why the cluster could not be served: the command's error


def unreachable(message: str) -> Served:
    doc = {"result": "unreachable", "error": message, "exit_code": EXIT_UNREACHABLE}
    return Served(EXIT_UNREACHABLE, doc, error=message)


def of_pass(result: PassResult) -> Served:
    if result.unreachable:
        return unreachable(result.unreachable)
    lines = (result.one_line(), *(f"  error: {err}" for err in result.errors))
    return Served(PASS_EXIT_CODES[result.outcome], result.summary(), lines)


def of_wait(waited: WaitResult, timeout: float) -> Served:
    result = waited.last
    if result.unreachable:
        return unreachable(result.unreachable)
    code = WAIT_EXIT_CODES[waited.end]
    wait_summary = {
        "result": str(waited.end),
        "passes": waited.passes,
        "seconds": round(waited.elapsed, 3),
        "timeout_seconds": timeout,
    }
    lines = [waited.one_line()]
    lines += [f"  {k.kind} {k}: {h.state}: {h.message}" for k, h in result.pending.items()]
    lines += [f"  error: {err}" for err in result.errors]
    doc = {**result.summary(), "wait": wait_summary, "exit_code": code}
    return Served(code, doc, tuple(lines))


def of_plan(result: PassResult, warnings: Sequence[str], detailed: bool) -> Served:
    if result.unreachable:
        return unreachable(result.unreachable)
    code = plan_exit_code(result, detailed)
    errors = (*(f"warning: {w}" for w in warnings), *(f"error: {e}" for e in result.errors))
    return Served(code, render.plan_doc(result.plan), (render.plan_text(result.plan),), errors)


def emit(served: Served, json_out: bool) -> int:
    """One cluster's output, as a command serving one cluster prints it."""
    if served.error is not None:
        click.echo(f"reconciler: error: {served.error}", err=True)
    if json_out:
        click.echo(json.dumps(served.doc, indent=2))
    elif served.error is None:
        click.echo("\n".join(served.lines))
    for line in served.errors:
        click.echo(line, err=True)
    return served.code


def emit_fleet(names: Sequence[str], each: Sequence[Served], json_out: bool) -> int:
    """Several clusters' output, each named; the exit code is the worst."""
    code = worst([s.code for s in each])
    for name, served in zip(names, each, strict=True):
        if served.error is not None:
            click.echo(f"reconciler: error: [{name}] {served.error}", err=True)
        for line in served.errors:
            click.echo(f"[{name}] {line}", err=True)
    if json_out:
        clusters = {
            name: {**s.doc, "exit_code": s.code} for name, s in zip(names, each, strict=True)
        }
        click.echo(json.dumps({"clusters": clusters, "exit_code": code}, indent=2))
        return code
    for name, served in zip(names, each, strict=True):
        text = served.lines if served.error is None else (f"unreachable: {served.error}",)
        for line in "\n".join(text).splitlines():
            click.echo(f"[{name}] {line}".rstrip())
    return code
