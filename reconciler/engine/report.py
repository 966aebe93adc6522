"""The pod report: what changed in the pods since the last pass.

A pure diff of two views, so one-shot runs can report transitions across runs
by persisting the previous view (``--state-file``). Absent or partial
conditions are normal: each condition is looked up by type, never by index.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.model import Pod

REPORTED_CONDITIONS = ("PodScheduled", "Initialized", "ContainersReady", "Ready")
# With no previous view (a first run, or cron without --state-file), every pod
# is "added". Past this many, one summary line is logged at INFO and the pod
# lines at DEBUG, so a cron pass over thousands of pods does not log thousands.
FIRST_VIEW_INFO_LINES = 50


@dataclass(frozen=True)
class PodView:
    phase: str
    conditions: Mapping[str, tuple[str, str]]  # type -> (status, reason)

    def to_json(self) -> dict[str, Any]:
        return {"phase": self.phase, "conditions": {k: list(v) for k, v in self.conditions.items()}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PodView:
        conds = data.get("conditions") or {}
        return cls(
            str(data.get("phase", "Unknown")),
            {str(k): (str(v[0]), str(v[1])) for k, v in conds.items()},
        )


@dataclass(frozen=True)
class ReportLine:
    pod: str  # namespace/name
    message: str


def view_of(pod: Pod) -> PodView:
    conds = {c.type: (c.status, c.reason) for c in pod.conditions if c.type in REPORTED_CONDITIONS}
    return PodView(pod.phase, conds)


def views(pods: Iterable[Pod]) -> dict[str, PodView]:
    """Pods in the same phase and conditions share one view (frozen, never
    changed): most pods are alike, and a view each held 0.5 kB a pod
    between passes."""
    made: dict[tuple[str, tuple[tuple[str, str, str], ...]], PodView] = {}
    out: dict[str, PodView] = {}
    for p in pods:
        key = (p.phase, tuple((c.type, c.status, c.reason) for c in p.conditions))
        view = made.get(key)
        if view is None:
            view = made[key] = view_of(p)
        out[f"{p.namespace}/{p.name}"] = view
    return out


def diff(
    previous: Mapping[str, PodView] | None, current: Mapping[str, PodView]
) -> list[ReportLine]:
    """Lines for added, changed and deleted pods. With no previous view
    (first run), every pod is reported as added."""
    prev = previous or {}
    lines: list[ReportLine] = []
    for key in sorted(current):
        now = current[key]
        old = prev.get(key)
        if old is None:
            lines.append(ReportLine(key, f"added, phase {now.phase}"))
            continue
        if old.phase != now.phase:
            lines.append(ReportLine(key, f"phase {old.phase} -> {now.phase}"))
        for ctype in REPORTED_CONDITIONS:
            before, after = old.conditions.get(ctype), now.conditions.get(ctype)
            if after is None or before == after:
                continue
            was = before[0] if before else "absent"
            reason = f" ({after[1]})" if after[1] else ""
            lines.append(ReportLine(key, f"condition {ctype} {was} -> {after[0]}{reason}"))
    for key in sorted(set(prev) - set(current)):
        lines.append(ReportLine(key, f"does not exist anymore (last phase {prev[key].phase})"))
    return lines
