"""What happens around a pass, the same for every command that runs one.

`sync`, `plan` and `run` (and `check` or `restart` after them) differ in
what they print and how often they pass, not in this: each runs its passes
through `Passes`, with the `PassSetup` built once for the cluster. The state
file is read once and written after a pass that reached the cluster and
could write; the daemon's first pass in each cluster names the CRDs another
release installed; a pass that could not reach the cluster is logged where
no one else will say it; and a replica whose fence lets it write nothing
runs no pass (`Passes.standby`, which the daemon asks at each tick).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from reconciler.config import Config
from reconciler.engine import crd_release
from reconciler.engine import state as state_store
from reconciler.engine.sync import Mode, PassSetup, pass_once
from reconciler.result import PassResult

log = logging.getLogger("reconciler")


def mode_of(config: Config) -> Mode:
    """A pass's mode from its settings: `plan` asks for Mode.PLAN itself."""
    return Mode.DRY_RUN if config.dry_run else Mode.APPLY


@dataclass
class Passes:
    """One cluster's passes, called once per pass, each run with ``setup``.
    ``daemon``: the first pass warns of lagging CRDs, and an unreachable
    cluster is logged (a one-shot command prints it as its error)."""

    setup: PassSetup
    daemon: bool = False
    state: state_store.State = field(init=False)
    _first: bool = field(default=True, init=False)

    def __post_init__(self) -> None:
        self.state = state_store.load(self.setup.config.state_file)

    def __call__(self) -> PassResult:
        setup = self.setup
        if self._first and self.daemon:
            # In the cluster's own first pass, not before the loops start: a
            # cluster that hangs makes no other wait for its answer.
            for line in crd_release.lagging(setup.kube):
                log.warning("%s", line)
        self._first = False
        result = pass_once(setup, self.state)
        if result.unreachable:
            if self.daemon:
                log.error("%s", result.unreachable)
        elif setup.mode is Mode.APPLY:
            state_store.save(setup.config.state_file, self.state)
        return result

    def standby(self) -> str | None:
        """Why this replica runs no pass now: its fence lets it write nothing
        at all (the leader's Lease is another's, or a shard member holds no
        bucket), so the daemon ticks as a standby. None: it runs one (always,
        for a pass no Lease fences)."""
        setup = self.setup
        if setup.fenced_by.may_write():
            return None
        return "sharded: no bucket held" if setup.holder is not None else "not the leader"

    def lagging_crds(self) -> list[str]:
        """The installed CRDs of another release (`plan` lists them)."""
        return crd_release.lagging(self.setup.kube)
