"""A Job made from the shipped CronJob (config/cronjob), run for real on the
real node real-0: it ends with exit 0 and converges the samples; a later one
finds no changes. Rendered and changed as shipped.py says: the CronJob is
suspended, so only the Jobs made here run (the controller-manager runs the
job controller, and no cronjob controller, with the real node).

Skipped, with the cluster's reason, where there is no real node."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from hack.cluster import realnode

from .conftest import ROOT, Kubectl, NotYet, wait_for
from .shipped import Workload, adapt, kustomized, placing, pods, ready, redis_ready


@pytest.fixture
def placed(kubectl: Kubectl, ns: str, real_node: dict[str, str]) -> Iterator[Workload]:
    yield from placing(kubectl, ns)


def job(kubectl: Kubectl, wns: str, name: str) -> str:
    """A Job made from the CronJob, run to its end on real-0: its logs."""
    kubectl.run("create", "job", name, "--from=cronjob/reconciler", "-n", wns)

    def ended() -> dict[str, Any] | NotYet:
        status = kubectl.json("get", "job", name, "-n", wns).get("status", {})
        return status if status.get("succeeded") or status.get("failed") else NotYet(str(status))

    # A cluster brought up before the job controller was added to the real
    # node's controllers makes no pod: `make cluster-down` and up again.
    status = wait_for(ended, what=f"job {name} to end", timeout=90)
    *_, pod = pods(kubectl, wns, f"job-name={name}")
    logs = kubectl.run("logs", "-n", wns, pod["metadata"]["name"]).stdout
    assert status.get("succeeded") == 1 and not status.get("failed"), logs[-3000:]
    assert pod["spec"]["nodeName"] == realnode.NAME
    (container,) = pod["status"]["containerStatuses"]
    assert container["state"]["terminated"]["exitCode"] == 0
    return logs


def test_a_job_of_the_shipped_cronjob_converges_the_samples_on_a_real_node(
    kubectl: Kubectl, placed: Workload, ns: str, real_node: dict[str, str]
) -> None:
    kubectl.run("apply", "-k", str(ROOT / "config" / "samples"), "-n", ns)
    docs = adapt(kustomized("config/cronjob"), placed.name, ns, real_node["reconciler"])
    placed.apply(docs)
    wns = placed.name

    first = job(kubectl, wns, "first")
    assert "0 errors" in first and "Pod/create/ok=3" in first, first[-3000:]
    assert '"level": "info"' in first  # RECONCILER_LOG_FORMAT=json, as shipped

    def up() -> bool | NotYet:
        found = pods(kubectl, ns, "app.kubernetes.io/instance=redis-sample")
        return sum(map(ready, found)) == 3 or NotYet(f"{len(found)} pods")

    wait_for(up, what="redis-sample's pods Ready on kwok", timeout=60)
    job(kubectl, wns, "second")
    assert redis_ready(kubectl, ns, "redis-sample") is True
    assert "no changes" in job(kubectl, wns, "third")
    assert kubectl.json("get", "xca", "xca-sample", "-n", ns)["status"]["active"] is True
