"""The executor: the only code that writes to the cluster.

Actions of one object run in the plan's order (its kind's declared
`WriteOrder`); different objects run concurrently on a bounded pool. An
object whose write fails stops there, and nothing else is affected: 404 and
409 mean "see it again next pass"; a 429 past the client's retries is the
cluster's load, and ends the pass's writes with nothing recorded on the
objects (no status, no event, no backoff); anything else is a failure
recorded for backoff. The requests themselves are `engine/writes.py`'s.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from reconciler.actions import (
    Action,
    EventSpec,
    OwnerWrites,
    PatchStatus,
    Plan,
)
from reconciler.backoff import EVICTION_REFUSED, WriteError
from reconciler.client.interface import UNFENCED, Client, WriteFence
from reconciler.engine.bounded import completed
from reconciler.engine.events import EventSink, merge_pod_events
from reconciler.engine.failures import (
    NO_STATUS_SUBRESOURCE,
    WriteFailed,
    WriteRefused,
    WriteThrottled,
    conflict_reason,
    failure_event_reason,
    reason_of,
)
from reconciler.engine.writes import ObjectRun, Writer
from reconciler.kinds.registry import kind_of
from reconciler.model import ObjKey
from reconciler.result import ApplyReport, Outcome, Result

log = logging.getLogger(__name__)


class _Progress:
    """Logs "applied X/Y objects" every EVERY seconds of a long pass."""

    EVERY = 5.0

    def __init__(self, total: int, pass_id: str) -> None:
        self.total, self.done, self.pass_id = total, 0, pass_id
        self.started = self.last = time.monotonic()

    def step(self) -> None:
        self.done += 1
        now = time.monotonic()
        if now - self.last >= self.EVERY and self.done < self.total:
            self.last = now
            rate = self.done / (now - self.started)
            log.info(
                "pass %s: applied %d/%d objects (%.0f/s, about %.0fs left)",
                self.pass_id,
                self.done,
                self.total,
                rate,
                (self.total - self.done) / rate,
                extra={"pass_id": self.pass_id},
            )


@dataclass(frozen=True)
class ApplyOptions:
    """How a pass writes: objects at once, logged only (``dry_run``), and
    the pass's id in each line."""

    concurrency: int = 1
    dry_run: bool = False
    pass_id: str = ""


