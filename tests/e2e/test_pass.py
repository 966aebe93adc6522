"""Whole-pass properties against a real apiserver: Xca, zero writes when
converged, the pod report, paging, conflicts and exit codes."""

from __future__ import annotations

import dataclasses
import re
from datetime import UTC, datetime
from pathlib import Path

import yaml

from reconciler.client.kube import Kube
from reconciler.config import Config
from reconciler.engine.apply import ApplyOptions, Executor
from reconciler.engine.events import EventSink
from reconciler.engine.observe import observe
from reconciler.engine.observe.lister import ListSettings
from reconciler.engine.plan import plan_pass
from reconciler.result import Result

from .conftest import ROOT, Kubectl, Reconciler, gated_pod, wait_for
from .test_redis import pods, redis_yaml, settled

XCA = """
apiVersion: apps.xca.k8s.kb.cx/v1beta1
kind: Xca
metadata: {{name: {name}, namespace: {ns}}}
spec: {{foo: bar}}
"""


def versions(kubectl: Kubectl, ns: str) -> dict[str, str]:
    """resourceVersion of everything in the namespace that a pass could write."""
    out = {}
    for kind in ("redis", "xcas", "pods", "events"):
        for item in kubectl.json("get", kind, "-n", ns)["items"]:
            out[f"{kind}/{item['metadata']['name']}"] = item["metadata"]["resourceVersion"]
    return out


