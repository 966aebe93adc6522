"""`sync` and `plan` over several clusters: each on its own, each named, the worst code."""

from __future__ import annotations

import json
import logging

import pytest

from reconciler.cli import commands as cli_mod
from reconciler.client.errors import ApiError, ConfigMissing, Unreachable
from tests.unit.cli.test_commands import REDIS, invoke
from tests.unit.fakes import FakeKube


class DownKube(FakeKube):
    """A cluster whose every read fails the same way."""

    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error

    def _listed(self, res, namespace, selector, accept, page_size):  # type: ignore[no-untyped-def]
        raise self.error


@pytest.fixture
def fleet(monkeypatch):
    """Context ``up`` reaches a cluster with one Redis; ``down`` none at all;
    ``refused`` answers 401."""
    up = FakeKube()
    up.held["Redis"] = [REDIS]
    kubes = {
        "up": up,
        "down": DownKube(Unreachable("connect to 127.0.0.1:1: connection refused")),
        "refused": DownKube(ApiError(401, "Unauthorized", "Unauthorized")),
    }

    def kube(config):
        if config.context not in kubes:
            raise ConfigMissing(f"context {config.context!r} not found in kubeconfig")
        return kubes[config.context]

    monkeypatch.setattr(cli_mod, "kube_of", kube)
    return kubes


def test_a_cluster_that_is_down_fails_only_itself(fleet):
    result = invoke("sync", "--context", "up", "--context", "down", "-o", "json")
    out = json.loads(result.stdout)
    assert result.exit_code == 3 and out["exit_code"] == 3
    assert out["clusters"]["up"]["result"] == "ok" and out["clusters"]["up"]["exit_code"] == 0
    assert out["clusters"]["up"]["actions"]["Pod/create/ok"] == 1
    assert out["clusters"]["down"]["result"] == "unreachable"
    assert "connection refused" in out["clusters"]["down"]["error"]
    assert ("POST", "r-0") in fleet["up"].calls
    assert "reconciler: error: [down] " in result.stderr


def test_each_clusters_text_and_log_lines_name_it(fleet):
    result = invoke("sync", "--context", "up", "--context", "refused")
    assert result.exit_code == 3
    lines = result.stdout.splitlines()
    assert any(line.startswith("[up] pass ") for line in lines), lines
    assert any(line.startswith("[refused] unreachable: ") for line in lines), lines
    assert "[up default/r] " in result.stderr
    assert "401" in result.stdout


def test_the_worst_code_wins_and_one_cluster_alone_prints_as_before(fleet):
    fleet["up"].scripted_errors[("POST", "r-0")] = ApiError(422, "Invalid", "spec.containers: bad")
    both = invoke("sync", "--context", "up", "--context", "down")
    assert both.exit_code == 3
    alone = invoke("sync", "--context", "up", "-o", "json")
    assert alone.exit_code == 1
    assert "clusters" not in json.loads(alone.stdout)


def test_plan_prints_each_clusters_plan_under_its_name(fleet):
    result = invoke("plan", "--context", "up", "--context", "down", "--detailed-exitcode")
    assert result.exit_code == 3
    assert "[up] " in result.stdout and "[down] unreachable: " in result.stdout
    assert fleet["up"].writes == []


def test_a_context_the_kubeconfig_lacks_is_refused_before_any_pass(fleet):
    result = invoke("sync", "--context", "up", "--context", "typo")
    assert result.exit_code == 2
    assert "reconciler: error: [typo] context 'typo' not found" in result.stderr
    assert fleet["up"].calls == []


def test_run_makes_a_loop_per_cluster_each_with_its_own_client(fleet, monkeypatch):
    from reconciler.run import manager

    loops = []
    monkeypatch.setattr(manager, "serve", lambda given, parallel: loops.extend(given) or 0)
    result = invoke("run", "--context", "up", "--context", "down")
    assert result.exit_code == 0, result.output
    assert [loop.name for loop in loops] == ["up", "down"]
    assert loops[0].turns.one_pass().outcome == "ok" and ("POST", "r-0") in fleet["up"].calls
    assert loops[1].turns.one_pass().outcome == "unreachable"


def test_a_process_setting_in_a_cluster_entry_is_refused(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("clusters: [{context: a, metrics_address: ':9'}]\n")
    result = invoke("sync", "--config", str(path))
    assert result.exit_code == 2
    assert "clusters[0]: metrics_address: a setting of the process" in result.stderr


def test_json_log_lines_carry_the_cluster_as_a_field(fleet):
    result = invoke("sync", "--context", "up", "--context", "down", "--log-format", "json")
    lines = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    create = next(x for x in lines if x.get("action") == "create")
    assert create["cluster"] == "up" and create["message"].startswith("[default/r] ")
    assert {x["cluster"] for x in lines} == {"up", "down"}


@pytest.mark.parametrize(
    ("codes", "worst"),
    [
        ((0, 0), 0),
        ((0, 2), 2),  # plan --detailed-exitcode: changes pending somewhere
        ((2, 1), 1),  # an error outweighs pending changes, as in terraform
        ((1, 4), 4),  # sync --wait: a timeout outweighs failed objects
        ((4, 3, 1), 3),  # a cluster not reached at all outweighs everything
    ],
)
def test_the_worst_code_of_the_clusters_is_the_commands(codes, worst):
    from reconciler.cli.served import worst as worst_of

    assert worst_of(list(codes)) == worst


def test_run_starts_every_loop_before_asking_a_cluster_for_its_crds(fleet, monkeypatch):
    """A cluster that hangs answered the CRD check only after the request
    timeout, and every cluster's first pass waited for it."""
    from reconciler.engine import crd_release
    from reconciler.run import manager

    asked: list[str] = []
    monkeypatch.setattr(crd_release, "lagging", lambda kube: asked.append("crds") or [])
    started: list[list[str]] = []
    loops = []

    def serve(given, parallel):
        started.append(list(asked))
        loops.extend(given)
        return 0

    monkeypatch.setattr(manager, "serve", serve)
    result = invoke("run", "--context", "up", "--context", "down")
    assert result.exit_code == 0, result.output
    assert started == [[]]
    loops[0].turns.one_pass()
    loops[0].turns.one_pass()
    assert asked == ["crds"]  # in its first pass, once


def test_run_warns_once_per_cluster_when_a_redis_may_run_any_image(
    fleet, monkeypatch, tmp_path, caplog
):
    """`check` warns of an empty allowed_images; the daemon, started without
    `check`, logs the same at start, and nothing once the setting lists some."""
    from reconciler.run import manager

    monkeypatch.setattr(manager, "serve", lambda given, parallel: 0)
    caplog.set_level(logging.WARNING, logger="reconciler.cli.run_command")
    assert invoke("run", "--context", "up").exit_code == 0
    (said,) = caplog.messages
    assert said.startswith("Redis images: allowed_images is empty: whoever may create a Redis")
    caplog.clear()
    listed = tmp_path / "c.yaml"
    listed.write_text("allowed_images: [redis]\n")
    assert invoke("run", "--context", "up", "--config", str(listed)).exit_code == 0
    assert caplog.messages == []
