"""hack/cluster/cluster.py: the order a fresh cluster starts in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hack.cluster import cluster as launcher


def test_the_crds_are_established_before_the_controller_manager_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its first discovery must know our kinds. Started ahead of them, it
    failed every budget over a Redis's pods synced in its first half minute
    ("no matches for kind Redis"), and the disruption controller's backoff
    left them uncounted for minutes: a bench's rollout saw every eviction
    refused for ten."""
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
    monkeypatch.setattr(launcher, "_ensure_credentials", lambda lay: "token")
    monkeypatch.setattr(launcher, "_write_kubeconfig", lambda cluster: None)
    lay = launcher._layout(tmp_path)
    launcher._start(lay, tmp_path / "bin", "kubectl")
    assert order.index("crds") < order.index("kube-controller-manager")
    assert order.index("kube-apiserver") < order.index("crds")
