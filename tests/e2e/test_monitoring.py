"""The dashboard and the alerts of config/, against a real Prometheus that
scrapes `reconciler run` on the local cluster.

Two daemons are scraped as one job: one reconciles a namespace, the other
points at a port where no apiserver listens, so that the failure series
(unreachable passes, code="error" requests) exist too. Prometheus is built from
the Go module proxy by `make tools` (hack/tools/build.sh).
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from ..unit.test_manifests import tool
from .conftest import ROOT, Kubectl, Reconciler, free_port, owned, wait_for
from .test_redis import redis_yaml, settled

DASHBOARD = ROOT / "config" / "grafana" / "reconciler.json"
RULES = ROOT / "config" / "prometheus" / "rules.yaml"
JOB = "reconciler-metrics"
# What Grafana puts in place of the dashboard's variables.
VARIABLES = {"$__rate_interval": "1m", "$job": ".+", "$cluster": ".*"}


@dataclass
class Prometheus:
    url: str

    def query(self, expr: str) -> dict[str, Any]:
        qs = urllib.parse.urlencode({"query": expr})
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/query?{qs}", timeout=10) as resp:
                return json.load(resp)
        except urllib.error.HTTPError as exc:  # 400: the expression does not parse
            return json.load(exc)

    def series(self, expr: str) -> list[dict[str, Any]]:
        answer = self.query(expr)
        assert answer["status"] == "success", f"{expr}: {answer.get('error')}"
        return answer["data"]["result"]

    def rules(self) -> list[dict[str, Any]]:
        with urllib.request.urlopen(f"{self.url}/api/v1/rules", timeout=10) as resp:
            groups = json.load(resp)["data"]["groups"]
        return [rule for group in groups for rule in group["rules"]]


def unreachable_kubeconfig(admin: Path, path: Path) -> Path:
    config = yaml.safe_load(admin.read_text())
    for cluster in config["clusters"]:
        cluster["cluster"]["server"] = f"https://127.0.0.1:{free_port()}"  # nobody listens
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture
def scraped(
    reconciler: Reconciler, ns: str, tmp_path: Path, kubectl: Kubectl
) -> Iterator[Prometheus]:
    binary = tool("prometheus", "make tools")
    ports = [free_port(), free_port()]
    daemons = [
        reconciler.daemon(ns, "--metrics-address", f"127.0.0.1:{ports[0]}"),
        Reconciler(unreachable_kubeconfig(kubectl.kubeconfig, tmp_path / "down")).daemon(
            ns, "--metrics-address", f"127.0.0.1:{ports[1]}", stdout=subprocess.DEVNULL
        ),
    ]
    rule = yaml.safe_load(RULES.read_text())
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(tmp_path / "rules.yaml")],
        "scrape_configs": [
            {
                "job_name": JOB,
                "static_configs": [{"targets": [f"127.0.0.1:{p}" for p in ports]}],
            }
        ],
    }
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    web = free_port()
    log = (tmp_path / "prometheus.log").open("w")
    server = owned(
        subprocess.Popen(
            [
                binary,
                f"--config.file={tmp_path / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp_path / 'data'}",
                f"--web.listen-address=127.0.0.1:{web}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    )
    try:
        yield Prometheus(f"http://127.0.0.1:{web}")
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
        for proc in daemons:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=30)


def dashboard_queries() -> list[tuple[str, str]]:
    dash = json.loads(DASHBOARD.read_text())
    queries = []
    for panel in dash["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            for name, value in VARIABLES.items():
                expr = expr.replace(name, value)
            assert "$" not in expr, f"{panel['title']}: unknown variable in {expr}"
            queries.append((panel["title"], expr))
    return queries


def alert_rules(group: str | None = None) -> list[dict[str, Any]]:
    """The alerts of config/prometheus, or of one of its groups."""
    rule = yaml.safe_load(RULES.read_text())
    groups = [g for g in rule["spec"]["groups"] if group in (None, g["name"])]
    return [r for g in groups for r in g["rules"] if "alert" in r]


# The daemon's alerts; the CronJob's read kube-state-metrics, which this Prometheus lacks.
DAEMON_GROUP = "reconciler"


def value_side(expr: str) -> str:
    """The alert's expression without its last comparison: the figure compared."""
    return re.split(r"\s(?:[<>]|==)\s(?!.*\s(?:[<>]|==)\s)", expr.strip(), flags=re.S)[0]


def test_dashboard_and_alerts_on_a_real_prometheus(
    scraped: Prometheus, kubectl: Kubectl, ns: str
) -> None:
    kubectl.apply(redis_yaml(ns, num=2))
    wait_for(
        lambda: len(kubectl.json("get", "pods", "-n", ns)["items"]) == 2 and settled(kubectl, ns),
        what="the daemon to create the pods",
        timeout=60,
    )
    # Both targets up, and a few scrapes in: a rate over 1m needs two samples.
    wait_for(
        lambda: len(scraped.series(f'up{{job="{JOB}"}} == 1')) == 2,
        what="both targets scraped",
        timeout=60,
    )

    for title, expr in dashboard_queries():
        found = wait_for(lambda e=expr: scraped.series(e), what=f"data for {title}", timeout=60)
        assert found, title

    for alert in alert_rules(DAEMON_GROUP):
        expr = alert["expr"]
        scraped.series(expr)  # parses (a 400 fails inside)
        figure = value_side(expr)
        assert figure != expr.strip(), alert["alert"]
        wait_for(lambda f=figure: scraped.series(f), what=f"data for {alert['alert']}", timeout=60)

    # The reconciling daemon runs without leader election: it counts as the leader.
    (leader,) = scraped.series(f'max by (job) (reconciler_leader{{job="{JOB}"}})')
    assert leader["value"][1] == "1"
    # The unreachable daemon's failures are there, by code and by result.
    assert scraped.series(f'reconciler_api_requests_total{{job="{JOB}", code="error"}}')
    assert scraped.series(f'reconciler_passes_total{{job="{JOB}", result="unreachable"}}')

    # Prometheus evaluates every rule without error.
    def evaluated() -> list[dict[str, Any]]:
        rules = scraped.rules()
        return rules if all(not r["lastEvaluation"].startswith("0001") for r in rules) else []

    rules = wait_for(evaluated, what="every rule evaluated")
    assert {r["name"] for r in rules} == {a["alert"] for a in alert_rules()}
    for rule in rules:
        assert rule["health"] == "ok", (rule["name"], rule.get("lastError"))
