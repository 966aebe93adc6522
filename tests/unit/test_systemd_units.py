"""The shipped units run as systemd runs them, with config/reconciler-fleet.yaml
and its drop-in: each cluster reads the kubeconfig its entry names, and every
other cluster the unit's own copy of /etc/reconciler/kubeconfig.

A unit's command line is read from its file (continuations joined), its
specifiers and variables expanded to a sandbox of temporary directories, each
LoadCredential= copied into the credentials directory, and the command run as
`reconciler config -o json`, which takes the same options as `run` and `sync`
and prints each cluster's settings as those would use them.
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from reconciler.cli import cli
from tests.unit.test_manifests import unit

ROOT = Path(__file__).resolve().parents[2]
SYSTEMD = ROOT / "systemd"
FLEET = ROOT / "config" / "reconciler-fleet.yaml"
DROP_IN = SYSTEMD / "reconciler-fleet.conf"
BINARY = "/opt/reconciler/bin/reconciler"
INSTALLED_CONFIG = "/etc/reconciler/reconciler.yaml"  # where the units' headers install it


def service(*paths: Path) -> dict[str, list[str]]:
    """[Service] key -> its values, of a unit and then its drop-ins."""
    found: dict[str, list[str]] = {}
    for path in paths:
        for key, value in unit(path).get("Service", []):
            found.setdefault(key, []).append(value)
    return found


@dataclass(frozen=True)
class Sandbox:
    """The directories systemd gives a unit, and its instance's name."""

    credentials: Path
    state: Path
    instance: str

    def expand(self, text: str) -> str:
        pairs = {
            "${CREDENTIALS_DIRECTORY}": self.credentials,
            "%d": self.credentials,
            "${STATE_DIRECTORY}": self.state,
            "%S": self.state.parent,
            "%I": self.instance,
            "%i": self.instance,
        }
        for spec, value in pairs.items():
            text = text.replace(spec, str(value))
        return text

    def load(self, credentials: list[str]) -> None:
        """LoadCredential=ID:PATH: a copy of PATH named ID (here, a line naming PATH)."""
        for spec in credentials:
            name, _, source = spec.partition(":")
            (self.credentials / name).write_text(source)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("RECONCILER_") or name in ("KUBECONFIG", "CREDENTIALS_DIRECTORY"):
            monkeypatch.delenv(name)


def run_unit(unit: str, instance: str, tmp_path: Path, *extra: str) -> dict[str, Any]:
    """Each cluster's settings, by name, as the unit's command would use them."""
    lines = service(SYSTEMD / unit, DROP_IN)
    box = Sandbox(tmp_path / "credentials", tmp_path / "state" / "reconciler", instance)
    box.credentials.mkdir()
    box.state.mkdir(parents=True)
    box.load(lines["LoadCredential"])
    (exec_start,) = lines["ExecStart"]
    argv = shlex.split(box.expand(exec_start))
    assert argv[0] == BINARY
    args = [str(FLEET) if a == INSTALLED_CONFIG else a for a in argv[1:]]
    command = next(i for i, a in enumerate(args) if a in ("run", "sync"))
    args[command] = "config"
    env = {"CREDENTIALS_DIRECTORY": str(box.credentials), "STATE_DIRECTORY": str(box.state)}
    for line in lines.get("Environment", []):
        env.update(pair.split("=", 1) for pair in shlex.split(box.expand(line)))
    result = CliRunner().invoke(cli, [*args, *extra, "-o", "json"], env=env)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    if "clusters" in doc:
        return {name: c["settings"] for name, c in doc["clusters"].items()}
    return {instance: doc["settings"]}


def entries() -> dict[str, dict[str, Any]]:
    listed = yaml.safe_load(FLEET.read_text())["clusters"]
    return {e.get("name", e["context"]): e for e in listed}


UNITS = [
    ("reconciler.service", ""),
    ("reconciler-sync.service", ""),
    *(("reconciler@.service", name) for name in entries()),
]


@pytest.mark.parametrize(("unit", "instance"), UNITS)
def test_each_cluster_reads_the_kubeconfig_its_entry_names_else_the_units(
    unit: str, instance: str, tmp_path: Path
):
    box = Sandbox(tmp_path / "credentials", tmp_path / "state" / "reconciler", instance)
    default = box.credentials / "kubeconfig"
    clusters = run_unit(unit, instance, tmp_path)
    assert set(clusters) == ({instance} if instance else set(entries()))
    for name, settings in clusters.items():
        own = entries()[name].get("kubeconfig")
        want = box.expand(own) if own else str(default)
        assert settings["kubeconfig"]["value"] == want, name
        # It is in the sandbox: a LoadCredential= brought it, from its own file.
        assert Path(want).is_file(), f"{name}: no LoadCredential= copies {want}"
        if own:
            assert Path(want).read_text() != default.read_text(), name
    some_own = [n for n in clusters if entries()[n].get("kubeconfig")]
    assert some_own or instance, "the fleet example has an entry with its own kubeconfig"


def test_a_kubeconfig_flag_given_to_a_unit_still_wins_as_kubectls_does(tmp_path: Path):
    clusters = run_unit("reconciler.service", "", tmp_path, "--kubeconfig", "/etc/k")
    assert {s["kubeconfig"]["value"] for s in clusters.values()} == {"/etc/k"}
