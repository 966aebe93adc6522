"""reconciler/daemon.py: what one tick leaves for the pace of the next."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from reconciler.daemon import Daemon
from reconciler.pacing import Pace, Why
from reconciler.result import PassResult


def crash() -> PassResult:
    raise RuntimeError("a bug in the pass")


def daemon(**kw: Any) -> Daemon:
    d = Daemon(crash, interval=30, jitter=0, min_interval=1, **kw)
    d.pace = Pace(8, Why.SETTLING, "nothing moved since the last change")
    return d


def test_a_crashed_pass_forgets_the_pace_it_was_settling_at() -> None:
    d = daemon()
    d.tick()
    assert d.pace is None


def test_a_standby_tick_forgets_the_pace_so_a_new_leader_starts_at_the_interval() -> None:
    d = daemon(elector=SimpleNamespace(is_leader=False))
    d.tick()
    assert d.pace is None
    assert d.passes == 0
