"""CLI behaviour with click's CliRunner; the client is replaced by FakeKube."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from reconciler.cli import commands as cli_mod
from reconciler.client.errors import ApiError, Unreachable
from reconciler.engine import runner
from tests.unit.engine.test_events import hanging_events
from tests.unit.fakes import FakeKube

REDIS = {
    "metadata": {
        "name": "r",
        "namespace": "default",
        "uid": "u1",
        "resourceVersion": "1",
        "generation": 1,
        "finalizers": ["myapp.demo.kubebuilder.io/pods"],
    },
    "spec": {"port": 6379, "num": 1},
}


@pytest.fixture
def kube(monkeypatch):
    fake = FakeKube()
    fake.held["Redis"] = [REDIS]
    monkeypatch.setattr(cli_mod, "kube_of", lambda config: fake)
    return fake


def invoke(*args, env=None):
    return CliRunner().invoke(cli_mod.cli, list(args), env=env or {}, catch_exceptions=False)


def test_help_answers_for_every_command():
    for args in ([], ["sync"], ["plan"], ["run"]):
        result = invoke(*args, "--help")
        assert result.exit_code == 0 and "Usage:" in result.output


def test_sync_applies_and_exits_zero(kube):
    result = invoke("sync", "-o", "json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["result"] == "ok"
    assert summary["actions"] == {
        "Pod/create/ok": 1,
        "Service/create/ok": 1,
        "Redis/patch-status/ok": 1,
    }
    assert ("POST", "r-0") in kube.calls


def test_sync_dry_run_writes_nothing(kube):
    result = invoke("sync", "--dry-run")
    assert result.exit_code == 0
    assert [c for c in kube.calls if c[0] not in ("LIST", "GET")] == []  # reads only
    assert "dry-run" in result.output


def test_sync_exits_1_when_an_object_fails(kube):
    kube.scripted_errors[("POST", "r-0")] = ApiError(
        422, "Invalid", "spec.containers[0].ports: bad"
    )
    result = invoke("sync")
    assert result.exit_code == 1
    assert "spec.containers[0].ports" in result.output


def test_sync_exits_1_when_a_crd_is_missing(kube):
    kube.scripted_errors[("LIST", "Xca")] = ApiError(
        404, "NotFound", "the server could not find the resource"
    )
    result = invoke("sync")
    assert result.exit_code == 1
    assert "the Xca CRD is not installed" in result.output
    assert ("POST", "r-0") in kube.calls  # other kinds still reconciled


def test_sync_exits_3_with_one_line_when_unreachable(kube):
    for kind in ("Pod", "Redis", "Xca", "Service", "PodDisruptionBudget"):
        kube.scripted_errors[("LIST", kind)] = Unreachable(
            "https://127.0.0.1:1: connection refused"
        )
    result = invoke("sync")
    assert result.exit_code == 3
    assert result.output.strip().splitlines()[-1] == (
        "reconciler: error: cannot reach the cluster: https://127.0.0.1:1: connection refused"
    )


@pytest.mark.parametrize(
    ("status", "reason", "says"),
    [
        (401, "Unauthorized", "unauthorized: the cluster does not accept these credentials"),
        (403, "Forbidden", "forbidden: these credentials may not list pods"),
    ],
)
def test_sync_exits_3_when_the_credentials_are_refused_and_says_so(kube, status, reason, says):
    for kind in ("Pod", "Redis", "Xca", "Service", "PodDisruptionBudget"):
        kube.scripted_errors[("LIST", kind)] = ApiError(status, reason, reason)
    result = invoke("sync", "-o", "json")
    assert result.exit_code == 3
    assert "cannot reach" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith(f"reconciler: error: {says}")
    answer = json.loads(result.stdout)
    assert answer["result"] == "unreachable" and answer["error"].startswith(says)
    assert answer["exit_code"] == 3


def test_sync_json_prints_the_error_as_json_on_exit_2(tmp_path):
    missing = tmp_path / "nope"
    result = invoke("sync", "--kubeconfig", str(missing), "-o", "json")
    assert result.exit_code == 2
    assert json.loads(result.stdout) == {
        "result": "error",
        "error": f"--kubeconfig {missing}: no such file",
        "exit_code": 2,
    }


def test_a_missing_kubeconfig_names_the_flag_or_the_variable(tmp_path, monkeypatch):
    missing = tmp_path / "nope"
    result = invoke("sync", "--kubeconfig", str(missing))
    assert result.exit_code == 2
    assert result.stderr.strip() == f"reconciler: error: --kubeconfig {missing}: no such file"
    monkeypatch.setenv("KUBECONFIG", str(missing))
    result = invoke("sync")
    assert result.stderr.strip() == f"reconciler: error: $KUBECONFIG {missing}: no such file"


def test_a_yaml_syntax_error_names_the_file_line_and_column(tmp_path, kube):
    path = tmp_path / "c.yaml"
    path.write_text("interval: 5\nnamespaces: [a\n")
    result = invoke("--config", str(path), "sync")
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"reconciler: error: {path}: invalid YAML at line 3, column 1: ")
    assert "<unicode string>" not in result.output


def test_the_scheduler_library_logs_only_warnings():
    import logging

    from reconciler.cli import logs

    logs.setup("INFO")
    assert not logging.getLogger("apscheduler.scheduler").isEnabledFor(logging.INFO)
    assert logging.getLogger("reconciler.run.daemon").isEnabledFor(logging.INFO)


def test_plan_detailed_exitcode(kube):
    result = invoke("plan", "--detailed-exitcode")
    assert result.exit_code == 2
    assert "+ create pod default/r-0" in result.output
    assert "+ create service default/r" in result.output
    assert "Plan: 2 to create, 0 to delete, 1 to patch." in result.output
    assert [c for c in kube.calls if c[0] not in ("LIST", "GET")] == []  # reads only
    kube.held["Redis"] = []
    result = invoke("plan", "--detailed-exitcode")
    assert result.exit_code == 0 and "No changes" in result.output


def test_plan_detailed_exitcode_keeps_2_for_changes_only(tmp_path, kube):
    """Bad config is an error (1) there, as in `terraform plan`; unreachable is 3."""
    bad = tmp_path / "c.yaml"
    bad.write_text("intervall: 5\n")
    assert invoke("--config", str(bad), "plan").exit_code == 2
    assert invoke("--config", str(bad), "plan", "--detailed-exitcode").exit_code == 1
    for kind in ("Pod", "Redis", "Xca", "Service", "PodDisruptionBudget"):
        kube.scripted_errors[("LIST", kind)] = Unreachable(
            "https://127.0.0.1:1: connection refused"
        )
    assert invoke("plan", "--detailed-exitcode").exit_code == 3
    helped = " ".join(invoke("plan", "--help").output.split())
    for words in ("0 when there are no changes", "2 when changes are pending", "1 on errors"):
        assert words in helped
    assert "3 when the cluster is unreachable" in helped


def test_plan_json(kube):
    out = json.loads(invoke("plan", "-o", "json").stdout)
    assert [a["verb"] for a in out["actions"]] == ["create", "create", "patch-status"]


def test_bad_config_exits_2_naming_the_key(tmp_path, kube):
    path = tmp_path / "c.yaml"
    path.write_text("interval: never\n")
    result = invoke("--config", str(path), "sync")
    assert result.exit_code == 2
    assert f"{path}: interval: must be of type float" in result.output


def test_namespace_flags_are_exclusive(kube):
    assert invoke("-n", "a", "-A", "sync").exit_code == 2


def test_options_after_the_subcommand(kube, monkeypatch):
    seen = {}
    real = runner.pass_once

    def spy(setup, state):
        seen["namespaces"] = setup.config.namespaces
        return real(setup, state)

    monkeypatch.setattr(runner, "pass_once", spy)
    assert invoke("sync", "-n", "team-a", "-n", "team-b").exit_code == 0
    assert seen["namespaces"] == ("team-a", "team-b")


def test_state_file_carries_the_pod_report_across_runs(kube, tmp_path, caplog):
    state = tmp_path / "state.json"
    kube.held["Pod"] = [
        {
            "metadata": {
                "name": "r-0",
                "namespace": "default",
                "labels": {"app.kubernetes.io/managed-by": "reconciler"},
            },
            "status": {"phase": "Pending"},
        }
    ]
    invoke("sync", "--state-file", str(state))
    assert json.loads(state.read_text())["pod_views"]["default/r-0"]["phase"] == "Pending"
    kube.held["Pod"][0]["status"]["phase"] = "Running"
    caplog.clear()
    invoke("sync", "--state-file", str(state))
    assert "[default/r-0] pod phase Pending -> Running" in caplog.text


def test_an_unlabelled_foreign_pod_is_seen_in_one_shot_mode_and_never_overwritten(kube):
    """No state file: the desired name that no labelled pod holds is looked
    up, so the conflict is known before any create is refused, and the status
    says so on the first pass."""
    foreign = {"metadata": {"name": "r-0", "namespace": "default", "uid": "other"}}
    kube.held["Pod"] = [foreign]
    first = invoke("sync", "-o", "json")
    assert first.exit_code == 0
    assert ("POST", "r-0") not in kube.calls
    status = kube.patches[-1][2]["status"]
    degraded = next(c for c in status["conditions"] if c["type"] == "Degraded")
    assert degraded["reason"] == "PodConflict" and "r-0" in degraded["message"]
    # Once the foreign pod is gone, the name is ours again.
    kube.held["Pod"] = []
    kube.calls.clear()
    assert invoke("sync").exit_code == 0
    assert ("POST", "r-0") in kube.calls


def test_json_logs_carry_object_action_result_and_pass_id(kube):
    result = invoke("sync", "--log-format", "json", "-o", "json")
    assert result.exit_code == 0
    pass_id = json.loads(result.stdout)["pass_id"]
    lines = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    create = next(x for x in lines if x.get("action") == "create")
    assert create["object"] == "default/r" and create["result"] == "ok"
    assert create["pass_id"] == pass_id and create["kind"] == "Redis"
    assert {"time", "level", "message"} <= set(create)


def test_kubeconfig_flag_works_without_a_home_directory(tmp_path, monkeypatch):
    """systemd's DynamicUser has no passwd entry: HOME must not be needed."""
    from reconciler.client.kube import Kube
    from reconciler.config import Config

    cfg = tmp_path / "kc"
    cfg.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:9'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    monkeypatch.delenv("HOME", raising=False)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setattr(
        "os.path.expanduser", lambda p: (_ for _ in ()).throw(RuntimeError("no home"))
    )
    assert Kube(Config(kubeconfig=str(cfg))).server == "https://127.0.0.1:9"


