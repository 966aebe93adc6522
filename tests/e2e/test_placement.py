"""Placement and resources on a real apiserver: the CRD checks the fields as
the Pod's own schema does, they reach the pods, and a change of them rolls."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import Kubectl, Reconciler, wait_for
from .test_real_clusters import columns, stays_converged
from .test_redis import pods, settled

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
PRIORITY_CLASS = "e2e-redis-high"


def placed(ns: str, node_selector: dict[str, str], **fields: Any) -> str:
    spec = {"num": 3, "port": 6379, "nodeSelector": node_selector, **fields}
    return json.dumps(
        {
            "apiVersion": "myapp.demo.kubebuilder.io/v1",
            "kind": "Redis",
            "metadata": {"name": "redis-sample", "namespace": ns},
            "spec": spec,
        }
    )


@pytest.fixture
def priority_class(kubectl: Kubectl):
    kubectl.apply(
        json.dumps(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": PRIORITY_CLASS},
                "value": 1000,
            }
        )
    )
    yield PRIORITY_CLASS
    kubectl.run("delete", "priorityclass", PRIORITY_CLASS, "--ignore-not-found")


def test_the_crd_holds_the_pod_schema_of_this_apiserver(kubectl: Kubectl, tmp_path: Path):
    openapi = tmp_path / "v1.json"
    openapi.write_text(kubectl.run("get", "--raw", "/openapi/v3/api/v1").stdout)
    check = subprocess.run(
        [sys.executable, "-m", "hack.pod_schema", str(openapi), "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stderr


@pytest.mark.parametrize(
    "fields,refused",
    [
        (
            {"tolerations": [{"key": "a", "operator": "Maybe"}]},
            'spec.tolerations[0].operator: Unsupported value: "Maybe"',
        ),
        ({"resources": {"requests": {"cpu": "lots"}}}, "spec.resources.requests.cpu"),
        (
            {
                "affinity": {
                    "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{}]}
                }
            },
            "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
            ".topologyKey: Required value",
        ),
    ],
)
def test_admission_refuses_what_a_pod_would_refuse(
    kubectl: Kubectl, ns: str, fields: dict[str, Any], refused: str
):
    bad = kubectl.apply(placed(ns, {"type": "kwok"}, **fields), check=False)
    assert bad.returncode != 0 and refused in bad.stderr, bad.stderr


def test_the_fields_reach_the_pods_and_a_change_rolls_them(
    kubectl: Kubectl, reconciler: Reconciler, ns: str, priority_class: str
):
    fields = {
        "resources": {"requests": {"cpu": "50m", "memory": "32Mi"}, "limits": {"memory": "64Mi"}},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "redis"}],
        "priorityClassName": priority_class,
    }
    kubectl.apply(placed(ns, {"type": "kwok"}, **fields))
    reconciler.converge(ns, settle=lambda: settled(kubectl, ns))
    for p in pods(kubectl, ns).values():
        spec = p["spec"]
        assert spec["nodeSelector"] == {"type": "kwok"}
        assert spec["containers"][0]["resources"] == fields["resources"]
        assert fields["tolerations"][0] in spec["tolerations"]  # admission adds its own
        assert (spec["priorityClassName"], spec["priority"]) == (priority_class, 1000)
        anti = spec["affinity"]["podAntiAffinity"][
            "preferredDuringSchedulingIgnoredDuringExecution"
        ]
        assert anti[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    stays_converged(kubectl, reconciler, ns)  # admission's additions are not drift

    kubectl.apply(placed(ns, {"kubernetes.io/os": "linux"}, **fields))
    history = []
    for _ in range(30):
        result = reconciler.sync(ns)
        actions = result.summary["actions"]
        assert actions.get("Pod/delete/ok", 0) + actions.get("Pod/evict/ok", 0) <= 1
        history.append({n: p["spec"]["nodeSelector"] for n, p in pods(kubectl, ns).items()})
        if result.writes == 0 and result.summary["planned"] == 0:
            break
        wait_for(lambda: settled(kubectl, ns), what="pods Ready")
    assert all(s == {"kubernetes.io/os": "linux"} for s in history[-1].values())
    assert len(history[-1]) == 3
    shown = columns(kubectl, ns)
    assert (shown["READY"], shown["UP-TO-DATE"], shown["STATUS"]) == ("3", "3", "Ready")
