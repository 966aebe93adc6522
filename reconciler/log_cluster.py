"""The name of the cluster the current thread serves, for its log lines.

A command or daemon serving several clusters runs each in threads of its
own; the name travels as a context variable (`in_cluster`), so no module
between the CLI and a log call passes it along. Threads started while
serving a cluster run in a copy of that context (`engine/apply.py`,
`engine/events.py`, the daemon's lease threads).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import ParamSpec, TypeVar

# Empty when the process serves one cluster named by nothing.
CLUSTER: contextvars.ContextVar[str] = contextvars.ContextVar("cluster", default="")

P = ParamSpec("P")
T = TypeVar("T")


def in_cluster(name: str, work: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """Run ``work`` with its log lines (and those of the threads it starts
    from a copy of its context) naming the cluster ``name``."""

    def named() -> T:
        CLUSTER.set(name)
        return work(*args, **kwargs)

    return contextvars.copy_context().run(named)