SELECTOR = {"RECONCILER_POD_REPORT_SELECTOR": "a=b"}


def _pods(count: int) -> list[dict]:
    return [
        {
            "metadata": {"name": f"p{i}", "namespace": "default", "labels": {"a": "b"}},
            "status": {"phase": "Running"},
        }
        for i in range(count)
    ]


def test_first_view_of_many_pods_is_one_info_line(kube, caplog, monkeypatch):
    from reconciler.engine import report

    monkeypatch.setattr(report, "FIRST_VIEW_INFO_LINES", 3)
    kube.held["Pod"] = _pods(4)
    caplog.set_level("DEBUG")
    assert invoke("sync", "--log-level", "DEBUG", env=SELECTOR).exit_code == 0
    added = [r for r in caplog.records if "pod added" in r.getMessage()]
    assert len(added) == 4 and {r.levelname for r in added} == {"DEBUG"}
    summary = [r for r in caplog.records if "first view of 4 pods" in r.getMessage()]
    assert [r.levelname for r in summary] == ["INFO"]


def test_first_view_of_few_pods_and_later_changes_stay_at_info(kube, caplog, tmp_path, monkeypatch):
    from reconciler.engine import report

    monkeypatch.setattr(report, "FIRST_VIEW_INFO_LINES", 3)
    state = tmp_path / "state.json"
    kube.held["Pod"] = _pods(3)
    caplog.set_level("DEBUG")
    assert (
        invoke("sync", "--log-level", "DEBUG", "--state-file", str(state), env=SELECTOR).exit_code
        == 0
    )
    added = [r for r in caplog.records if "pod added" in r.getMessage()]
    assert len(added) == 3 and {r.levelname for r in added} == {"INFO"}
    assert "first view" not in caplog.text
    # With a previous view, even many new pods are each reported at INFO.
    kube.held["Pod"] = _pods(10)
    caplog.clear()
    assert (
        invoke("sync", "--log-level", "DEBUG", "--state-file", str(state), env=SELECTOR).exit_code
        == 0
    )
    added = [r for r in caplog.records if "pod added" in r.getMessage()]
    assert len(added) == 7 and {r.levelname for r in added} == {"INFO"}


