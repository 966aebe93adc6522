"""The client contract (tests/client_contract.py) against FakeKube: the
unit tests' fake answers as the apiserver does (tests/e2e/test_client_contract.py
runs the same cases against the real one)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from reconciler.model import PODS
from tests.client_contract import CASES, World
from tests.unit.fakes import FakeKube, matches


@dataclass
class Modelled:
    """FakeKube, and what the kubelet and the disruption controller would do."""

    client: FakeKube = field(default_factory=lambda: FakeKube())
    namespace: str = "contract"

    def running_pod(self, name: str, labels: Mapping[str, str]) -> dict[str, Any]:
        body = {"metadata": {"name": name, "labels": dict(labels)}, "spec": {"containers": []}}
        self.client.create(PODS, self.namespace, body)
        stored = self.client.objects[("Pod", self.namespace, name)]
        stored["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        return dict(stored)

    def budget_settled(self, name: str) -> None:
        pdb = self.client.objects[("PodDisruptionBudget", self.namespace, name)]
        wanted = pdb["spec"]["selector"]["matchLabels"]
        selector = ",".join(f"{k}={v}" for k, v in wanted.items())
        healthy = [
            pod
            for (kind, ns, _), pod in self.client.objects.items()
            if (kind, ns) == ("Pod", self.namespace) and matches(pod, selector)
        ]
        allowed = max(0, len(healthy) - int(pdb["spec"]["minAvailable"]))
        pdb["status"] = {"disruptionsAllowed": allowed, "currentHealthy": len(healthy)}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__.removeprefix("case_"))
def test_the_fake_answers_as_the_contract_says(case: Callable[[World], None]):
    case(Modelled())
