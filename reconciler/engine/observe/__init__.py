"""Observe: the LISTs of one pass into a Snapshot (`observation.observe`).

Modules: `observation` (the pass's reads, in order, and the Observation),
`lister` (how a LIST is asked for and what its failure means), `churn` (how
much of each kind moved since the pass before), `orphans` (owners missing from
a LIST, confirmed gone by a GET), `named` (what
holds a desired name without our label), `namespaces` (deleted and missing
namespaces; where to list pods), `scope` (a sharded replica's share).
"""

from reconciler.engine.observe.observation import Observation, observe

__all__ = ["Observation", "observe"]
