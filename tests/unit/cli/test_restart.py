"""`reconciler restart redis NAME`: the request it sends, what it prints and
its exit codes, against the loopback apiserver (HTTP) or the fake client
(what the answer holds)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from reconciler.cli import commands as cli_mod
from reconciler.cli import restart
from reconciler.engine.crd_release import APPLY_CRDS
from tests.unit.fake_apiserver import REDIS_PATH, FakeApiserver, fake_apiserver
from tests.unit.fakes import FakeKube

# 22:40:00.7 at UTC+1: the stamp is UTC, to the second.
NOW = datetime(2026, 11, 28, 22, 40, 0, 700000, tzinfo=timezone(timedelta(hours=1)))
STAMP = "2026-11-28T21:40:00Z"
GROUP_PATH = REDIS_PATH.removesuffix("/redis")


def path(namespace: str, name: str = "cache") -> str:
    return f"{GROUP_PATH}/namespaces/{namespace}/redis/{name}"


def status(code: int, reason: str, message: str) -> tuple[int, dict[str, Any]]:
    body = {"kind": "Status", "status": "Failure", "reason": reason, "message": message}
    return code, {**body, "code": code}


def missing(name: str = "cache") -> tuple[int, dict[str, Any]]:
    """The apiserver's answer for an object that is not there."""
    return status(404, "NotFound", f'redis.myapp.demo.kubebuilder.io "{name}" not found')


@pytest.fixture(autouse=True)
def clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(restart, "_now", lambda: NOW)


@pytest.fixture
def api() -> Iterator[FakeApiserver]:
    server = next(served := fake_apiserver())
    yield server
    served.close()