class Executor:
    """Runs a plan's writes in its order, each object's on one worker. What
    it knows of an object besides its writes is the plan's (`Plan.owners`):
    its events' reference, its shard bucket, and its status after a failed
    write. ``fence`` is asked before each object's writes (for its bucket):
    a replica that lost its Lease (or the object's bucket) mid-pass stops
    writing at once, since another may have taken over."""

    def __init__(
        self,
        kube: Client,
        events: EventSink,
        options: ApplyOptions = ApplyOptions(),
        fence: WriteFence = UNFENCED,
    ) -> None:
        self.kube, self.events, self.fence = kube, events, fence
        self.concurrency = max(1, options.concurrency)
        self.dry_run, self.pass_id = options.dry_run, options.pass_id
        self.owners: Mapping[ObjKey, OwnerWrites] = {}
        self.writer = Writer(kube, self._events)
        # Set by a write throttled past its retries: no new write starts in this pass.
        self.throttled = threading.Event()

    def run(self, plan: Plan) -> ApplyReport:
        report = ApplyReport()
        self.owners = plan.owners
        groups = plan.by_owner()
        if not groups:
            return report
        if self.dry_run:
            for owner, actions in groups.items():
                for action in actions:
                    self._log(owner, action, Result.DRY_RUN)
                    report.outcomes.append(Outcome(action, Result.DRY_RUN))
            return report
        workers = min(self.concurrency, len(groups))
        progress = _Progress(len(groups), self.pass_id)
        ran: list[list[Outcome]] = [[] for _ in groups]
        for i, outcomes in completed(self._run_owner, list(groups.items()), workers, "apply"):
            ran[i] = outcomes
            progress.step()
        report.outcomes = [outcome for outcomes in ran for outcome in outcomes]
        report.pruned = self.writer.pruned
        return report

    def _log(self, owner: ObjKey, action: Action, result: Result, error: str | None = None) -> None:
        level = logging.WARNING if result is Result.FAILED else logging.INFO
        text = action.describe() + (f": {error}" if error else "")
        log.log(
            level,
            "[%s] %s -> %s",
            owner,
            text,
            result,
            extra={
                "object": str(owner),
                "kind": owner.kind,
                "action": str(action.verb),
                "result": str(result),
                "pass_id": self.pass_id,
            },
        )

    def _may_write(self, owner: ObjKey) -> bool:
        """The fence, for the owner's bucket. An owner the plan does not name
        (a plan built by hand) has no known bucket: written only unfenced."""
        found = self.owners.get(owner)
        if found is None:
            return self.fence is UNFENCED
        return self.fence.may_write(found.owner_uid)

    def _run_owner(self, group: tuple[ObjKey, list[Action]]) -> list[Outcome]:
        owner, actions = group
        outcomes: list[Outcome] = []
        run = ObjectRun()
        try:
            self._run_actions(owner, actions, outcomes, run)
        finally:
            self._events(merge_pod_events(run.pod_events))
        return outcomes

    def _run_actions(
        self, owner: ObjKey, actions: list[Action], outcomes: list[Outcome], run: ObjectRun
    ) -> None:
        """In order; the first action that does not succeed skips the rest."""
        for i, action in enumerate(actions):
            if self.throttled.is_set() or not self._may_write(owner):
                outcomes.extend(Outcome(a, Result.SKIPPED) for a in actions[i:])
                return
            try:
                result = self.writer.do(action, run)
            except WriteRefused as exc:
                self._refused(owner, action, str(exc), outcomes, run)
                outcomes.extend(Outcome(a, Result.SKIPPED) for a in actions[i + 1 :])
                return
            except WriteThrottled as exc:
                self._log(owner, action, Result.THROTTLED, str(exc))
                outcomes.append(Outcome(action, Result.THROTTLED, str(exc)))
                outcomes.extend(Outcome(a, Result.SKIPPED) for a in actions[i + 1 :])
                self._stop_writing()
                return
            except WriteFailed as exc:
                self._log(owner, action, Result.FAILED, str(exc))
                outcomes.append(Outcome(action, Result.FAILED, str(exc), exc.reason))
                outcomes.extend(Outcome(a, Result.SKIPPED) for a in actions[i + 1 :])
                if exc.reason == NO_STATUS_SUBRESOURCE:
                    return  # no status can say it; the pass's errors do
                error = WriteError(str(exc), exc.reason)
                warned = self._status_after_failure(owner, error, outcomes, run)
                if not warned and self._may_write(owner):
                    self._warn(owner, action, str(exc), exc.reason)
                return
            self._log(owner, action, result)
            outcomes.append(Outcome(action, result))
            if result is Result.CONFLICT:
                outcomes.extend(Outcome(a, Result.SKIPPED) for a in actions[i + 1 :])
                return

    def _refused(
        self, owner: ObjKey, action: Action, why: str, outcomes: list[Outcome], run: ObjectRun
    ) -> None:
        """The pod stays; the status says which budget holds it (written only
        when that changes, so a rollout held for an hour costs one eviction
        request a pass and no other write)."""
        log.warning(
            "[%s] %s -> %s: %s",
            owner,
            action.describe(),
            Result.REFUSED,
            why,
            extra={"object": str(owner), "result": str(Result.REFUSED), "pass_id": self.pass_id},
        )
        outcomes.append(Outcome(action, Result.REFUSED, why, EVICTION_REFUSED))
        pod = action.target.name
        self._status_after_failure(owner, WriteError(why, EVICTION_REFUSED, pod), outcomes, run)

    def _stop_writing(self) -> None:
        """The apiserver throttled a write past its retries: it is overloaded,
        and this pass's other writes would only add to its load (and crowd out
        the Lease renewals). They wait for the next pass."""
        if not self.throttled.is_set():
            self.throttled.set()
            log.warning(
                "pass %s: the apiserver throttles our writes (429); the rest wait for the next one",
                self.pass_id,
                extra={"pass_id": self.pass_id},
            )

    def _status_after_failure(
        self, owner: ObjKey, error: WriteError, outcomes: list[Outcome], run: ObjectRun
    ) -> bool:
        """Write the status that says what failed, in the same run of the object
        (so with its latest resourceVersion). Tried once: its own failure is
        logged and counted, not retried. True if it posted the Warning (the
        Degraded event), so the failure is not announced twice."""
        warned = False
        landed = [o.action for o in outcomes if o.result is Result.OK]
        found = self.owners.get(owner)
        rule = None if found is None else found.status_after
        for action in rule(error, landed) if rule is not None else ():
            if not self._may_write(owner):
                return warned
            try:
                result = self.writer.do(action, run)
            except (WriteFailed, WriteThrottled) as exc:
                self._log(owner, action, Result.FAILED, str(exc))
                outcomes.append(Outcome(action, Result.FAILED, str(exc), reason_of(exc)))
                return warned
            self._log(owner, action, result)
            outcomes.append(Outcome(action, result))
            warned |= (
                result is Result.OK and isinstance(action, PatchStatus) and bool(action.events)
            )
        return warned

    def _warn(self, owner: ObjKey, action: Action, error: str, reason: str) -> None:
        """Failures are reported on the object too, where `kubectl describe` shows them."""
        found = self.owners.get(owner)
        ref = None if found is None else found.ref
        kind = kind_of(owner)
        if ref is None or kind is None:
            return
        why = reason if reason == conflict_reason(action.kind) else failure_event_reason(action)
        message = f"{action.describe()}: {error}"
        self._events([EventSpec(ref, "Warning", why, message, kind.component)])

    def _events(self, events: Sequence[EventSpec]) -> None:
        for ev in events:
            self.events.post(ev)
