"""`reconciler config`: every key's value and the layer it came from, per
cluster, without a pass, a credential, or a change to what `sync` would use."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from reconciler.cli import cli
from reconciler.cli.clusters import resolve
from reconciler.cli.settings import KEYS, Layers

TOKEN = "sekrit-token-never-printed"
KUBECONFIG = f"""
apiVersion: v1
kind: Config
current-context: a
clusters:
- name: c
  cluster: {{server: "https://127.0.0.1:1"}}
users:
- name: u
  user: {{token: {TOKEN}}}
contexts:
- name: a
  context: {{cluster: c, user: u}}
- name: b
  context: {{cluster: c, user: u}}
"""


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The host's own variables must not leak into what the tests compare."""
    for name in list(os.environ):
        if name.startswith("RECONCILER_") or name in ("KUBECONFIG", "CREDENTIALS_DIRECTORY"):
            monkeypatch.delenv(name)


def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), env=env or {})


def settings_of(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    result = invoke(*args, "-o", "json", env=env)
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.output))


def test_each_key_names_the_layer_that_set_it(tmp_path: Path):
    config = tmp_path / "reconciler.yaml"
    config.write_text("interval: 60\njitter: 1\nimage: file/redis:1\n")
    doc = settings_of(
        "--config", str(config), "config", "--interval", "5", env={"RECONCILER_JITTER": "2"}
    )
    got = doc["settings"]
    assert doc["config_file"] == {"path": str(config), "source": "flag --config"}
    assert got["interval"] == {"value": 5.0, "source": "flag --interval"}
    assert got["jitter"] == {"value": 2.0, "source": "env RECONCILER_JITTER"}
    assert got["image"] == {"value": "file/redis:1", "source": f"file {config}"}
    assert got["qps"] == {"value": 50.0, "source": "default"}
    assert set(got) == set(KEYS)


def test_a_fleet_has_a_block_per_cluster_and_an_entrys_key_names_its_entry(tmp_path: Path):
    config = tmp_path / "fleet.yaml"
    config.write_text(
        "interval: 60\nclusters:\n"
        "  - {name: prod, context: prod-admin, namespaces: [cache]}\n"
        "  - {context: staging, interval: 90}\n"
    )
    clusters = settings_of("config", env={"RECONCILER_CONFIG": str(config)})["clusters"]
    prod, staging = clusters["prod"]["settings"], clusters["staging"]["settings"]
    assert prod["namespaces"] == {"value": ["cache"], "source": f"file {config} clusters[0]"}
    assert prod["context"] == {"value": "prod-admin", "source": f"file {config} clusters[0]"}
    assert prod["interval"] == {"value": 60.0, "source": f"file {config}"}
    assert staging["interval"] == {"value": 90.0, "source": f"file {config} clusters[1]"}
    text = invoke("config", env={"RECONCILER_CONFIG": str(config)}).output.splitlines()
    assert text[0] == f"config file: {config} (env RECONCILER_CONFIG)"
    assert [line.split()[0] for line in text[1:]] == ["[prod]"] * (len(KEYS) + 1) + [
        "[staging]"
    ] * (len(KEYS) + 1)


