"""`reconciler check`: is this process's setup right, before its first pass?

Each check answers one question with a line a person can act on, ✓ or ✗,
and for each ✗ the command that fixes it, as `flux check --pre` and
`kubectl auth can-i` do. The checks only read, or ask the apiserver
questions that change nothing (SelfSubjectReview, SelfSubjectAccessReview,
a server-side dry run), so they are safe against a cluster in use.

This folder sits above `engine` and `run`: it asks what each needs.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Check:
    """One answer: ``ok``, what was found (``detail``), and for a failure the
    command or step that fixes it. ``fatal``: nothing after it can be asked
    (the cluster cannot be reached, or refuses who we are). ``warning``: it
    works, but not as safely as it could (with the step that makes it so)."""

    name: str
    ok: bool
    detail: str
    fix: str = ""
    fatal: bool = False
    warning: bool = False


def passed(name: str, detail: str) -> Check:
    return Check(name, True, detail)


def warned(name: str, detail: str, fix: str) -> Check:
    return Check(name, True, detail, fix, warning=True)


def failed(name: str, detail: str, fix: str, fatal: bool = False) -> Check:
    return Check(name, False, detail, fix, fatal)