def kubeconfig(api_url: str, tmp_path: Path, **namespaces: str) -> Path:
    """A context per keyword (its namespace, "" for none); the first is current."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": api_url}}],
        "users": [{"name": "u", "user": {"token": "fake-token"}}],
        "contexts": [
            {
                "name": ctx,
                "context": {"cluster": "c", "user": "u", **({"namespace": ns} if ns else {})},
            }
            for ctx, ns in namespaces.items()
        ],
        "current-context": next(iter(namespaces)),
    }
    file = tmp_path / "kubeconfig"
    file.write_text(yaml.safe_dump(doc))
    return file


def invoke(*args: str) -> Result:
    env = {"RECONCILER_MAX_RETRIES": "0"}
    return CliRunner().invoke(cli_mod.cli, list(args), env=env, catch_exceptions=False)


def restart_in(api: FakeApiserver, tmp_path: Path, *args: str, **namespaces: str) -> Result:
    file = kubeconfig(api.url, tmp_path, **(namespaces or {"x": ""}))
    return invoke("restart", "redis", *args, "--kubeconfig", str(file))


def test_patches_the_redis_in_the_namespace_given(api, tmp_path):
    result = restart_in(api, tmp_path, "cache", "-n", "shop")
    assert result.exit_code == 0, result.output
    assert result.stdout == "redis.myapp.demo.kubebuilder.io/cache restarted\n"
    assert result.stderr == ""
    assert api.writes() == [("PATCH", path("shop"))]


def test_json_names_the_object_and_the_time(api, tmp_path):
    result = restart_in(api, tmp_path, "cache", "-n", "shop", "-o", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "result": "restarted",
        "object": "redis.myapp.demo.kubebuilder.io/cache",
        "namespace": "shop",
        "name": "cache",
        "restarted_at": STAMP,  # the loopback apiserver answers with the patch it was sent
        "dry_run": False,
        "warnings": [],
        "exit_code": 0,
    }


@pytest.mark.parametrize(("context_ns", "used"), [("team", "team"), ("", "default")])
def test_without_n_the_contexts_namespace_else_default(api, tmp_path, context_ns, used):
    result = restart_in(api, tmp_path, "cache", x=context_ns)
    assert result.exit_code == 0, result.output
    assert api.writes() == [("PATCH", path(used))]


def test_global_options_before_the_command_are_taken(api, tmp_path):
    file = kubeconfig(api.url, tmp_path, x="")
    for args in (
        ["-n", "shop", "restart", "redis", "cache"],
        ["restart", "-n", "shop", "redis", "cache"],
    ):
        result = invoke("--kubeconfig", str(file), *args)
        assert result.exit_code == 0, result.output
    assert api.writes() == [("PATCH", path("shop"))] * 2


def test_several_contexts_each_named_in_its_own_namespace(api, tmp_path):
    result = restart_in(
        api, tmp_path, "cache", "--context", "a", "--context", "b", a="one", b="two"
    )
    assert result.exit_code == 0, result.output
    assert sorted(api.writes()) == [("PATCH", path("one")), ("PATCH", path("two"))]
    assert result.stdout.splitlines() == [
        "[a] redis.myapp.demo.kubebuilder.io/cache restarted",
        "[b] redis.myapp.demo.kubebuilder.io/cache restarted",
    ]


def test_a_redis_that_does_not_exist_is_named_in_one_line_exit_1(api, tmp_path):
    api.answer("PATCH", path("shop"), missing())
    result = restart_in(api, tmp_path, "cache", "-n", "shop")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == (
        'reconciler: error: redis.myapp.demo.kubebuilder.io "cache" not found in namespace "shop"\n'
    )
    json_out = restart_in(api, tmp_path, "cache", "-n", "shop", "-o", "json")
    assert json_out.exit_code == 1
    assert json.loads(json_out.stdout) == {
        "result": "error",
        "error": 'redis.myapp.demo.kubebuilder.io "cache" not found in namespace "shop"',
        "exit_code": 1,
    }


def test_no_crd_says_so_exit_1(api, tmp_path):
    api.answer("PATCH", path("shop"), (404, b"404 page not found"))  # as the apiserver says it
    result = restart_in(api, tmp_path, "cache", "-n", "shop")
    assert result.exit_code == 1
    assert result.stderr == (
        "reconciler: error: the Redis CRD is not installed (404: 404 page not found);"
        " apply crds/ (make install)\n"
    )


def test_an_unreachable_cluster_exits_3(tmp_path):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    file = kubeconfig(f"http://127.0.0.1:{port}", tmp_path, x="")
    result = invoke("restart", "redis", "cache", "-n", "shop", "--kubeconfig", str(file))
    assert result.exit_code == 3
    assert result.stderr.startswith("reconciler: error: cannot reach the cluster: ")
    as_json = invoke("restart", "redis", "cache", "--kubeconfig", str(file), "-o", "json")
    assert as_json.exit_code == 3
    assert json.loads(as_json.stdout)["result"] == "unreachable"


@pytest.mark.parametrize(("code", "reason"), [(401, "Unauthorized"), (403, "Forbidden")])
def test_refused_credentials_exit_3(api, tmp_path, code, reason):
    api.answer("PATCH", path("shop"), status(code, reason, "no"))
    result = restart_in(api, tmp_path, "cache", "-n", "shop")
    assert result.exit_code == 3
    assert "may not patch" in result.stderr


def test_a_refused_patch_exits_1(api, tmp_path):
    api.answer("PATCH", path("shop"), status(422, "Invalid", "spec.restartedAt: Too long"))
    result = restart_in(api, tmp_path, "cache", "-n", "shop")
    assert result.exit_code == 1
    assert "spec.restartedAt: Too long" in result.stderr


def test_dry_run_reads_and_writes_nothing(api, tmp_path):
    api.answer("GET", path("shop"), (200, {"kind": "Redis", "spec": {"num": 2}}))
    result = restart_in(api, tmp_path, "cache", "-n", "shop", "--dry-run")
    assert result.exit_code == 0, result.output
    assert result.stdout == "redis.myapp.demo.kubebuilder.io/cache restarted (dry run)\n"
    assert api.writes() == []
    assert api.requests == [("GET", path("shop"))]
    api.answer("GET", path("shop", "gone"), missing("gone"))
    gone = restart_in(api, tmp_path, "gone", "-n", "shop", "--dry-run")
    assert gone.exit_code == 1 and '"gone" not found' in gone.stderr  # the 404 of a GET
    assert api.writes() == []


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["cache", "-A"], "restart takes one namespace, not -A/--all-namespaces"),
        (["cache", "-n", "a", "-n", "b"], "not more than one -n/--namespace"),
        (["cache", "-n", "Not_A_Namespace"], "is not a namespace's name"),
        (["Cache/x"], "is not a Redis's name"),
        ([], "Missing argument 'NAME'"),
    ],
)
def test_bad_usage_exits_2_and_asks_nothing(api, tmp_path, args, said):
    result = restart_in(api, tmp_path, *args)
    assert result.exit_code == 2
    assert said in result.stderr
    assert api.requests == []


def test_help_has_an_example_and_the_exit_codes():
    result = invoke("restart", "redis", "--help")
    assert result.exit_code == 0
    assert "reconciler restart redis redis-sample -n shop" in result.stdout
    assert "kubectl patch redis NAME --type=merge" in result.stdout
    assert "Exit codes:\n    0  restarted" in result.stdout
    assert "-A, --all-namespaces" not in result.stdout  # one Redis: one namespace
    assert "Namespace to reconcile" in invoke("sync", "--help").stdout  # theirs unchanged


# ----------------------------------------------------------------- with the fake client


def cache(spec: dict) -> dict:
    """The Redis the tests restart, as stored."""
    return {"metadata": {"name": "cache", "namespace": "shop", "uid": "u"}, "spec": spec}


@pytest.fixture
def kube(monkeypatch: pytest.MonkeyPatch) -> FakeKube:
    fake = FakeKube()
    fake.held["Redis"] = [cache({"num": 2})]
    monkeypatch.setattr(cli_mod, "kube_of", lambda config: fake)
    return fake


def test_the_patch_is_one_field_as_utc_seconds(kube):
    result = invoke("restart", "redis", "cache", "-n", "shop")
    assert result.exit_code == 0, result.output
    assert kube.patches == [("Redis", "cache", {"spec": {"restartedAt": STAMP}}, "")]
    assert kube.writes == [("PATCH", "Redis", "shop", "cache", "")]
    assert datetime.strptime(STAMP, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC) == NOW.replace(
        microsecond=0
    )


def test_a_paused_redis_is_restarted_with_a_warning(kube):
    kube.held["Redis"] = [cache({"num": 2, "paused": True})]
    result = invoke("restart", "redis", "cache", "-n", "shop")
    assert result.exit_code == 0
    assert result.stdout == "redis.myapp.demo.kubebuilder.io/cache restarted\n"
    assert result.stderr == (
        "warning: redis.myapp.demo.kubebuilder.io/cache is paused (spec.paused):"
        " its pods roll once spec.paused is false\n"
    )


def test_a_crd_that_drops_the_field_is_an_error(kube):
    kube.scripted_patch_answer = {"spec": {"num": 2}}  # an older CRD prunes restartedAt
    result = invoke("restart", "redis", "cache", "-n", "shop")
    assert result.exit_code == 1
    assert "Redis CRD dropped spec.restartedAt" in result.stderr
    assert f"apply this release's CRDs ({APPLY_CRDS})" in result.stderr


def test_dry_run_from_the_environment_writes_nothing(kube):
    kube.objects[("Redis", "shop", "cache")] = {"spec": {"num": 2}}
    result = CliRunner().invoke(
        cli_mod.cli, ["restart", "redis", "cache", "-n", "shop"], env={"RECONCILER_DRY_RUN": "true"}
    )
    assert result.exit_code == 0, result.output
    assert kube.writes == [] and kube.calls == [("GET", "cache")]
    assert "(dry run)" in result.stdout