def test_xca_is_activated_once(kubectl: Kubectl, reconciler: Reconciler, ns: str):
    kubectl.apply(XCA.format(name="xca-sample", ns=ns))
    first = reconciler.sync(ns)
    assert first.summary["actions"] == {"Xca/patch-status/ok": 1}
    xca = kubectl.json("get", "xca", "xca-sample", "-n", ns)
    assert xca["status"]["active"] is True
    stamp = xca["status"]["last_update_time"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", stamp)
    before = versions(kubectl, ns)
    second = reconciler.sync(ns)
    assert second.writes == 0 and second.summary["planned"] == 0
    assert versions(kubectl, ns) == before
    assert kubectl.json("get", "xca", "xca-sample", "-n", ns)["status"]["last_update_time"] == stamp
    table = kubectl.run("get", "xca", "-n", ns).stdout.splitlines()
    assert table[0].split() == ["NAME", "ACTIVE", "LAST", "UPDATE", "AGE"]
    assert table[1].split()[:2] == ["xca-sample", "true"]
    assert "Activated" in kubectl.run("describe", "xca", "xca-sample", "-n", ns).stdout


def test_converged_pass_makes_zero_writes(kubectl: Kubectl, reconciler: Reconciler, ns: str):
    kubectl.apply(redis_yaml(ns, num=3))
    kubectl.apply(XCA.format(name="x1", ns=ns))
    reconciler.converge(ns, settle=lambda: settled(kubectl, ns))
    before = versions(kubectl, ns)
    result = reconciler.sync(ns)
    # Our own count: five LISTs (Pod, Redis, Xca, Service, PodDisruptionBudget)
    # and a GET of the namespace in scope, nothing else.
    assert result.summary["api_requests"] == 6 and result.writes == 0
    # The cluster's view: not one object changed, no event was added.
    assert versions(kubectl, ns) == before


def test_paged_lists_see_everything(kubectl: Kubectl, reconciler: Reconciler, ns: str):
    for i in range(3):
        kubectl.apply(redis_yaml(ns, name=f"r{i}", num=2))
    reconciler.converge(ns, settle=lambda: settled(kubectl, ns))
    small = reconciler.sync(ns, env={"RECONCILER_PAGE_SIZE": "2"})
    observed = {"Pod": 6, "Redis": 3, "Xca": 0, "Service": 3, "PodDisruptionBudget": 3}
    assert small.writes == 0 and small.summary["observed"] == observed
    # 6 pods in pages of 2, 3 Redis in pages of 2, 1 empty Xca page, 3 Services
    # and 3 budgets in pages of 2, the namespace.
    assert small.summary["api_requests"] == 3 + 2 + 1 + 2 + 2 + 1


def test_pod_report_across_one_shot_runs(
    kubectl: Kubectl, reconciler: Reconciler, ns: str, tmp_path: Path
):
    args = ["--state-file", str(tmp_path / "state.json")]
    env = {"RECONCILER_POD_REPORT_SELECTOR": "e2e-report=yes"}
    kubectl.apply(gated_pod(ns, {"e2e-report": "yes"}))
    added = reconciler.sync(ns, *args, env=env)
    assert f"[{ns}/gated] pod added, phase Pending" in added.stderr

    kubectl.run(
        "patch",
        "pod",
        "gated",
        "-n",
        ns,
        "--type=json",
        "-p",
        '[{"op":"remove","path":"/spec/schedulingGates"}]',
    )
    wait_for(lambda: settled(kubectl, ns), what="gated pod Running")
    moved = reconciler.sync(ns, *args, env=env)
    assert f"[{ns}/gated] pod phase Pending -> Running" in moved.stderr
    assert f"[{ns}/gated] pod condition PodScheduled False -> True" in moved.stderr
    assert f"[{ns}/gated] pod condition Ready absent -> True" in moved.stderr or (
        f"[{ns}/gated] pod condition Ready False -> True" in moved.stderr
    )

    quiet = reconciler.sync(ns, *args, env=env)
    assert "[" + ns + "/gated] pod" not in quiet.stderr

    kubectl.run("delete", "pod", "gated", "-n", ns, "--wait=true")
    gone = reconciler.sync(ns, *args, env=env)
    assert f"[{ns}/gated] pod does not exist anymore (last phase Running)" in gone.stderr


def test_conflicting_writer_means_see_it_next_pass(
    kubectl: Kubectl, reconciler: Reconciler, ns: str, cluster
):
    """A second writer changes the Redis between our LIST and our PATCH."""
    kubectl.apply(redis_yaml(ns, num=1))
    kube = Kube(Config(kubeconfig=str(cluster.kubeconfig)))
    config = dataclasses.replace(Config(), namespaces=(ns,))
    obs = observe(kube, config.namespaces, None, ListSettings.of(config))
    the_plan = plan_pass(obs.snapshot, config, datetime.now(UTC))
    kubectl.run("label", "redis", "redis-sample", "-n", ns, "racer=1")  # bumps resourceVersion
    events = EventSink(kube, lambda: datetime.now(UTC))
    report = Executor(kube, events, ApplyOptions(concurrency=2)).run(the_plan)
    results = {(o.action.verb, o.result) for o in report.outcomes}
    assert ("patch-finalizers", Result.CONFLICT) in results
    assert report.failed() == []
    assert pods(kubectl, ns) == {}  # nothing created behind a missing finalizer
    reconciler.converge(ns, settle=lambda: settled(kubectl, ns))
    assert list(pods(kubectl, ns)) == ["redis-sample-0"]
    meta = kubectl.json("get", "redis", "redis-sample", "-n", ns)["metadata"]
    assert meta["labels"]["racer"] == "1"  # the other writer's change survived


def test_unreachable_and_unauthorized_exit_3(reconciler: Reconciler, cluster, tmp_path: Path):
    config = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    closed = dataclasses.replace(reconciler, kubeconfig=tmp_path / "closed")
    dead = yaml.safe_load(yaml.safe_dump(config))
    dead["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:9"
    closed.kubeconfig.write_text(yaml.safe_dump(dead))
    result = closed.sync(None, expect=3)
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .startswith("reconciler: error: cannot reach the cluster:")
    )

    bad = yaml.safe_load(yaml.safe_dump(config))
    bad["users"][0]["user"]["token"] = "not-a-token"
    wrong = dataclasses.replace(reconciler, kubeconfig=tmp_path / "wrong")
    wrong.kubeconfig.write_text(yaml.safe_dump(bad))
    result = wrong.sync(None, expect=3)
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("reconciler: error: unauthorized: ") and "401" in last
    assert "cannot reach" not in result.stderr
    assert result.summary["result"] == "unreachable" and result.summary["exit_code"] == 3
    assert result.summary["error"].startswith("unauthorized: ")


def _as_service_account(
    reconciler: Reconciler, kubectl: Kubectl, cluster, ns: str, account: str, tmp_path: Path
) -> Reconciler:
    """The same reconciler, with a kubeconfig that holds a token of ``account``."""
    token = kubectl.run("create", "token", account, "-n", ns).stdout.strip()
    config = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    config["users"][0]["user"] = {"token": token}
    as_account = dataclasses.replace(reconciler, kubeconfig=tmp_path / account)
    as_account.kubeconfig.write_text(yaml.safe_dump(config))
    return as_account


def test_credentials_without_rbac_exit_3_saying_forbidden(
    reconciler: Reconciler, kubectl: Kubectl, cluster, ns: str, tmp_path: Path
):
    kubectl.run("create", "serviceaccount", "nobody", "-n", ns)
    nobody = _as_service_account(reconciler, kubectl, cluster, ns, "nobody", tmp_path)
    result = nobody.sync(ns, expect=3)
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("reconciler: error: forbidden: these credentials may not list pods")
    assert result.summary["error"].startswith("forbidden: ")


def _rbac_without_pods(name: str, ns: str) -> str:
    """The shipped ClusterRole (config/rbac/rbac.yaml) without its pods rule."""
    shipped = yaml.safe_load_all((ROOT / "config/rbac/rbac.yaml").read_text())
    role = next(d for d in shipped if d and d["kind"] == "ClusterRole")
    rules = [r for r in role["rules"] if "pods" not in r["resources"]]
    assert len(rules) == len(role["rules"]) - 1  # exactly one grant taken away
    role = {"kind": "ClusterRole", "metadata": {"name": name}, "rules": rules}
    binding = {
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": "no-pods", "namespace": ns}],
    }
    docs = [{"apiVersion": "rbac.authorization.k8s.io/v1", **d} for d in (role, binding)]
    return yaml.safe_dump_all(docs)


def test_a_pod_list_refused_shows_in_the_redis_status_not_a_frozen_one(
    reconciler: Reconciler, kubectl: Kubectl, cluster, ns: str, tmp_path: Path
):
    kubectl.apply(redis_yaml(ns, num=2))
    reconciler.sync(ns)
    wait_for(lambda: settled(kubectl, ns) and len(pods(kubectl, ns)) == 2, what="pods Ready")
    reconciler.sync(ns)
    ready = kubectl.json("get", "redis", "redis-sample", "-n", ns)["status"]
    assert ready["state"] == "Ready"
    kubectl.run("create", "serviceaccount", "no-pods", "-n", ns)
    name = f"e2e-no-pods-{ns}"
    kubectl.apply(_rbac_without_pods(name, ns))
    try:
        blind = _as_service_account(reconciler, kubectl, cluster, ns, "no-pods", tmp_path)
        result = blind.sync(ns, expect=1)
        assert "LIST Pod: 403" in result.stderr
        status = kubectl.json("get", "redis", "redis-sample", "-n", ns)["status"]
        conditions = {c["type"]: c for c in status["conditions"]}
        assert status["state"] == "PodsUnknown"
        assert conditions["Degraded"]["reason"] == "PodsUnknown"
        assert "pods is forbidden" in conditions["Degraded"]["message"]
        assert conditions["Ready"] == next(
            c for c in ready["conditions"] if c["type"] == "Ready"
        )  # the last seen: the pods were not seen to change
        assert status["readyReplicas"] == ready["readyReplicas"] == 2
        events = kubectl.json("get", "events", "-n", ns, "--field-selector", "reason=PodsUnknown")
        assert len(events["items"]) == 1
        written = kubectl.json("get", "redis", "redis-sample", "-n", ns)["metadata"]
        blind.sync(ns, expect=1)  # said once: the same status, no second event
        unchanged = kubectl.json("get", "redis", "redis-sample", "-n", ns)["metadata"]
        assert unchanged["resourceVersion"] == written["resourceVersion"]
        again = kubectl.json("get", "events", "-n", ns, "--field-selector", "reason=PodsUnknown")
        assert [e["count"] for e in again["items"]] == [1]
    finally:
        kubectl.run("delete", "clusterrolebinding,clusterrole", name, check=False)
    reconciler.sync(ns)
    healed = kubectl.json("get", "redis", "redis-sample", "-n", ns)["status"]
    assert healed["state"] == "Ready"
    assert {c["type"]: c["status"] for c in healed["conditions"]}["Degraded"] == "False"
