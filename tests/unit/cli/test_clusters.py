"""Which clusters a command serves (`cli/clusters.py`) and the file's list of them."""

from __future__ import annotations

import threading

import pytest
import yaml

from reconciler import log_cluster
from reconciler.cli.clusters import resolve
from reconciler.cli.settings import Layers
from reconciler.config import ConfigError


def layers(tmp_path, text: str = "", env: dict[str, str] | None = None) -> Layers:
    path = tmp_path / "reconciler.yaml"
    path.write_text(text)
    return Layers.read(str(path), env or {})


FLEET = """
interval: 60
namespaces: [shared]
state_file: /var/lib/reconciler/state.json
clusters:
  - name: prod
    context: prod-admin
    namespaces: [cache]
  - context: staging
"""


def test_the_files_list_gives_each_cluster_its_keys_over_the_top_level(tmp_path):
    fleet = resolve(layers(tmp_path, FLEET), {})
    assert fleet.listed
    assert [(c.name, c.config.context, c.config.namespaces) for c in fleet.clusters] == [
        ("prod", "prod-admin", ("cache",)),
        ("staging", "staging", ("shared",)),
    ]
    assert {c.config.interval for c in fleet.clusters} == {60.0}
    # Each cluster keeps its own pod view: one state file each.
    assert [c.config.state_file for c in fleet.clusters] == [
        "/var/lib/reconciler/state.json.prod",
        "/var/lib/reconciler/state.json.staging",
    ]


def test_flags_and_variables_beat_a_clusters_own_keys(tmp_path):
    fleet = resolve(layers(tmp_path, FLEET, {"RECONCILER_INTERVAL": "5"}), {"namespaces": ("x",)})
    assert [(c.config.namespaces, c.config.interval) for c in fleet.clusters] == [
        (("x",), 5.0),
        (("x",), 5.0),
    ]


def test_one_context_flag_picks_one_cluster_of_the_list_by_name_or_context(tmp_path):
    for given in ("prod", "prod-admin"):
        fleet = resolve(layers(tmp_path, FLEET), {}, contexts=(given,))
        assert not fleet.listed
        ((cluster,),) = [fleet.clusters]
        assert (cluster.name, cluster.config.context, cluster.config.namespaces) == (
            "prod",
            "prod-admin",
            ("cache",),
        )
        # One cluster, as before: its state file is the one named.
        assert cluster.config.state_file == "/var/lib/reconciler/state.json"


def test_repeated_context_flags_serve_each_context(tmp_path):
    fleet = resolve(layers(tmp_path), {}, contexts=("a", "b", "a"))
    assert fleet.listed
    assert [(c.name, c.config.context) for c in fleet.clusters] == [("a", "a"), ("b", "b")]


def test_no_list_and_no_flag_is_the_one_cluster_of_old(tmp_path):
    fleet = resolve(layers(tmp_path, "context: only\n"), {})
    assert not fleet.listed
    assert [(c.name, c.config.context) for c in fleet.clusters] == [("", "only")]


def test_all_contexts_takes_every_context_of_the_kubeconfig_in_its_order(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    contexts = [{"name": n, "context": {"cluster": "c", "user": "u"}} for n in ("z", "prod-admin")]
    kubeconfig.write_text(yaml.safe_dump({"contexts": contexts, "current-context": "z"}))
    fleet = resolve(layers(tmp_path, FLEET), {"kubeconfig": str(kubeconfig)}, all_contexts=True)
    # The file's entry for prod-admin still gives it its name and namespaces.
    assert [(c.name, c.config.context, c.config.namespaces) for c in fleet.clusters] == [
        ("z", "z", ("shared",)),
        ("prod", "prod-admin", ("cache",)),
    ]


def test_context_and_all_contexts_are_exclusive(tmp_path):
    with pytest.raises(ConfigError, match="--context and --all-contexts"):
        resolve(layers(tmp_path), {}, contexts=("a",), all_contexts=True)


@pytest.mark.parametrize(
    ("entries", "needle"),
    [
        ("clusters: prod\n", "clusters: must be a list"),
        ("clusters: [3]\n", "clusters[0]: must be a mapping"),
        ("clusters: [{name: a}]\n", "clusters[0]: context: a kubeconfig context is required"),
        ("clusters: [{context: a, intervall: 3}]\n", "clusters[0]: intervall: unknown key"),
        ("clusters: [{context: a, interval: -1}]\n", "clusters[0]: interval: must be greater"),
        ("clusters: [{context: a, name: 'two words'}]\n", "clusters[0]: name: must be a word"),
        ("clusters: [{context: a}, {context: a}]\n", "the name a is given twice"),
    ],
)
def test_a_bad_cluster_entry_names_the_file_the_entry_and_the_key(tmp_path, entries, needle):
    with pytest.raises(ConfigError, match=r"reconciler\.yaml: ") as err:
        layers(tmp_path, entries)
    assert needle in str(err.value)


def test_each_serves_the_clusters_at_once_each_logging_under_its_name(tmp_path):
    fleet = resolve(layers(tmp_path), {}, contexts=("a", "b"))
    both_in = threading.Barrier(2, timeout=5)  # fails unless both run at the same time

    def work(cluster, item):
        both_in.wait()
        return (cluster.name, item, log_cluster.CLUSTER.get())

    assert fleet.each(work, [1, 2]) == [("a", 1, "a"), ("b", 2, "b")]
    assert log_cluster.CLUSTER.get() == ""


def test_the_shipped_fleet_example_loads_as_three_clusters():
    from pathlib import Path

    shipped = Path(__file__).resolve().parents[3] / "config" / "reconciler-fleet.yaml"
    under_unit = {"CREDENTIALS_DIRECTORY": "/run/credentials/reconciler.service"}
    fleet = resolve(Layers.read(str(shipped), under_unit), {})
    assert [c.name for c in fleet.clusters] == ["prod", "staging", "eu"]
    prod, staging, eu = (c.config for c in fleet.clusters)
    assert prod.shard and prod.namespaces == ("cache", "sessions") and not staging.shard
    assert (staging.interval, prod.interval) == (60.0, 30.0)
    assert eu.kubeconfig == "/run/credentials/reconciler.service/eu.kubeconfig"
    assert prod.kubeconfig is None
    assert {c.metrics_address for c in (prod, staging, eu)} == {"127.0.0.1:8080"}