def test_an_unknown_reconciler_variable_exits_2_naming_it(kube):
    result = invoke("sync", env={"RECONCILER_NAMESPACE": "x"})
    assert result.exit_code == 2
    assert "RECONCILER_NAMESPACE: unknown variable" in result.output
    assert kube.calls == []


def test_sync_json_lists_what_is_not_ready_as_the_pass_left_it(kube):
    message = 'pods "r-0" is forbidden: exceeded quota: pods'
    kube.scripted_errors[("POST", "r-0")] = ApiError(403, "Forbidden", message)
    result = invoke("sync", "-o", "json")
    assert result.exit_code == 1
    (entry,) = json.loads(result.stdout)["not_ready"]
    assert (entry["object"], entry["state"]) == ("Redis default/r", "QuotaExceeded")
    assert message in entry["message"]
    kube.scripted_errors.clear()
    kube.held["Redis"] = []
    assert json.loads(invoke("sync", "-o", "json").stdout)["not_ready"] == []


def test_the_pass_line_counts_warnings(kube):
    result = invoke("-n", "nosuch", "sync")
    assert result.exit_code == 0
    assert "; 1 warning; " in result.stdout


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_prints_a_script_for_each_shell(shell):
    result = invoke("completion", shell)
    assert result.exit_code == 0 and "_RECONCILER_COMPLETE" in result.output


