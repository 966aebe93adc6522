"""config/reconciler.yaml, the file a bastion installs, is what
hack/config_file.py writes from the code: every key, commented out with its
default, so that `reconciler config` says "default" for each key a user has
not set. A key added to the code fails here until the file is written again."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from hack import config_file
from reconciler.cli import cli
from reconciler.cli.settings import CLUSTERS_KEY, DEFAULT, KEYS, load, read_file
from reconciler.config import Config, coerce

SHIPPED = config_file.PATH
COMMENTED = re.compile(r"^#([a-z][a-z0-9_]*): (.*)$", re.MULTILINE)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("RECONCILER_") or name in ("KUBECONFIG", "CREDENTIALS_DIRECTORY"):
            monkeypatch.delenv(name)


def test_the_shipped_file_is_what_the_script_writes_from_the_code() -> None:
    assert SHIPPED.read_text() == config_file.render(), (
        f"config/reconciler.yaml is not what `{config_file.COMMAND}` writes from the code's "
        "keys and defaults: run it (a new key needs its line in hack/config_file.py's NOTES)"
    )


def test_each_key_is_there_once_commented_out_but_the_ones_set() -> None:
    text = SHIPPED.read_text()
    commented = COMMENTED.findall(text)
    assert [k for k, _ in commented] == [k for k in KEYS if k not in config_file.SET]
    for key in config_file.SET:
        assert len(re.findall(rf"^{key}: ", text, re.MULTILINE)) == 1


def test_each_commented_value_uncommented_is_the_code_s_default(tmp_path: Path) -> None:
    """Removing a key's "#" changes nothing: the file shows the true defaults."""
    every = tmp_path / "every.yaml"
    every.write_text(COMMENTED.sub(r"\1: \2", SHIPPED.read_text()))
    assert load(str(every), {}, {}) == load(str(SHIPPED), {}, {})


def test_reconciler_config_says_default_for_every_key_but_those_the_file_sets() -> None:
    result = CliRunner().invoke(cli, ["config", "--config", str(SHIPPED), "-o", "json"], env={})
    assert result.exit_code == 0, result.output
    sources = {k: s["source"] for k, s in json.loads(result.output)["settings"].items()}
    assert set(sources) == set(KEYS)
    from_file = {k for k, s in sources.items() if s != DEFAULT}
    assert from_file == set(config_file.SET)
    assert {sources[k] for k in from_file} == {f"file {SHIPPED}"}


def test_the_file_sets_its_set_keys_and_nothing_else() -> None:
    loaded = load(str(SHIPPED), {}, {})
    assert loaded != Config()
    assert loaded == load(None, {k: v for k, (v, _) in config_file.SET.items()}, {})


def test_a_key_without_a_note_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    notes = dict(config_file.NOTES)
    del notes["interval"]
    monkeypatch.setattr(config_file, "NOTES", notes)
    with pytest.raises(config_file.MissingNote, match="NOTES for interval"):
        config_file.render()


def test_check_mode_exits_1_when_the_file_differs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = tmp_path / "reconciler.yaml"
    copy.write_text(config_file.render())
    monkeypatch.setattr(config_file, "PATH", copy)
    assert config_file.main(["x", "--check"]) == 0
    copy.write_text(copy.read_text().replace("#interval: 30", "#interval: 31"))
    assert config_file.main(["x", "--check"]) == 1
    assert config_file.main(["x"]) == 0 and config_file.main(["x", "--check"]) == 0


def test_the_fleet_example_sets_only_what_differs_and_what_the_shipped_file_sets() -> None:
    """config/reconciler-fleet.yaml, treated alike: no key pinned at its default."""
    fleet = SHIPPED.parent / "reconciler-fleet.yaml"
    under_unit = {"CREDENTIALS_DIRECTORY": "/run/credentials/reconciler.service"}
    top = {k: v for k, v in read_file(fleet, under_unit).items() if k != CLUSTERS_KEY}
    pinned = [k for k, v in top.items() if v == coerce(k, KEYS[k].default, "default", KEYS[k])]
    assert pinned == []
    for key, (value, _) in config_file.SET.items():
        assert top[key] == coerce(key, value, "SET", KEYS[key])