def test_contexts_given_as_flags_name_the_flag(tmp_path: Path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    by_flag = settings_of("config", "--context", "a", "--context", "b")["clusters"]
    assert by_flag["b"]["settings"]["context"] == {"value": "b", "source": "flag --context"}
    every = settings_of("--kubeconfig", str(kubeconfig), "config", "--all-contexts")
    assert every["clusters"]["a"]["settings"]["context"]["source"] == "flag --all-contexts"
    assert every["clusters"]["a"]["settings"]["kubeconfig"] == {
        "value": str(kubeconfig),
        "source": "flag --kubeconfig",
    }


def test_namespaces_name_the_flag_the_user_typed():
    assert settings_of("config", "-n", "a")["settings"]["namespaces"]["source"] == (
        "flag --namespace"
    )
    assert settings_of("config", "-A")["settings"]["namespaces"]["source"] == (
        "flag --all-namespaces"
    )


def test_an_unset_kubeconfig_is_kubectls_KUBECONFIG(tmp_path: Path):
    got = settings_of("config", env={"KUBECONFIG": "/creds/kubeconfig"})["settings"]
    assert got["kubeconfig"] == {"value": "/creds/kubeconfig", "source": "env KUBECONFIG"}
    assert settings_of("config")["settings"]["kubeconfig"] == {"value": None, "source": "default"}


def test_no_credential_of_the_kubeconfig_is_printed(tmp_path: Path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    for args in (("config",), ("config", "--all-contexts")):
        for output in ("text", "json"):
            result = invoke(*args, "-o", output, env={"KUBECONFIG": str(kubeconfig)})
            assert result.exit_code == 0, result.output
            assert str(kubeconfig) in result.output and TOKEN not in result.output


def test_sync_and_run_command_lines_are_taken_as_they_are(tmp_path: Path):
    state = str(tmp_path / "state.json")
    synced = settings_of("config", "--wait", "--timeout", "60", "--state-file", state)
    assert synced["settings"]["state_file"] == {"value": state, "source": "flag --state-file"}
    ran = settings_of("config", "--leader-elect", "--metrics-address", ":8080")["settings"]
    assert ran["leader_elect"] == {"value": True, "source": "flag --leader-elect"}
    assert ran["metrics_address"]["value"] == ":8080"


@pytest.mark.parametrize(
    ("file", "args", "env", "says"),
    [
        ("intervall: 5\n", (), {}, "{file}: intervall: unknown key (did you mean interval?)"),
        (
            "clusters:\n  - {context: a, qps: 0}\n",
            (),
            {},
            "{file}: clusters[0]: qps: must be greater than 0, got 0.0",
        ),
        ("", (), {"RECONCILER_QPS": "x"}, "RECONCILER_QPS: qps: must be of type float"),
        ("", ("--interval", "-1"), {}, "--interval: interval: must be greater than 0"),
    ],
)
def test_a_bad_config_exits_2_on_one_line_naming_where_and_the_key(
    tmp_path: Path, file: str, args: tuple[str, ...], env: dict[str, str], says: str
):
    config = tmp_path / "c.yaml"
    config.write_text(file)
    result = invoke("--config", str(config), "config", *args, env=env)
    assert result.exit_code == 2
    (line,) = result.output.splitlines()
    assert line.startswith(f"reconciler: error: {says.format(file=config)}")
    as_json = invoke("--config", str(config), "config", "-o", "json", *args, env=env)
    assert as_json.exit_code == 2
    assert json.loads(as_json.stdout)["exit_code"] == 2


def test_tracing_the_sources_changes_no_cluster_config(tmp_path: Path):
    """`Layers.config`, as every command gets it, is the traced config."""
    config = tmp_path / "fleet.yaml"
    config.write_text("qps: 7\nclusters:\n  - {name: p, context: p-admin, burst: 9}\n")
    layers = Layers.read(str(config), {"RECONCILER_INTERVAL": "40"})
    (entry,) = layers.clusters
    flags = {"jitter": 1, "context": "p-admin"}
    traced = layers.traced(flags, entry)
    assert traced.config == layers.config(flags, entry)
    (cluster,) = resolve(layers, {"jitter": 1}).clusters
    assert cluster.config == traced.config
    assert (cluster.config.qps, cluster.config.burst, cluster.config.interval) == (7, 9, 40)


def test_a_pods_service_links_are_not_shown_as_settings():
    """A kubelet's variables for the namespace's Services (RECONCILER_PORT,
    RECONCILER_METRICS_SERVICE_HOST, ...) are neither read nor printed."""
    from .test_service_links import POD_ENV

    env = {**POD_ENV, "RECONCILER_INTERVAL": "30"}
    got = settings_of("config", env=env)["settings"]
    assert {k: s["source"] for k, s in got.items() if s["source"] != "default"} == {
        "interval": "env RECONCILER_INTERVAL"
    }
    text = invoke("config", env=env)
    assert text.exit_code == 0, text.output
    assert "SERVICE" not in text.output and "_PORT" not in text.output
