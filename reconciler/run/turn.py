"""A turn: one pass, or a standby's tick, and all that is said of it.

Every command that runs passes takes them through `Turns`: `plan` and `sync`
take one, `sync --wait` one at each step of its wait, `run` one at each tick
of a cluster's loop. A turn asks the pass's fence first (a standby runs no
pass), runs the pass, then hands the turn to its witnesses in order: the
daemon's result line in the log (`ResultLine`), its metrics, readiness and
systemd's notifications (`Vigil`), a pipeline's echo. What a command exits
with is read from its turns by the table here (`EXIT_*`), which the help
texts and docs/operations.md quote: cron and CI act on one set of codes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol

from reconciler.result import PassOutcome, PassResult, plural
from reconciler.run import sdnotify

if TYPE_CHECKING:  # prometheus_client is loaded only when metrics are served
    from reconciler.engine.runner import Passes
    from reconciler.run.metrics import ClusterMetrics
    from reconciler.run.pacing import Pace

log = logging.getLogger(__name__)


class WaitEnd(StrEnum):
    """How `sync --wait`'s turns ended (run/wait.py); the value is the
    ``wait.result`` of `sync -o json`."""

    CONVERGED = "converged"
    STUCK = "stuck"
    TIMEOUT = "timeout"
    UNREACHABLE = "unreachable"


EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_TIMEOUT = 0, 1, 2, 3, 4
# `plan --detailed-exitcode`: changes are pending (never a usage error there).
EXIT_CHANGES = 2
# Of several clusters' codes, the command exits with the last of these.
WORST_LAST = (EXIT_OK, EXIT_CHANGES, EXIT_FAILED, EXIT_TIMEOUT, EXIT_UNREACHABLE)
PASS_EXIT_CODES = {
    PassOutcome.OK: EXIT_OK,
    PassOutcome.ERRORS: EXIT_FAILED,
    PassOutcome.UNREACHABLE: EXIT_UNREACHABLE,
}
WAIT_EXIT_CODES = {
    WaitEnd.CONVERGED: EXIT_OK,
    WaitEnd.STUCK: EXIT_FAILED,
    WaitEnd.TIMEOUT: EXIT_TIMEOUT,
    WaitEnd.UNREACHABLE: EXIT_UNREACHABLE,
}


def plan_exit_code(result: PassResult, detailed: bool) -> int:
    """`plan`'s code; ``detailed`` (`--detailed-exitcode`): pending changes say so."""
    if result.outcome is not PassOutcome.OK:
        return PASS_EXIT_CODES[result.outcome]
    return EXIT_CHANGES if detailed and result.plan.actions else EXIT_OK


def worst(codes: Sequence[int]) -> int:
    """Of several clusters' codes, the one a command serving them exits with."""
    return max(codes, key=WORST_LAST.index)


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Turn:
    """What a tick came to: the pass it ran, or why it ran none."""

    started: datetime
    result: PassResult | None = None  # None: a standby's tick
    standby: str | None = None  # why no pass ran: the fence lets this replica write nothing

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.result is None else PASS_EXIT_CODES[self.result.outcome]


class Witness(Protocol):
    """Something said of each turn, as it ends: a log line, metrics, a notification."""

    def saw(self, turn: Turn) -> None: ...


@dataclass
class Turns:
    """One cluster's turns: ``one_pass`` run unless ``standby`` says why
    not, each turn handed to ``witnesses`` in order. A pass that raises is
    said by none of them: the daemon's loop logs it and starts over."""

    one_pass: Callable[[], PassResult]
    standby: Callable[[], str | None] = lambda: None
    witnesses: Sequence[Witness] = ()
    clock: Callable[[], datetime] = _now

    @classmethod
    def of(cls, passes: Passes, *witnesses: Witness) -> Turns:
        """A cluster's turns through its runner, gated by its fence."""
        return cls(passes, passes.standby, witnesses)

    def take(self) -> Turn:
        started = self.clock()
        why = self.standby()
        if why is not None:
            log.debug("%s; skipping this pass", why)
            turn = Turn(started, standby=why)
        else:
            turn = Turn(started, self.one_pass())
        for witness in self.witnesses:
            witness.saw(turn)
        return turn

    def passed(self) -> PassResult:
        """A turn of a command that no Lease fences: its pass's result."""
        turn = self.take()
        if turn.result is None:
            raise RuntimeError(f"a one-shot command's pass was fenced: {turn.standby}")
        return turn.result


class ResultLine:
    """The daemon's line for each pass, in its log: what a pass did, its
    errors counted, its API requests (`PassResult.one_line`)."""

    def saw(self, turn: Turn) -> None:
        if turn.result is not None:
            log.info("%s", turn.result.one_line())


