"""The client contract (tests/client_contract.py) against the local
apiserver: what FakeKube must answer is what this answers."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from reconciler.children import PDBS
from reconciler.client.kube import Kube
from reconciler.config import Config
from reconciler.model import PODS
from tests.client_contract import CASES, World

from .conftest import Reconciler, wait_for

pytestmark = pytest.mark.e2e

CONTAINER = {"name": "c", "image": "registry.k8s.io/pause:3.10"}


@dataclass
class Real:
    client: Kube
    namespace: str

    def running_pod(self, name: str, labels: Mapping[str, str]) -> dict[str, Any]:
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": dict(labels)},
            "spec": {"containers": [CONTAINER]},
        }
        self.client.create(PODS, self.namespace, body)

        def ready() -> dict[str, Any] | None:
            pod = self.client.get(PODS, self.namespace, name)
            conditions = (pod.get("status") or {}).get("conditions") or []
            is_ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
            return pod if is_ready else None

        return wait_for(ready, what=f"pod {name} Ready")

    def budget_settled(self, name: str) -> None:
        def settled() -> bool:
            pdb = self.client.get(PDBS, self.namespace, name)
            status = pdb.get("status") or {}
            return status.get("observedGeneration") == pdb["metadata"]["generation"]

        wait_for(settled, what=f"budget {name} computed")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__.removeprefix("case_"))
def test_the_apiserver_answers_as_the_contract_says(
    case: Callable[[World], None], reconciler: Reconciler, ns: str
):
    kube = Kube(Config(kubeconfig=str(reconciler.kubeconfig)))
    case(Real(kube, ns))
