"""Which clusters a command serves, and serving each on its own.

One cluster, as kubectl picks it, unless the command is given a list: more
than one ``--context``, ``--all-contexts`` (every context of the
kubeconfig), or a ``clusters`` list in the config file. Each cluster of a
list runs in a thread of its own, with its own client, credentials and state
file, so one that is down, throttled or refusing the credentials holds up no
other; the command waits for all and reports each.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from reconciler.cli.settings import CLUSTER_CONTEXT, CLUSTER_NAME, Layers
from reconciler.client.locate import context_names
from reconciler.config import Config, ConfigError
from reconciler.log_cluster import in_cluster

T = TypeVar("T")
U = TypeVar("U")


@dataclass(frozen=True)
class Cluster:
    """One cluster a command serves: its name in logs, output and metrics,
    and its settings (its ``context`` among them), with where each key a
    layer set came from (`Traced.sources`)."""

    name: str
    config: Config
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class Fleet:
    """The clusters of one command. ``listed``: they came as a list, so the
    output names each, even when the list holds one."""

    clusters: tuple[Cluster, ...]
    listed: bool

    @property
    def parallel(self) -> int:
        return min(len(self.clusters), self.clusters[0].config.clusters_in_parallel)

    def each(self, work: Callable[[Cluster, U], T], per_cluster: Sequence[U]) -> list[T]:
        """``work(cluster, its item of per_cluster)`` for every cluster, in the
        fleet's order; for a list, in threads (at most ``clusters_in_parallel``
        at once), each logging under its cluster's name."""
        pairs = list(zip(self.clusters, per_cluster, strict=True))
        if not self.listed:
            return [work(c, item) for c, item in pairs]
        with ThreadPoolExecutor(self.parallel, thread_name_prefix="cluster") as pool:
            futures = [pool.submit(in_cluster, c.name, work, c, item) for c, item in pairs]
            return [f.result() for f in futures]


def resolve(
    layers: Layers,
    flags: Mapping[str, Any],
    contexts: Sequence[str] = (),
    all_contexts: bool = False,
) -> Fleet:
    """The clusters named by the flags, else by the file, else the one
    cluster of the kubeconfig's (or the file's) context."""
    if contexts and all_contexts:
        raise ConfigError("--context and --all-contexts: choose one")
    entries = layers.clusters
    if all_contexts:
        wanted, by = list(context_names(layers.config(flags))), "flag --all-contexts"
    elif contexts:
        wanted, by = list(dict.fromkeys(contexts)), "flag --context"
    else:
        wanted, by = [str(e[CLUSTER_NAME]) for e in entries], ""
    if not wanted:
        traced = layers.traced(flags)
        return Fleet((Cluster("", traced.config, traced.sources),), listed=False)
    listed = all_contexts or len(wanted) > 1 or not contexts
    clusters = tuple(_cluster(layers, flags, entries, w, listed, by) for w in wanted)
    return Fleet(clusters, listed)


def _cluster(
    layers: Layers,
    flags: Mapping[str, Any],
    entries: Sequence[Mapping[str, Any]],
    wanted: str,
    listed: bool,
    by: str,
) -> Cluster:
    """The file's entry named (or with the context) ``wanted``, else a
    cluster of that context with the file's top-level settings. Its context
    is passed as a flag, so no RECONCILER_CONTEXT moves it; ``by`` names
    the flag that named a cluster the file does not list."""
    entry = next((e for e in entries if e[CLUSTER_NAME] == wanted), None)
    entry = entry or next((e for e in entries if e.get(CLUSTER_CONTEXT) == wanted), None)
    context = str(entry[CLUSTER_CONTEXT]) if entry else wanted
    source = layers.entry_source(entry) if entry else by
    traced = layers.traced({**flags, "context": context}, entry, {"context": source})
    config = traced.config
    name = str(entry[CLUSTER_NAME]) if entry else wanted
    if listed and config.state_file and "state_file" not in (entry or {}):
        config = replace(config, state_file=f"{config.state_file}.{_file_safe(name)}")
    return Cluster(name, config, traced.sources)


def _file_safe(name: str) -> str:
    """A context such as ``arn:aws:eks:eu-west-1:1:cluster/prod`` as a file suffix."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)
