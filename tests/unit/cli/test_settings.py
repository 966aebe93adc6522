"""Precedence (flags > RECONCILER_* env > file > defaults) and clear errors."""

from __future__ import annotations

import pytest

from reconciler.cli.settings import Layers, load
from reconciler.config import Config, ConfigError
from reconciler.kinds.base import settings_of
from reconciler.kinds.redis.settings import DEFAULTS, RedisSettings


@pytest.fixture
def cfg_file(tmp_path):
    path = tmp_path / "reconciler.yaml"
    path.write_text("interval: 60\nnamespaces: [a, b]\nimage: file/redis:1\nqps: 5\n")
    return str(path)


def test_defaults():
    c = load(None, {}, {})
    assert c == Config()
    assert (
        c.interval == 30
        and c.namespaces == ()
        and settings_of(c, DEFAULTS).image == "redis:5-alpine"
    )


def test_file_overrides_defaults(cfg_file):
    c = load(cfg_file, {}, {})
    assert (c.interval, c.namespaces, settings_of(c, DEFAULTS).image, c.qps) == (
        60.0,
        ("a", "b"),
        "file/redis:1",
        5.0,
    )


def test_env_overrides_file(cfg_file):
    c = load(cfg_file, {}, {"RECONCILER_INTERVAL": "90", "RECONCILER_NAMESPACES": "x,y"})
    assert (c.interval, c.namespaces, settings_of(c, DEFAULTS).image) == (
        90.0,
        ("x", "y"),
        "file/redis:1",
    )


def test_flags_override_env_and_file(cfg_file):
    c = load(cfg_file, {"interval": 5, "namespaces": ("z",)}, {"RECONCILER_INTERVAL": "90"})
    assert (c.interval, c.namespaces) == (5.0, ("z",))


def test_config_file_from_env(cfg_file):
    assert load(None, {}, {"RECONCILER_CONFIG": cfg_file}).interval == 60.0


def test_all_namespaces_flag_beats_file(cfg_file):
    assert load(cfg_file, {"namespaces": ()}, {}).namespaces == ()


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("interval: soon\n", "interval: must be of type float"),
        ("interval: -1\n", "interval: must be greater than 0"),
        ("page_size: 2.5\n", "page_size: must be an integer"),
        ("log_format: xml\n", "log_format: must be one of text, json"),
        ("intervall: 3\n", "intervall: unknown key (did you mean interval?)"),
        ("namespaces: 3\n", "namespaces: must be a list"),
        ("pod_report: maybe\n", "pod_report: must be true or false"),
        ("- a\n", "top level must be a mapping"),
        ("a: [\n", "invalid YAML"),
    ],
)
def test_bad_file_names_file_key_and_reason(tmp_path, text, needle):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as exc:
        load(str(path), {}, {})
    assert str(path) in str(exc.value) and needle in str(exc.value)


def test_bad_env_names_the_variable():
    with pytest.raises(ConfigError, match="RECONCILER_WRITE_CONCURRENCY: write_concurrency"):
        load(None, {}, {"RECONCILER_WRITE_CONCURRENCY": "many"})


def test_missing_file_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read config file"):
        load(str(tmp_path / "nope.yaml"), {}, {})


def test_empty_file_is_fine(tmp_path):
    path = tmp_path / "empty.yaml"
    path.write_text("")
    assert load(str(path), {}, {}) == Config()


def test_shipped_config_file_documents_the_defaults():
    from pathlib import Path

    shipped = Path(__file__).resolve().parents[3] / "config" / "reconciler.yaml"
    # The one key set to other than its default: the images the docs name.
    documented = RedisSettings(allowed_images=("redis", "oliver006/redis_exporter"))
    assert load(str(shipped), {}, {}) == Config(kind_settings=(documented,))
    # Every key is there, commented out with its default: tests/hack/test_config_file.py.


def test_an_unknown_reconciler_variable_is_an_error_naming_it():
    with pytest.raises(ConfigError, match="RECONCILER_NAMESPACE: unknown variable") as err:
        load(None, {}, {"RECONCILER_NAMESPACE": "x"})
    assert str(err.value).endswith("(did you mean RECONCILER_NAMESPACES?)")
    with pytest.raises(ConfigError, match=r"RECONCILER_FOO: unknown variable \(known: "):
        load(None, {}, {"RECONCILER_FOO": "x"})
    # Other variables, and the config file's own, are not ours to judge.
    assert load(None, {}, {"RECONCILERX": "1", "HOME": "/"}) == Config()


def test_a_kubeconfig_in_the_file_may_name_the_units_credentials_directory(tmp_path):
    """A sandboxed unit reads its own copy (LoadCredential=) of a root-only file;
    the same config file serves every unit, each with its own directory."""
    path = tmp_path / "fleet.yaml"
    path.write_text(
        "kubeconfig: ${CREDENTIALS_DIRECTORY}/kubeconfig\n"
        "clusters:\n  - {context: eu, kubeconfig: '${CREDENTIALS_DIRECTORY}/eu.kubeconfig'}\n"
    )
    layers = Layers.read(str(path), {"CREDENTIALS_DIRECTORY": "/run/credentials/r.service"})
    (entry,) = layers.clusters
    assert layers.config({}).kubeconfig == "/run/credentials/r.service/kubeconfig"
    assert layers.config({}, entry).kubeconfig == "/run/credentials/r.service/eu.kubeconfig"
    # Outside such a unit the path stays as written: its "no such file" names it.
    unset = Layers.read(str(path), {})
    assert (
        unset.config({}, unset.clusters[0]).kubeconfig == "${CREDENTIALS_DIRECTORY}/eu.kubeconfig"
    )


def test_only_a_kubeconfig_names_the_credentials_directory(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("state_file: ${CREDENTIALS_DIRECTORY}/s\n")
    env = {"CREDENTIALS_DIRECTORY": "/run/c"}
    assert load(str(path), {}, env).state_file == "${CREDENTIALS_DIRECTORY}/s"
    assert load(None, {"kubeconfig": "${CREDENTIALS_DIRECTORY}/k"}, env).kubeconfig == (
        "${CREDENTIALS_DIRECTORY}/k"
    )
