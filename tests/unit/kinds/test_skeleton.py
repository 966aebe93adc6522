"""docs/architecture.md, "Adding a kind", followed: the skeleton copied and
renamed is a third kind that the client, observe, plan, apply and sync
reconcile with no change of theirs."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from reconciler.config import Config
from reconciler.engine.state import State
from reconciler.engine.sync import PassSetup, pass_once
from reconciler.kinds import registry, skeleton
from reconciler.model import ObjKey
from tests.unit.fakes import FakeKube
from tests.unit.sim import merge_patch

RENAMES = {
    "Example": "Memcached",
    "examples": "memcacheds",
    "example.com": "cache.example.com",
    "example-controller": "memcached-controller",
}


def third_kind(tmp_path: Path) -> ModuleType:
    """Step 1 of the checklist: the skeleton, copied and renamed."""
    text = Path(skeleton.__file__).read_text()
    for old, new in RENAMES.items():
        text = text.replace(old, new)
    path = tmp_path / "memcached.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("memcached_kind", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def memcached(version: str, status: dict[str, Any]) -> dict[str, Any]:
    meta = {"name": "m", "namespace": "a", "uid": "uid-m", "resourceVersion": version}
    return {"metadata": {**meta, "generation": 1}, "spec": {}, "status": status}


@pytest.fixture
def kind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    module = third_kind(tmp_path)
    # Step 2: its line in the registry.
    monkeypatch.setattr(registry, "KINDS", (*registry.KINDS, module.KIND))
    yield module
    sys.modules.pop("memcached_kind", None)


def test_a_kind_made_from_the_skeleton_is_reconciled_and_then_left_alone(kind: ModuleType):
    kube, state, config = FakeKube(), State(), Config()
    kube.held["Memcached"] = [memcached("1", {})]
    first = pass_once(PassSetup(kube=kube, config=config), state)  # type: ignore[arg-type]
    assert first.errors == []
    assert [w[:3] for w in kube.writes] == [("PATCH", "Memcached", "a")]
    (_, name, body, sub) = kube.patches[0]
    assert (name, sub) == ("m", "status")
    status = body["status"]
    assert status["observedGeneration"] == 1
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "Ready": "True",
        "Progressing": "False",
        "Degraded": "False",
    }
    key = ObjKey("Memcached", "a", "m")
    assert first.health[key].state == "Ready"

    # The apiserver stores the patch; the next pass finds nothing to do.
    stored = memcached("2", merge_patch({}, status))
    kube.held["Memcached"] = [stored]
    kube.objects[("Memcached", "a", "m")] = stored  # a later pass GETs what changed
    kube.writes.clear()
    second = pass_once(PassSetup(kube=kube, config=config), state)  # type: ignore[arg-type]
    assert kube.writes == [] and second.errors == []
    assert second.health[key].state == "Ready"


def test_the_skeleton_names_no_kind_the_registry_serves(kind: ModuleType):
    """A copy that kept a name of the skeleton's would clash with it."""
    assert kind.RESOURCE.kind not in {k.name for k in registry.KINDS[:-1]}
    assert skeleton.KIND not in registry.KINDS
