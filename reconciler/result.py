"""What a pass did, as plain values: each action's outcome and the pass summary.

A leaf: the executor fills it in, and the CLI, daemon and metrics read it
without importing the client, so serving metrics pulls in no HTTP library.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from reconciler.actions import Action, Plan
from reconciler.backoff import DEFAULT_REASON
from reconciler.health import Health, not_ready, not_ready_json
from reconciler.model import ObjKey


class Result(StrEnum):
    """The outcome of one action; its value is the word in logs and summaries."""

    OK = "ok"
    GONE = "gone"  # 404: the target went away; nothing left to do
    CONFLICT = "conflict"  # 409: someone else wrote first; the next pass sees it
    FAILED = "failed"
    # 429 past the retries: the cluster's load. Not the object's failure: no
    # status, no event, no backoff; the next pass writes it.
    THROTTLED = "throttled"
    # An eviction a disruption budget does not allow now: the pod stays, the
    # status says why, and a later pass asks again. No failure, no backoff.
    REFUSED = "refused"
    SKIPPED = "skipped"  # an earlier action of the same object did not succeed
    DRY_RUN = "dry-run"


@dataclass(frozen=True, slots=True)
class Outcome:
    action: Action
    result: Result
    error: str | None = None
    reason: str = DEFAULT_REASON


def plural(n: int, noun: str, many: str | None = None) -> str:
    """A count with its noun: "1 action", "2 actions"; "2 passes" with ``many``."""
    return f"{n} {noun}" if n == 1 else f"{n} {many or noun + 's'}"


@dataclass
class ApplyReport:
    outcomes: list[Outcome] = field(default_factory=list)
    # Status fields the apiserver dropped from our writes, by kind, with an
    # object of that kind each was dropped from: the installed CRD lacks them.
    pruned: dict[str, dict[str, ObjKey]] = field(default_factory=dict)

    def counts(self) -> Counter[tuple[str, str, str]]:
        return Counter((o.action.kind, o.action.verb, o.result) for o in self.outcomes)

    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.result is Result.FAILED]

    def throttled(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.result is Result.THROTTLED]


class PassOutcome(StrEnum):
    OK = "ok"
    ERRORS = "errors"  # some objects or LISTs failed; the others were reconciled
    UNREACHABLE = "unreachable"  # no LIST reached the cluster


@dataclass
class PassResult:
    pass_id: str
    plan: Plan
    applied: ApplyReport
    errors: list[str] = field(default_factory=list)
    unreachable: str | None = None
    duration: float = 0.0
    # Wall and client CPU seconds of observing and planning: what looking at
    # the cluster costs, apart from the writes (the daemon's pace budgets it).
    look_wall: float = 0.0
    look_cpu: float = 0.0
    requests: int = 0
    writes: int = 0
    bytes_received: int = 0
    by_code: dict[str, int] = field(default_factory=dict)
    observed: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    health: dict[ObjKey, Health] = field(default_factory=dict)  # as the pass left each object
    # Kinds whose LIST answered no list, or left out an owner that exists:
    # not seen this pass (engine/observe), each counted in the metrics.
    malformed: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    # The kind of each pod's owner not asked for (engine/observe/orphans.py
    # `Refused`): the pod is left alone; counted in the metrics.
    refused: list[str] = field(default_factory=list)

    @property
    def pending(self) -> dict[ObjKey, Health]:
        return not_ready(self.health)

    @property
    def outcome(self) -> PassOutcome:
        if self.unreachable:
            return PassOutcome.UNREACHABLE
        return PassOutcome.ERRORS if self.errors else PassOutcome.OK

    def action_counts(self) -> dict[str, int]:
        counts: Counter[str] = Counter()
        for (kind, verb, result), n in self.applied.counts().items():
            counts[f"{kind}/{verb}/{result}"] += n
        return dict(sorted(counts.items()))

    def summary(self) -> dict[str, Any]:
        return {
            "pass_id": self.pass_id,
            "result": str(self.outcome),
            "duration_seconds": round(self.duration, 3),
            "observed": self.observed,
            "planned": len(self.plan.actions),
            "actions": self.action_counts(),
            "backing_off": sorted(str(k) for k in self.plan.backing_off),
            "not_ready": not_ready_json(self.health),
            "errors": self.errors,
            "warnings": self.warnings,
            "api_requests": self.requests,
            "api_writes": self.writes,
            "api_requests_by_code": self.by_code,
            "bytes_received": self.bytes_received,
        }

    def one_line(self) -> str:
        acts = ", ".join(f"{k}={v}" for k, v in self.action_counts().items()) or "no changes"
        return (
            f"pass {self.pass_id} {self.outcome} in {self.duration:.2f}s: "
            f"{acts}; {plural(len(self.errors), 'error')}; "
            + (f"{len(throttled)} throttled; " if (throttled := self.applied.throttled()) else "")
            + (f"{plural(len(self.warnings), 'warning')}; " if self.warnings else "")
            + f"{plural(self.requests, 'API request')}"
        )
