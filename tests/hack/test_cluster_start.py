"""hack/cluster/cluster.py: the order a fresh cluster starts in, and which
processes it takes for its own."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from hack.cluster import cluster as launcher


def start_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What a fresh start spawns and creates, in order, with nothing run."""
    order: list[str] = []

    def spawn(lay: Any, name: str, args: list[str]) -> None:
        order.append(name)

    def apply_crds(cluster: Any, kubectl: str) -> str:
        order.append("crds")
        return ""

    monkeypatch.setattr(launcher, "_spawn", spawn)
    monkeypatch.setattr(launcher, "_apply_crds", apply_crds)
    monkeypatch.setattr(launcher, "_wait", lambda *args: None)
    monkeypatch.setattr(launcher, "_create_nodes", lambda cluster: None)
    monkeypatch.setattr(
        launcher, "_create_storage_class", lambda cluster: order.append("storage class")
    )
    monkeypatch.setattr(launcher, "_ensure_credentials", lambda lay: "token")
    monkeypatch.setattr(launcher, "_write_kubeconfig", lambda cluster: None)
    lay = launcher._layout(tmp_path)
    try:
        launcher._start(lay, tmp_path / "bin", "kubectl")
    finally:
        shutil.rmtree(lay.scratch, ignore_errors=True)  # on /dev/shm, not under tmp_path
    return order


def test_the_crds_are_established_before_the_controller_manager_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its first discovery must know our kinds. Started ahead of them, it
    failed every budget over a Redis's pods synced in its first half minute
    ("no matches for kind Redis"), and the disruption controller's backoff
    left them uncounted for minutes: a bench's rollout saw every eviction
    refused for ten."""
    order = start_order(tmp_path, monkeypatch)
    assert order.index("crds") < order.index("kube-controller-manager")
    assert order.index("kube-apiserver") < order.index("crds")


def test_every_component_is_started_and_the_default_class_comes_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claim made before the class exists would get no class from
    admission; the provisioner is one more component, stopped and checked
    like the others."""
    order = start_order(tmp_path, monkeypatch)
    assert [c for c in order if c in launcher.COMPONENTS] == list(launcher.COMPONENTS)
    assert order.index("kube-apiserver") < order.index("storage class")
    assert order.index("storage class") < order.index(launcher.PROVISIONER)
    assert order.index("storage class") < order.index("kube-controller-manager")


def test_the_volume_controllers_run() -> None:
    controllers = launcher.KCM_CONTROLLERS.split(",")
    for name in (
        "persistentvolume-binder-controller",
        "persistentvolume-expander-controller",
        "persistentvolumeclaim-protection-controller",
        "persistentvolume-protection-controller",
    ):
        assert name in controllers


def test_the_provisioner_is_known_by_its_script_not_by_any_python(tmp_path: Path) -> None:
    """A stray provisioner (its pid file lost) is found and stopped like a
    stray binary; another Python process, or another checkout's
    provisioner, is not ours."""
    lay = launcher._layout(tmp_path)
    argv = launcher._provisioner_args(lay, tmp_path / "bin", {"apiserver": 6443})
    exe = Path(sys.executable).resolve().name
    assert launcher._is_component(exe, argv)
    assert any(m in "\0".join(argv) for m in lay.markers())
    assert launcher._is_component("kwok", ["kwok", "--kubeconfig=x"])
    assert not launcher._is_component(exe, [argv[0], "-m", "pytest"])
    assert not launcher._is_component(exe, [argv[0], "/elsewhere/hack/cluster/provisioner.py"])
    assert not launcher._is_component("bash", [argv[0], *argv[1:]])


def test_the_provisioner_serves_the_default_class(tmp_path: Path) -> None:
    lay = launcher._layout(tmp_path)
    argv = launcher._provisioner_args(lay, tmp_path / "bin", {"apiserver": 6443})
    assert f"--name={launcher.STORAGE_CLASS['provisioner']}" in argv
    annotations = launcher.STORAGE_CLASS["metadata"]["annotations"]  # type: ignore[index]
    assert annotations["storageclass.kubernetes.io/is-default-class"] == "true"
    assert launcher.STORAGE_CLASS["volumeBindingMode"] == "Immediate"
    assert launcher.STORAGE_CLASS["allowVolumeExpansion"] is True