def test_the_bash_completion_script_completes_commands_and_options(tmp_path):
    """Sourced into a real bash, against the installed `reconciler` entry point."""
    import shutil
    import subprocess

    exe = shutil.which("reconciler")
    if exe is None:
        pytest.skip("reconciler is not installed on PATH")
    script = tmp_path / "completion.bash"
    script.write_text(invoke("completion", "bash").output)
    probe = (
        f"source {script}; "
        "COMP_WORDS=(reconciler pl); COMP_CWORD=1; _reconciler_completion reconciler; "
        'echo "${COMPREPLY[*]}"; COMPREPLY=(); '
        "COMP_WORDS=(reconciler sync --dry); COMP_CWORD=2; _reconciler_completion reconciler; "
        'echo "${COMPREPLY[*]}"'
    )
    out = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.stdout.splitlines() == ["plan", "--dry-run"], out.stderr


def test_sync_wait_exits_4_on_timeout_and_lists_what_is_pending(kube):
    """The fake cluster never shows the pod it was asked for, so a short wait times out."""
    result = invoke("sync", "--wait", "--timeout", "0.05")
    assert result.exit_code == 4, result.output
    lines = result.stdout.splitlines()
    assert lines[-2].startswith("timed out after ") and lines[-2].endswith(": 1 object not Ready")
    assert lines[-1] == "  Redis default/r: WaitingForReady: waiting for 1 of 1 pods to be Ready"


def test_sync_wait_json_says_how_the_wait_ended(kube):
    result = invoke("sync", "--wait", "--timeout", "0.05", "-o", "json")
    assert result.exit_code == 4, result.output
    summary = json.loads(result.stdout)
    assert summary["wait"]["result"] == "timeout"
    assert summary["exit_code"] == 4
    assert summary["not_ready"][0]["object"] == "Redis default/r"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--timeout", "5"], "--timeout needs --wait"),
        (["--wait", "--dry-run"], "--wait cannot be used with --dry-run"),
        (["--wait", "--timeout", "0"], "0.0 is not in the range x>0"),
    ],
)
def test_sync_wait_usage_errors_exit_2(kube, args, says):
    result = invoke("sync", *args)
    assert result.exit_code == 2
    assert says in result.output
    assert kube.calls == []


def test_sync_help_documents_exit_code_4():
    text = " ".join(invoke("sync", "--help").output.split())
    assert "4 with --wait: the timeout passed with objects still pending" in text


def test_sync_wait_stops_waiting_for_events_the_apiserver_does_not_take(kube, monkeypatch, caplog):
    """A CI job's `--timeout` bounds the run: the queued events get FLUSH_SECONDS."""
    gate = hanging_events(kube)
    monkeypatch.setattr(cli_mod, "FLUSH_SECONDS", 0.1)
    try:
        result = invoke("sync", "--wait", "--timeout", "0.05")
        assert result.exit_code == 4, result.output
        assert re.search(r"stopping with [1-9]\d* events not posted after 0.1s", caplog.text)
    finally:
        gate.set()
