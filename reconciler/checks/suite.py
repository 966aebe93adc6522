"""The checks in the order they depend on each other: a cluster that cannot
be reached, or refuses who we are, ends its checks there."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from reconciler.checks import Check, access, cluster, local
from reconciler.client.kube import Kube
from reconciler.config import Config


def of_cluster(kube: Kube, config: Config, now: float) -> list[Check]:
    """The credential, reachable and supported, who we are, our CRDs, then
    every request of a pass and the Leases."""
    return list(_until_fatal(_cluster(kube, config, now)))


def _cluster(kube: Kube, config: Config, now: float) -> Iterator[Check]:
    yield cluster.credential(kube, now)
    yield cluster.reachable(kube)
    checked, who = cluster.identity(kube)
    yield checked
    yield from cluster.crds(kube, access.grant(who, config.namespaces))
    yield from access.permissions(kube, config, who)
    yield from _present([access.leases(kube, config, who)])


def _until_fatal(checks: Iterable[Check]) -> Iterator[Check]:
    for check in checks:
        yield check
        if check.fatal:
            return


def of_host(config: Config) -> list[Check]:
    """What this host must offer the process: its state file and metrics
    port; and which images a Redis may run."""
    checks = [local.state_file(config), local.metrics_address(config), local.redis_images(config)]
    return list(_present(checks))


def _present(checks: Iterable[Check | None]) -> Iterator[Check]:
    return (c for c in checks if c is not None)
