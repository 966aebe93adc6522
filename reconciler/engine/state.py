"""What a pass remembers for the next one that the cluster does not hold: the
pod report's previous view, and work it may skip (never knowledge: a pass
without it plans the same).

The daemon keeps it in memory; one-shot runs keep it in ``--state-file`` so
that cron-driven passes still report transitions. Failure counts are not here:
they live in each object's status, so every mode backs off alike. Written
atomically (rename) because a pass may be killed at any point.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from reconciler.engine.report import PodView
from reconciler.settled import NOTHING_SETTLED, Settled
from reconciler.snapshot import Snapshot

log = logging.getLogger(__name__)
VERSION = 1


@dataclass
class State:
    pod_views: dict[str, PodView] | None = None
    # Work a pass may skip, kept in memory only (a one-shot run starts
    # without them and does the same, slower): the last snapshot, whose
    # objects need not be decoded again at the same resourceVersion, and the
    # objects whose plan was empty (reconciler.settled).
    seen: Snapshot | None = None
    settled: Settled = NOTHING_SETTLED
    # Status fields of each kind the installed CRD prunes, said once per process.
    pruned: dict[str, frozenset[str]] = field(default_factory=dict)


def load(path: str | None) -> State:
    if not path or not Path(path).exists():
        return State()
    try:
        data = json.loads(Path(path).read_text())
        if data.get("version") != VERSION:
            raise ValueError(f"unsupported version {data.get('version')!r}")
        views = data.get("pod_views")
        return State(None if views is None else {k: PodView.from_json(v) for k, v in views.items()})
    except (OSError, ValueError, KeyError, TypeError) as exc:
        # A corrupt state file must not stop reconciling; it only costs a
        # report of every pod as added.
        log.warning("state file %s unreadable (%s); starting fresh", path, exc)
        return State()


def save(path: str | None, state: State) -> None:
    if not path:
        return
    data = {
        "version": VERSION,
        "pod_views": None
        if state.pod_views is None
        else {k: v.to_json() for k, v in state.pod_views.items()},
    }
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
