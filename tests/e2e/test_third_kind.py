"""A third kind, declared in this file alone, reconciled on the local cluster
by the unchanged engine through `reconciler plan`, `sync`, `check` and
`manifests`. docs/architecture.md, "Adding a kind", walks through it.

`Notice` (notices.e2e.reconciler.dev/v1): ``spec.text`` and ``spec.copies``.
A Notice owns a ConfigMap holding its text and ``copies`` pods that mount
it, and says in its status whether they are all there and Ready.

The CLI runs as a process of its own, as a user runs it, with this kind
added to the registry first (`BOOT`): what a packaged kind would do in
``reconciler/kinds/registry.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

from reconciler import __version__
from reconciler.actions import (
    Action,
    CreateChild,
    CreatePod,
    DeletePod,
    PatchChild,
    PatchStatus,
)
from reconciler.backoff import STATUS_FIELD, from_status, to_status
from reconciler.children import ChildType
from reconciler.constants import LABEL_INSTANCE, LABEL_MANAGED_BY, LABEL_VERSION, MANAGED_BY
from reconciler.health import READY, Health
from reconciler.kinds import registry
from reconciler.kinds.base import Bound, Kind, Object, PlanInput, Planned
from reconciler.kinds.conditions import (
    Verdict,
    condition,
    holder_field,
    observed_conditions,
    status_after,
    status_changes,
)
from reconciler.kinds.order import Step, sharded
from reconciler.model import OwnerRef, ResourceType, mapping
from tests.e2e.conftest import Kubectl, kubeconfig_for, wait_for

# 1. Where it lives in the API, and what it makes.
RESOURCE = ResourceType("e2e.reconciler.dev", "v1", "Notice", "notices")
COMPONENT = "notice-controller"
CONFIG_MAPS = ChildType(
    ResourceType("", "v1", "ConfigMap", "configmaps"), spec_read=(), top_read=("data",)
)
TEXT_KEY = "text"
IMAGE = "registry.k8s.io/pause:3.9"  # kwok runs no container; any image will do


# 2. Its objects, decoded once: what every object has, and its spec.
@dataclass(frozen=True, kw_only=True, slots=True)
class Notice(Object):
    resource: ClassVar[ResourceType] = RESOURCE
    text: str
    copies: int


def from_api(obj: Mapping[str, Any]) -> Notice:
    spec = mapping(obj.get("spec"))
    copies = spec.get("copies")
    return Notice.decoded(
        obj,
        text=str(spec.get("text", "")),
        copies=copies if isinstance(copies, int) and not isinstance(copies, bool) else 0,
    )


def config_map_name(notice: Notice) -> str:
    return f"{notice.name}-text"


def pod_names(notice: Notice) -> tuple[str, ...]:
    return tuple(f"{notice.name}-{i}" for i in range(notice.copies))


def child_names(notice: Notice) -> tuple[tuple[str, str], ...]:
    return ((CONFIG_MAPS.kind, config_map_name(notice)),)


# 3. Its rules: the ConfigMap and the pods it wants, then its status.
def _metadata(notice: Notice, name: str = "") -> dict[str, Any]:
    owner = OwnerRef(RESOURCE.api_version, RESOURCE.kind, notice.name, notice.uid, True, True)
    labels = {LABEL_MANAGED_BY: MANAGED_BY, LABEL_INSTANCE: notice.name}
    meta = {"namespace": notice.namespace, "labels": labels, "ownerReferences": [owner.to_dict()]}
    return {"name": name, **meta} if name else meta


def config_map_writes(notice: Notice, inp: PlanInput) -> tuple[list[Action], str | None]:
    """The ConfigMap's create or repair, and what stops it (another's)."""
    if CONFIG_MAPS.kind not in inp.children:
        return [], None  # not listed this pass: nothing of it is written
    name = config_map_name(notice)
    found = inp.pods.child(CONFIG_MAPS.kind, notice.namespace, name)
    data = {TEXT_KEY: notice.text}
    if found is None:
        manifest = {"apiVersion": "v1", "kind": CONFIG_MAPS.kind, "data": data}
        return [CreateChild(notice.key, {**manifest, "metadata": _metadata(notice, name)})], None
    if found.controller_uid != notice.uid:
        return [], f"ConfigMap {name} belongs to another"
    if found.spec.get("data") == data:
        return [], None
    body = {"data": data}
    return [PatchChild(notice.key, found.key, found.resource_version, body, "text changed")], None


def pod_writes(notice: Notice, inp: PlanInput) -> list[Action]:
    wanted = pod_names(notice)
    template = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": _metadata(notice),
        "spec": {
            "containers": [{"name": "notice", "image": IMAGE}],
            "volumes": [{"name": "text", "configMap": {"name": config_map_name(notice)}}],
        },
    }
    creates: list[Action] = [
        CreatePod(notice.key, name, template)
        for name in wanted
        if inp.pods.named(notice.namespace, name) is None
    ]
    surplus: list[Action] = [
        DeletePod(notice.key, pod.namespace, pod.name, pod.uid, "surplus")
        for pod in inp.pods.owned_by(notice.uid)
        if pod.name not in wanted and not pod.terminating
    ]
    return creates + surplus


def verdicts(
    notice: Notice, inp: PlanInput, writes: Sequence[Action], blocked: str | None
) -> dict[str, Verdict]:
    ready = [n for n in pod_names(notice) if (p := inp.pods.named(notice.namespace, n)) and p.ready]
    count = f"{len(ready)}/{notice.copies} pods ready"
    done = not writes and len(ready) == notice.copies and blocked is None
    return {
        "Ready": Verdict(done, READY if done else "Waiting", count),
        "Progressing": Verdict(not done and blocked is None, "Reconciling", count),
        "Degraded": Verdict(blocked is not None, "Conflict" if blocked else "None", blocked or ""),
    }


def status_patch(notice: Notice, inp: PlanInput, status: dict[str, Any]) -> list[Action]:
    wanted = {k: v for k, v in status.items() if v is not None or k in notice.status}
    changed = status_changes(notice.status, wanted)
    if not changed:
        return []
    return [PatchStatus(notice.key, notice.resource_version, wanted, changed=changed)]


def desired_status(notice: Notice, inp: PlanInput, given: dict[str, Verdict]) -> dict[str, Any]:
    observed = observed_conditions(notice.status)
    conditions = [
        condition(t, v, notice.generation, observed, inp.now).to_dict() for t, v in given.items()
    ]
    return {
        "observedGeneration": notice.generation,
        "conditions": conditions,
        STATUS_FIELD: None,
        **holder_field(inp.holder),
    }


def plan(notice: Notice, inp: PlanInput) -> Planned:
    if notice.deletion_timestamp:
        return Planned([])  # its children go with it: the garbage collector follows their owner
    if inp.gate.hold:
        return Planned(failure_status(notice, inp))
    config_writes, blocked = config_map_writes(notice, inp)
    writes = config_writes + pod_writes(notice, inp)
    status = desired_status(notice, inp, verdicts(notice, inp, writes, blocked))
    return Planned(writes + status_patch(notice, inp, status), Bound(failure_status, (notice,)))


def failure_status(notice: Notice, inp: PlanInput) -> list[Action]:
    record = {STATUS_FIELD: to_status(inp.gate.failure), **holder_field(inp.holder)}
    return status_patch(notice, inp, record)


def plan_unseen(notice: Notice, inp: PlanInput, why: str) -> list[Action]:
    """The pod LIST was refused: nothing is made on a view not had."""
    unseen = Verdict(True, "PodsUnknown", why)
    given = {"Ready": Verdict(False, "PodsUnknown", why), "Degraded": unseen}
    return status_patch(notice, inp, desired_status(notice, inp, given))


def health(notice: Notice, actions: Sequence[Action]) -> Health:
    status = status_after(notice.status, actions, notice.key)
    failure = from_status(status)
    if failure is not None:
        return Health(failure.reason, failure.message, degraded=True)
    found = observed_conditions(status)
    degraded, ready = found.get("Degraded") or {}, found.get("Ready") or {}
    if degraded.get("status") == "True":
        return Health(str(degraded.get("reason")), str(degraded.get("message")), degraded=True)
    if ready.get("status") == "True":
        return Health(READY, str(ready.get("message")))
    return Health("Reconciling", str(ready.get("message")), progressing=True)


# 4. What it declares, once: the engine, check and manifests read this.
KIND: Kind[Notice] = Kind(
    RESOURCE,
    COMPONENT,
    from_api,
    plan,
    health,
    plan_unseen=plan_unseen,
    owns_pods=True,
    pod_names=pod_names,
    children=(CONFIG_MAPS,),
    child_names=child_names,
    order=sharded(
        Step("config map", (CreateChild, PatchChild), CONFIG_MAPS.kind),
        Step("pods", (CreatePod, DeletePod)),
        Step("status", (PatchStatus,)),
    ),
)


def main() -> None:
    """`reconciler` with this kind registered beside Redis and Xca."""
    registry.KINDS = (*registry.KINDS, KIND)
    from reconciler.cli import main as cli

    cli()


# 5. Its CRD, with the status subresource and this release's label.
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": RESOURCE.crd_name, "labels": {LABEL_VERSION: __version__}},
    "spec": {
        "group": RESOURCE.group,
        "scope": "Namespaced",
        "names": {"kind": "Notice", "listKind": "NoticeList", "plural": "notices"},
        "versions": [
            {
                "name": RESOURCE.version,
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {
                                    "text": {"type": "string", "maxLength": 1024},
                                    "copies": {"type": "integer", "minimum": 0, "maximum": 5},
                                },
                            },
                            "status": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            },
                        },
                    }
                },
            }
        ],
    },
}

ROOT = Path(__file__).resolve().parents[2]
BOOT = "from tests.e2e.test_third_kind import main; main()"


# 6. The test: the engine, plan, check and manifests, each unchanged.


@dataclass
class Cli:
    kubeconfig: Path

    def __call__(self, *args: str, expect: int | None = 0) -> subprocess.CompletedProcess[str]:
        cluster = () if args[0] == "manifests" else ("--kubeconfig", str(self.kubeconfig))
        cmd = [sys.executable, "-c", BOOT, *args, *cluster]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
        if expect is not None and proc.returncode != expect:
            raise AssertionError(f"{args} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
        return proc

    def sync(self, ns: str) -> dict[str, Any]:
        summary: dict[str, Any] = json.loads(self("sync", "-n", ns, "-o", "json").stdout)
        return summary


@pytest.fixture(scope="module")
def crd(kubectl: Kubectl) -> Iterator[None]:
    kubectl.apply(yaml.safe_dump(CRD))
    kubectl.run("wait", "--for=condition=Established", f"crd/{RESOURCE.crd_name}")
    yield
    kubectl.run("delete", "crd", RESOURCE.crd_name, "--wait=false", check=False)


def notice(ns: str, text: str, copies: int) -> str:
    meta = {"name": "hello", "namespace": ns}
    body = {"apiVersion": RESOURCE.api_version, "kind": RESOURCE.kind, "metadata": meta}
    return yaml.safe_dump({**body, "spec": {"text": text, "copies": copies}})


def converge(cli: Cli, ns: str) -> list[dict[str, Any]]:
    """Passes until one plans nothing (kwok makes the pods Ready meanwhile)."""
    seen: list[dict[str, Any]] = []

    def done() -> bool:
        seen.append(cli.sync(ns))
        return seen[-1]["planned"] == 0 and seen[-1]["api_writes"] == 0

    wait_for(done, what=f"the notice to converge: {seen[-1:]}", timeout=60, interval=0.5)
    return seen


def pods(kubectl: Kubectl, ns: str) -> dict[str, str]:
    found = kubectl.json("get", "pods", "-n", ns, "-l", f"{LABEL_INSTANCE}=hello")["items"]
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in found}


def test_a_kind_declared_in_one_file_is_planned_synced_checked_and_granted(
    kubectl: Kubectl, crd: None, ns: str, tmp_path: Path
):
    cli = Cli(kubectl.kubeconfig)
    kubectl.apply(notice(ns, "hi", 2))
    shown = cli("plan", "-n", ns).stdout
    assert shown.startswith(f"Notice {ns}/hello:\n  + create configmap {ns}/hello-text\n"), shown
    assert f"+ create pod {ns}/hello-0" in shown and f"+ create pod {ns}/hello-1" in shown
    assert f"Notice {ns}/hello: Reconciling: 0/2 pods ready" in shown

    first = converge(cli, ns)
    assert first[0]["actions"] == {
        "ConfigMap/create/ok": 1,
        "Pod/create/ok": 2,
        "Notice/patch-status/ok": 1,
    }, first[0]
    made = kubectl.json("get", "configmap", "hello-text", "-n", ns)
    owner = kubectl.json("get", "notice", "hello", "-n", ns)
    assert made["data"] == {TEXT_KEY: "hi"}
    assert made["metadata"]["ownerReferences"][0]["uid"] == owner["metadata"]["uid"]
    conditions = {c["type"]: c["status"] for c in owner["status"]["conditions"]}
    assert conditions == {"Ready": "True", "Progressing": "False", "Degraded": "False"}
    assert owner["status"]["observedGeneration"] == owner["metadata"]["generation"]
    before = pods(kubectl, ns)
    assert sorted(before) == ["hello-0", "hello-1"]

    # A change of spec converges: the text is put right, the surplus pod goes.
    kubectl.apply(notice(ns, "bye", 1))
    changed = converge(cli, ns)
    assert changed[0]["actions"] == {
        "ConfigMap/patch/ok": 1,
        "Pod/delete/ok": 1,
        "Notice/patch-status/ok": 1,
    }, changed[0]
    assert kubectl.json("get", "configmap", "hello-text", "-n", ns)["data"] == {TEXT_KEY: "bye"}
    wait_for(lambda: sorted(pods(kubectl, ns)) == ["hello-0"], what="the surplus pod to go")
    assert pods(kubectl, ns)["hello-0"] == before["hello-0"]

    # check asks for what the kind declares: its CRD and its ConfigMaps.
    checked = cli("check", "-n", ns).stdout
    assert f"{RESOURCE.crd_name} of release {__version__}" in checked, checked
    account = f"bot-{uuid.uuid4().hex[:6]}"
    kubectl.run("create", "serviceaccount", account, "-n", ns)
    role = f"e2e-third-{uuid.uuid4().hex[:8]}"
    try:
        kubectl.run(
            "create",
            "clusterrolebinding",
            role,
            "--clusterrole=reconciler",
            f"--serviceaccount={ns}:{account}",
        )
        token = kubectl.run("create", "token", account, "-n", ns, "--duration=10m").stdout.strip()
        as_bot = Cli(kubeconfig_for(kubectl, tmp_path / "kubeconfig", {"token": token}))
        refused = as_bot("check", "-n", ns, expect=1).stdout
        (line,) = [x for x in refused.splitlines() if "✗ permissions" in x]
        for verb in ("create", "get", "list", "patch"):
            assert f" {verb} configmaps," in line, line
        assert "list notices.e2e.reconciler.dev" in line and "update notices/finalizers" in line

        # The role manifests prints for this registry grants the kind; bound
        # instead of the shipped one, a pass as that account converges.
        printed = [
            d for d in yaml.safe_load_all(cli("manifests", "rbac", "--user", "u").stdout) if d
        ]
        rules = printed[0]["rules"]
        assert {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "verbs": ["get", "list", "create", "patch"],
        } in rules
        assert {
            "apiGroups": [RESOURCE.group],
            "resources": ["notices/finalizers"],
            "verbs": ["update"],
        } in rules
        kubectl.apply(yaml.safe_dump({**printed[0], "metadata": {"name": role}}))
        kubectl.run("delete", "clusterrolebinding", role)
        kubectl.run(
            "create",
            "clusterrolebinding",
            role,
            f"--clusterrole={role}",
            f"--serviceaccount={ns}:{account}",
        )
        kubectl.run("delete", "pod", "hello-0", "-n", ns, "--wait=false")
        wait_for(
            lambda: as_bot("check", "-n", ns, expect=None).returncode == 0,
            what="the role to be granted",
        )
        again = converge(as_bot, ns)
        assert again[0]["actions"].get("Pod/create/ok") == 1, again[0]
    finally:
        kubectl.run("delete", "clusterrolebinding", role, check=False)
        kubectl.run("delete", "clusterrole", role, check=False)