@dataclass(frozen=True)
class Unreached:
    """The passes in a row that could not use the cluster: none of their
    LISTs reached it, or it refused every one for the credentials (401) or
    for RBAC (403), which the error's first word says; or they reached it
    but could list none of the kinds they reconcile (their CRDs not
    installed, or RBAC refusing them), so they did nothing. A pass that
    lists a kind again starts the count over."""

    passes: int = 0
    since: datetime | None = None  # when the first of them started
    why: str = ""  # the last one's error
    reached: bool = False  # the last one reached the cluster, and listed no kind

    def after(self, result: PassResult, started: datetime, kinds: Sequence[str]) -> Unreached:
        if result.unreachable:
            return Unreached(self.passes + 1, self.since or started, result.unreachable)
        unlisted = _unlisted(result, kinds)
        if unlisted is None:
            return Unreached()
        return Unreached(self.passes + 1, self.since or started, unlisted, reached=True)

    def trouble(self, after: int, now: datetime) -> str | None:
        """Why the cluster is not ready, once ``after`` passes in a row could not use it."""
        if self.passes < after or self.since is None:
            return None
        seconds = (now - self.since).total_seconds()
        passes = plural(self.passes, "pass", "passes")
        since = self.since.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        what = "listed a kind it reconciles" if self.reached else "reached the cluster"
        return (
            f"no pass has {what} for {seconds:.0f}s ({passes} in a row since {since}): {self.why}"
        )


def _unlisted(result: PassResult, kinds: Sequence[str]) -> str | None:
    """The errors of a pass that listed none of ``kinds``, each of whose
    LISTs failed; None when it listed one (or had no LIST of them fail)."""
    if any(kind in result.observed for kind in kinds):
        return None
    failed = tuple(f"LIST {kind}:" for kind in kinds)
    said = [err for err in result.errors if err.startswith(failed)]
    return "; ".join(said) if said else None


class Vigil:
    """What the daemon says of one cluster's turns: its metrics, whether the
    cluster is ready (/readyz, the log), and systemd's READY=1 (the first
    turn), STATUS= and WATCHDOG=1.

    The watchdog is fed also while no pass can use the cluster: it is for a
    process that hangs, which a restart mends; a refused token, lost RBAC or
    an apiserver that is down is not mended by one, and restarts would only
    end at the unit's start limit, after which nothing retries once the
    cluster is back. The STATUS line and /readyz say it instead, and the next
    pass that reaches the cluster clears them."""

    def __init__(
        self,
        *,
        name: str = "",
        metrics: ClusterMetrics | None = None,
        requests: Callable[[], dict[tuple[str, str], int]] = dict,
        lease_trouble: Callable[[], str | None] = lambda: None,
        unready_after: int,
        kinds: Sequence[str] = (),
        clock: Callable[[], datetime] = _now,
    ) -> None:
        self.name = name  # empty for the one cluster of a process that serves one
        self.metrics = metrics
        self.requests = requests
        self.lease_trouble = lease_trouble  # why this replica cannot tell whether anyone reconciles
        self.unready_after = unready_after
        self.kinds = kinds  # the kinds a pass reconciles: one listed is a pass that could work
        self.clock = clock
        self.turns = 0
        self.unreached = Unreached()
        # The STATUS= line; the Daemon gives every cluster of the process the same one.
        self.status = sdnotify.Status()
        self.said: dict[str, str | None] = {}  # each trouble as last logged

    def saw(self, turn: Turn) -> None:
        self.turns += 1
        result = turn.result
        if self.metrics is not None:
            if result is not None:
                self.metrics.record_pass(result, self.requests())
            else:
                self.metrics.record_requests(self.requests())
                self.metrics.tick()
        # A standby has no passes to count: its Lease's trouble speaks for it.
        self.unreached = (
            self.unreached.after(result, turn.started, self.kinds)
            if result is not None
            else Unreached()
        )
        if self.turns == 1:
            sdnotify.notify("READY=1")
        reach, lease = self.reach_trouble(), self.lease_trouble()
        self._say("reach", reach, "a pass could use the cluster")
        self._say("lease", lease, "the Lease is held or seen")
        line = result.one_line() if result is not None else "standby: nothing held"
        self.status.say(self.name, line, reach or lease)
        sdnotify.notify("WATCHDOG=1")

    def paced(self, pace: Pace, early: bool) -> None:
        """The pace the turn set; ``early``: its pass comes before the interval."""
        if self.metrics is None:
            return
        self.metrics.record_pace(pace)
        if early:
            self.metrics.count_early(str(pace.why))

    def trouble(self) -> str | None:
        """Why this cluster is not ready: /readyz fails with it, and
        systemd's status line shows it."""
        return self.reach_trouble() or self.lease_trouble()

    def reach_trouble(self) -> str | None:
        """``unready_after`` passes in a row could not use the cluster."""
        return self.unreached.trouble(self.unready_after, self.clock())

    def _say(self, what: str, trouble: str | None, cleared: str) -> None:
        """Log a change of one trouble once, not at every tick."""
        before = self.said.get(what)
        if trouble is not None and before is None:
            log.error("not ready: %s", trouble)
        elif trouble is None and before is not None:
            log.info("ready again: %s", cleared)
        self.said[what] = trouble
