"""`reconciler check` before any cluster is asked: a bad config is a failed
check (exit 1) with its fix, and the exit code is the worst check's."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from reconciler.checks import Check, failed, passed
from reconciler.cli import cli
from reconciler.cli.check import exit_code


def test_an_unknown_key_fails_the_config_check_naming_the_file_and_key(tmp_path: Path):
    config = tmp_path / "reconciler.yaml"
    config.write_text("intervall: 30\n")
    result = CliRunner().invoke(cli, ["check", "--config", str(config)])
    assert result.exit_code == 1, result.output
    assert result.output.splitlines() == [
        f"✗ config: {config}: intervall: unknown key (did you mean interval?)",
        "    fix: correct it; every key is listed in config/reconciler.yaml",
    ]


def test_json_has_the_same_checks(tmp_path: Path):
    config = tmp_path / "reconciler.yaml"
    config.write_text("qps: -1\n")
    result = CliRunner().invoke(cli, ["check", "--config", str(config), "-o", "json"])
    doc = json.loads(result.output)
    assert doc["exit_code"] == result.exit_code == 1
    (check,) = doc["host"]
    assert check["name"] == "config" and check["ok"] is False and check["fix"]


def test_check_takes_every_option_of_run():
    run = {p.name for p in cli.commands["run"].params}
    check = {p.name for p in cli.commands["check"].params}
    assert run <= check
    assert check - run == {"output"}


def test_the_exit_code_is_the_worst_checks():
    ok, bad = passed("a", "fine"), failed("b", "not", "fix it")
    fatal = failed("c", "down", "start it", fatal=True)
    assert exit_code([ok, ok]) == 0
    assert exit_code([ok, bad]) == 1
    assert exit_code([bad, fatal, ok]) == 3
    assert exit_code([]) == 0
    assert Check("d", True, "x").fix == ""


def test_a_pods_service_links_pass_the_config_check(tmp_path: Path):
    """`reconciler check` in a pod beside the Services reconciler and
    reconciler-metrics: the config check passes (the cluster is not there)."""
    from .test_service_links import POD_ENV

    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: a\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: a, context: {cluster: c, user: u}}]\n"
    )
    env = {**POD_ENV, "KUBECONFIG": str(kubeconfig)}
    result = CliRunner().invoke(cli, ["check", "-o", "json"], env=env)
    config = json.loads(result.output)["host"][0]
    assert config == {"name": "config", "ok": True, "detail": config["detail"]}, result.output
