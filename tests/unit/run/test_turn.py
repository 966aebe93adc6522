"""reconciler/run/turn.py: a turn is the pass the fence allows, then what is
said of it, in order; its exit codes are the commands'."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from reconciler.actions import DeletePod, Plan
from reconciler.config import Config
from reconciler.engine.runner import Passes
from reconciler.engine.sync import Mode, PassSetup
from reconciler.model import ObjKey
from reconciler.result import ApplyReport, PassResult
from reconciler.run.turn import (
    EXIT_CHANGES,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNREACHABLE,
    ResultLine,
    Turn,
    Turns,
    Unreached,
    plan_exit_code,
    worst,
)
from tests.unit.fakes import FakeKube

T0 = datetime(2026, 12, 1, 19, 10, 2, tzinfo=UTC)
REFUSED = "unauthorized: the cluster does not accept these credentials (401 Unauthorized: x)"
DOWN = "cannot reach the cluster: https://10.0.0.1:6443: connection refused"


def quiet() -> PassResult:
    return PassResult("p", Plan(), ApplyReport())


def unused(why: str = REFUSED) -> PassResult:
    return PassResult("p", Plan(), ApplyReport(), unreachable=why)


class Seen:
    """A witness that keeps what it saw, under a name, in a shared list."""

    def __init__(self, name: str, log: list[tuple[str, Turn]]) -> None:
        self.name, self.log = name, log

    def saw(self, turn: Turn) -> None:
        self.log.append((self.name, turn))


def test_a_turn_runs_the_pass_then_each_witness_in_order() -> None:
    seen: list[tuple[str, Turn]] = []
    result = quiet()
    turns = Turns(lambda: result, witnesses=(Seen("a", seen), Seen("b", seen)), clock=lambda: T0)
    turn = turns.take()
    assert turn == Turn(T0, result)
    assert seen == [("a", turn), ("b", turn)]


def test_a_standby_runs_no_pass_and_its_witnesses_are_told_why() -> None:
    seen: list[tuple[str, Turn]] = []
    ran: list[int] = []

    def one_pass() -> PassResult:
        ran.append(1)
        return quiet()

    turns = Turns(one_pass, lambda: "not the leader", (Seen("a", seen),), lambda: T0)
    turn = turns.take()
    assert ran == [] and turn == Turn(T0, standby="not the leader")
    assert seen == [("a", turn)] and turn.exit_code == EXIT_OK
    with pytest.raises(RuntimeError, match="not the leader"):
        turns.passed()  # a one-shot command is never fenced: say so, not exit 0


def test_a_pass_that_raises_is_said_by_no_witness() -> None:
    seen: list[tuple[str, Turn]] = []

    def crash() -> PassResult:
        raise ValueError("a bug")

    with pytest.raises(ValueError, match="a bug"):
        Turns(crash, witnesses=(Seen("a", seen),)).take()
    assert seen == []


def test_a_runners_turns_are_gated_by_its_fence() -> None:
    """`Turns.of` asks the runner's fence: the same gate for every command."""

    class Closed:
        def may_write(self, owner_uid: str | None = None) -> bool:
            return False

    setup = PassSetup(kube=FakeKube(), config=Config(), mode=Mode.PLAN, fence=Closed())
    turn = Turns.of(Passes(setup)).take()
    assert (turn.result, turn.standby) == (None, "not the leader")
    open_setup = replace(setup, fence=PassSetup(kube=FakeKube(), config=Config()).fenced_by)
    assert Turns.of(Passes(open_setup)).take().result is not None


def test_the_daemons_result_line_is_logged_for_a_pass_and_not_for_a_standby(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="reconciler.run.turn")
    result = quiet()
    ResultLine().saw(Turn(T0, result))
    ResultLine().saw(Turn(T0, standby="not the leader"))
    assert caplog.messages == [result.one_line()]


KEY = ObjKey("Redis", "ns", "r")
CHANGES = Plan((DeletePod(KEY, "ns", "r-0", "uid-0", "surplus"),))


@pytest.mark.parametrize(
    ("result", "detailed", "code"),
    [
        (quiet(), False, EXIT_OK),
        (quiet(), True, EXIT_OK),
        (PassResult("p", CHANGES, ApplyReport()), False, EXIT_OK),
        (PassResult("p", CHANGES, ApplyReport()), True, EXIT_CHANGES),
        (PassResult("p", CHANGES, ApplyReport(), errors=["LIST Xca: 403"]), True, EXIT_FAILED),
        (unused(DOWN), True, EXIT_UNREACHABLE),
    ],
)
def test_plans_exit_code(result: PassResult, detailed: bool, code: int) -> None:
    assert plan_exit_code(result, detailed) == code


def test_of_several_clusters_the_worst_code_wins() -> None:
    assert worst([EXIT_OK, EXIT_CHANGES]) == EXIT_CHANGES
    assert worst([EXIT_CHANGES, EXIT_FAILED, EXIT_OK]) == EXIT_FAILED
    assert worst([EXIT_UNREACHABLE, EXIT_FAILED]) == EXIT_UNREACHABLE


KINDS = ("Redis", "Xca")
NO_CRD = "LIST {0}: the {0} CRD is not installed (404); apply crds/ (`make install`)"


def test_unreached_counts_the_passes_in_a_row_from_the_first_ones_start() -> None:
    u = Unreached().after(unused(DOWN), T0, KINDS)
    u = u.after(unused(), T0 + timedelta(seconds=30), KINDS)
    assert (u.passes, u.since, u.why) == (2, T0, REFUSED)  # the last error, the first start
    assert u.trouble(3, T0 + timedelta(seconds=31)) is None
    u = u.after(unused(), T0 + timedelta(seconds=60), KINDS)
    assert u.trouble(3, T0 + timedelta(seconds=61)) == (
        "no pass has reached the cluster for 61s (3 passes in a row since"
        f" 2026-12-01 19:10:02 UTC): {REFUSED}"
    )
    assert u.after(quiet(), T0, KINDS) == Unreached()  # a pass that reaches it starts over
    listed = replace(quiet(), errors=["LIST Xca: 403 Forbidden: no"], observed={"Redis": 0})
    assert u.after(listed, T0, KINDS) == Unreached()  # it listed a kind: it could work


def test_passes_that_list_none_of_the_kinds_count_as_unable_to_use_the_cluster() -> None:
    """The pods listed, but every kind's LIST failed (its CRD missing, or
    RBAC refusing it): the pass reconciled nothing, and says why."""
    errors = [NO_CRD.format("Redis"), "LIST Pod: no", NO_CRD.format("Xca")]
    idle = replace(quiet(), errors=errors, observed={"Pod": 3})
    u = Unreached().after(idle, T0, KINDS).after(idle, T0 + timedelta(seconds=30), KINDS)
    assert u.trouble(2, T0 + timedelta(seconds=31)) == (
        "no pass has listed a kind it reconciles for 31s (2 passes in a row since"
        f" 2026-12-01 19:10:02 UTC): {NO_CRD.format('Redis')}; {NO_CRD.format('Xca')}"
    )
    # Unreachable next: said as such, the streak kept.
    down = u.after(unused(DOWN), T0 + timedelta(seconds=60), KINDS)
    assert (down.passes, down.why, down.reached) == (3, DOWN, False)
    # No kind listed and none failed (nothing asked of them): nothing to say.
    assert Unreached().after(replace(quiet(), observed={"Pod": 3}), T0, KINDS) == Unreached()
