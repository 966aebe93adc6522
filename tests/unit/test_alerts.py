"""The alert rules of config/prometheus, checked and unit-tested by promtool.

promtool reads plain rule files, so the groups are taken out of the
PrometheusRule (the one source) into a temporary rules.yaml beside the test
file. promtool is built from the Go module proxy (hack/tools/build.sh) and
linked into .venv/bin by `make tools`; `make test` requires it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from .test_manifests import tool

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "config" / "prometheus" / "rules.yaml"
TESTS = Path(__file__).parent / "prometheus" / "alerts_test.yaml"
OPERATIONS = ROOT / "docs" / "operations.md"


def groups() -> list[dict]:
    rule = yaml.safe_load(RULES.read_text())
    assert rule["kind"] == "PrometheusRule"
    return rule["spec"]["groups"]


def alerts() -> list[dict]:
    return [r for g in groups() for r in g["rules"] if "alert" in r]


@pytest.fixture
def rule_dir(tmp_path: Path) -> Path:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": groups()}))
    shutil.copy(TESTS, tmp_path / TESTS.name)
    return tmp_path


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tool("promtool", "make tools"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_promtool_checks_the_rules(rule_dir: Path) -> None:
    out = run("check", "rules", "rules.yaml", cwd=rule_dir)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {len(alerts())} rules found" in out.stdout + out.stderr


def test_promtool_fires_and_clears_every_alert(rule_dir: Path) -> None:
    out = run("test", "rules", TESTS.name, cwd=rule_dir)
    assert out.returncode == 0, out.stdout + out.stderr
    tested = yaml.safe_load(TESTS.read_text())["tests"]
    for alert in alerts():
        name = alert["alert"]
        evals = [e for t in tested for e in t["alert_rule_test"] if e["alertname"] == name]
        assert any(e["exp_alerts"] for e in evals), f"{name} is never seen firing"
        fired = min(e["eval_time"] for e in evals if e["exp_alerts"])
        assert any(
            not e["exp_alerts"] and minutes(e["eval_time"]) > minutes(fired) for e in evals
        ), f"{name} is never seen clearing"


def test_promtool_would_catch_a_wrong_expectation(rule_dir: Path) -> None:
    """The test file is not vacuous: expecting a different severity fails."""
    broken = TESTS.read_text().replace("severity: critical", "severity: warning", 1)
    (rule_dir / TESTS.name).write_text(broken)
    out = run("test", "rules", TESTS.name, cwd=rule_dir)
    assert out.returncode != 0


def test_the_cronjob_overlay_keeps_only_the_cronjob_alerts() -> None:
    """config/prometheus-cronjob: no ServiceMonitor, and none of the daemon's
    alerts, whose ReconcilerDown would fire where no daemon runs."""
    out = subprocess.run(
        [tool("kubectl"), "kustomize", str(ROOT / "config" / "prometheus-cronjob")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    (rule,) = [d for d in yaml.safe_load_all(out.stdout) if d]
    assert rule["kind"] == "PrometheusRule"
    cronjob = [g for g in groups() if g["name"] == "reconciler-cronjob"]
    assert cronjob and rule["spec"]["groups"] == cronjob


def minutes(duration: str) -> int:
    value, unit = re.fullmatch(r"(\d+)([mh])", duration).groups()  # type: ignore[union-attr]
    return int(value) * (60 if unit == "h" else 1)


def test_every_alert_has_a_runbook_section() -> None:
    text = OPERATIONS.read_text()
    headings = {
        re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-")
        for h in re.findall(r"^#+ (.+)$", text, re.M)
    }
    for alert in alerts():
        name = alert["alert"]
        anchor = alert["annotations"]["runbook_url"].partition("#")[2]
        assert alert["annotations"]["runbook_url"].startswith("docs/operations.md#")
        assert anchor == name.lower() and anchor in headings, f"{name}: no runbook section"
        assert alert["labels"]["severity"] in {"warning", "critical"}
        assert {"summary", "description"} <= set(alert["annotations"])
