"""Pod statuses a real kubelet writes and kwok never does: evicted, image pull
back-off, crash loop; plus the scheduler's real Unschedulable verdict and a
finalizer that holds a pod in Terminating. Tests use them to check what the
reconciler makes of pods that are not simply Running and Ready.

Statuses go through the `pods/status` subresource as a JSON merge patch, as
the kubelet's own status manager does: `conditions` and `containerStatuses`
are written whole, `podIP`, `hostIP` and `startTime` are kept, and
`observedGeneration` (pod and conditions) is set to the pod's generation as a
v1.34 kubelet does.

What kwok does with them (hack/cluster runs kwok v0.7.0 with its built-in
"fast" pod stages, pod-ready, pod-complete and pod-delete):

- pod-ready only matches a pod with no `status.podIP`, so once kwok has made
  a pod Running it never writes its status again: a patched status holds (each
  helper first waits for kwok to have taken a bound pod, else kwok's first
  write could land after ours and overwrite it). kwok deletes no Failed pod.
- pod-complete only matches pods owned by a Job.
- pod-delete matches any pod with a deletionTimestamp on a kwok node: it
  empties `metadata.finalizers` and deletes with grace 0. So a finalizer alone
  does not hold a kwok pod in Terminating. `hold_with_finalizer` therefore also
  marks the pod with the annotation `HOLD_ANNOTATION`, and a cluster-wide
  ValidatingAdmissionPolicy (`HOLD_POLICY`, created on first use, inert for
  pods without the annotation) refuses any update that drops the finalizer
  while the annotation stays. kwok's patch is refused (it does not retry:
  it logs `failed to apply stage`); `release` drops both in one patch, and
  kwok then finishes the deletion at once. Release held pods before deleting
  their namespace, or the namespace waits for them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from .conftest import Kubectl

Pod = dict[str, Any]

HOLD_ANNOTATION = "e2e.reconciler.local/hold"
HOLD_POLICY = "e2e-kubelet-hold-finalizer"
# No node carries this label: the real scheduler answers Unschedulable.
UNSCHEDULABLE_NODE_SELECTOR = {"e2e.reconciler.local/no-such-node": "true"}


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def get(kubectl: Kubectl, ns: str, pod: str) -> Pod:
    return kubectl.json("get", "pod", pod, "-n", ns)


def patch_status(kubectl: Kubectl, ns: str, pod: str, status: Mapping[str, Any]) -> Pod:
    """Merge-patch pods/status, as the kubelet's status manager does; returns the pod."""
    proc = kubectl.run(
        "patch", "pod", pod, "-n", ns, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": status}), "-o", "json",
    )  # fmt: skip
    return dict(json.loads(proc.stdout))


def taken(kubectl: Kubectl, ns: str, pod: str, timeout: float = 20) -> Pod:
    """The pod once its kubelet (kwok) has reported it: a pod bound to a node
    and without a podIP is about to get kwok's Running status, which would
    overwrite ours. An unbound pod is returned at once (kwok ignores it)."""
    deadline = time.monotonic() + timeout
    while True:
        obj = get(kubectl, ns, pod)
        if not obj["spec"].get("nodeName") or obj.get("status", {}).get("podIP"):
            return obj
        if time.monotonic() > deadline:
            raise AssertionError(f"kwok did not take pod {ns}/{pod} in {timeout}s")
        time.sleep(0.2)


def _condition(
    kind: str, status: bool, generation: int, reason: str = "", message: str = ""
) -> dict[str, Any]:
    cond: dict[str, Any] = {
        "type": kind,
        "status": "True" if status else "False",
        "lastProbeTime": None,
        "lastTransitionTime": now(),
        "observedGeneration": generation,
    }
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    return cond


def _conditions(
    obj: Pod, *, ready: bool, reason: str = "", message: str = ""
) -> list[dict[str, Any]]:
    gen = int(obj["metadata"].get("generation", 1))
    return [
        _condition("PodReadyToStartContainers", True, gen),
        _condition("Initialized", True, gen),
        _condition("Ready", ready, gen, reason, message),
        _condition("ContainersReady", ready, gen, reason, message),
        _condition("PodScheduled", True, gen),
    ]


def _container(obj: Pod, container: str | None) -> dict[str, Any]:
    containers = obj["spec"]["containers"]
    if container is None:
        return dict(containers[0])
    return dict(next(c for c in containers if c["name"] == container))


def _statuses(obj: Pod, name: str, state: dict[str, Any], **extra: Any) -> list[dict[str, Any]]:
    """containerStatuses: `state` (and extra) for container `name`, the
    others running and ready as kwok left them."""
    out = []
    for c in obj["spec"]["containers"]:
        st: dict[str, Any] = {
            "name": c["name"],
            "image": c["image"],
            "imageID": "",
            "ready": True,
            "started": True,
            "restartCount": 0,
            "state": {"running": {"startedAt": now()}},
        }
        if c["name"] == name:
            st.update({"ready": False, "started": False, "state": state, **extra})
        out.append(st)
    return out


def _not_ready(obj: Pod, name: str) -> list[dict[str, Any]]:
    """Conditions while container `name` is not ready, as the kubelet words them."""
    message = f"containers with unready status: [{name}]"
    return _conditions(obj, ready=False, reason="ContainersNotReady", message=message)


def ready(kubectl: Kubectl, ns: str, pod: str) -> Pod:
    """Running and Ready again, every container running: a pod that recovered
    (kwok will not do it: it never writes a pod with a podIP again)."""
    obj = taken(kubectl, ns, pod)
    gen = int(obj["metadata"].get("generation", 1))
    statuses = _statuses(obj, "", {})
    return patch_status(
        kubectl,
        ns,
        pod,
        {
            "phase": "Running",
            "observedGeneration": gen,
            "conditions": _conditions(obj, ready=True),
            "containerStatuses": statuses,
        },
    )


def evict(kubectl: Kubectl, ns: str, pod: str, container: str | None = None) -> Pod:
    """What the kubelet's eviction manager leaves under memory pressure:
    phase Failed, reason Evicted, a DisruptionTarget condition, Ready False,
    containers killed (137). Neither kwok nor this cluster (no pod GC
    controller) deletes the pod afterwards: it stays, as on a real node
    until the PodGC threshold."""
    obj = taken(kubectl, ns, pod)
    name = _container(obj, container)["name"]
    message = (
        "The node was low on resource: memory. Threshold quantity: 100Mi, available: 42Mi. "
        f"Container {name} was using 812Mi, request is 0, has larger consumption of memory. "
    )
    gen = int(obj["metadata"].get("generation", 1))
    conditions = [
        _condition("DisruptionTarget", True, gen, "TerminationByKubelet", message),
        *_conditions(obj, ready=False, reason="PodFailed"),
    ]
    killed = {"terminated": {"exitCode": 137, "reason": "Error", "finishedAt": now()}}
    statuses = [
        {**s, "ready": False, "started": False, "state": killed}
        for s in _statuses(obj, name, killed)
    ]
    return patch_status(
        kubectl,
        ns,
        pod,
        {
            "phase": "Failed",
            "reason": "Evicted",
            "message": message,
            "observedGeneration": gen,
            "conditions": conditions,
            "containerStatuses": statuses,
        },
    )


def image_pull_backoff(
    kubectl: Kubectl, ns: str, pod: str, image: str | None = None, container: str | None = None
) -> Pod:
    """Phase Pending, Ready False, the container waiting in ImagePullBackOff
    for `image` (default: its own image)."""
    obj = taken(kubectl, ns, pod)
    c = _container(obj, container)
    image = image or c["image"]
    message = f'Back-off pulling image "{image}"'
    return _pending(kubectl, ns, obj, c["name"], "ImagePullBackOff", message)


def config_error(kubectl: Kubectl, ns: str, pod: str, message: str) -> Pod:
    """What the kubelet writes of a container whose Secret or key is missing:
    Pending, the container waiting in CreateContainerConfigError."""
    obj = taken(kubectl, ns, pod)
    name = _container(obj, None)["name"]
    return _pending(kubectl, ns, obj, name, "CreateContainerConfigError", message)


def _pending(
    kubectl: Kubectl, ns: str, obj: dict[str, Any], container: str, reason: str, message: str
) -> Pod:
    """Pending and not Ready, ``container`` waiting for ``reason``: what the
    kubelet writes of a container it cannot start."""
    waiting = {"waiting": {"reason": reason, "message": message}}
    return patch_status(
        kubectl,
        ns,
        obj["metadata"]["name"],
        {
            "phase": "Pending",
            "observedGeneration": int(obj["metadata"].get("generation", 1)),
            "conditions": _not_ready(obj, container),
            "containerStatuses": _statuses(obj, container, waiting),
        },
    )


def crash_loop(
    kubectl: Kubectl, ns: str, pod: str, restarts: int = 3, container: str | None = None
) -> Pod:
    """Phase Running, Ready False, the container in CrashLoopBackOff after
    `restarts` restarts, its last run ended with exit code 1."""
    obj = taken(kubectl, ns, pod)
    name = _container(obj, container)["name"]
    back_off = min(10 * 2 ** max(restarts - 1, 0), 300)
    meta = obj["metadata"]
    message = (
        f"back-off {back_off}s restarting failed container={name} "
        f"pod={meta['name']}_{meta['namespace']}({meta['uid']})"
    )
    waiting = {"waiting": {"reason": "CrashLoopBackOff", "message": message}}
    last = {
        "terminated": {
            "exitCode": 1,
            "reason": "Error",
            "startedAt": now(),
            "finishedAt": now(),
            "containerID": f"containerd://{meta['uid'].replace('-', '')}",
        }
    }
    statuses = _statuses(obj, name, waiting, restartCount=restarts, lastState=last)
    return patch_status(
        kubectl,
        ns,
        pod,
        {
            "phase": "Running",
            "observedGeneration": int(meta.get("generation", 1)),
            "conditions": _not_ready(obj, name),
            "containerStatuses": statuses,
        },
    )


# ---------------------------------------------------------------- scheduling


def unschedulable_pod(ns: str, name: str, labels: Mapping[str, str] | None = None) -> str:
    """A pod manifest no node can take (a nodeSelector no node matches): the
    real kube-scheduler, not a patch, marks it Unschedulable, and kwok never
    sees it. For pods the reconciler creates, the webhook's
    `node_selector(UNSCHEDULABLE_NODE_SELECTOR)` mutation does the same."""
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": dict(labels or {})},
            "spec": {
                "nodeSelector": dict(UNSCHEDULABLE_NODE_SELECTOR),
                "containers": [{"name": "c", "image": "busybox"}],
            },
        }
    )


def unschedulable(kubectl: Kubectl, ns: str, pod: str, timeout: float = 30) -> dict[str, Any]:
    """Wait for the scheduler's verdict on a pod no node fits and return its
    PodScheduled condition (False, Unschedulable, `0/2 nodes are available:
    ...`)."""
    deadline = time.monotonic() + timeout
    while True:
        conds = get(kubectl, ns, pod).get("status", {}).get("conditions", [])
        for c in conds:
            if c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable":
                return dict(c)
        if time.monotonic() > deadline:
            raise AssertionError(f"pod {ns}/{pod} not Unschedulable in {timeout}s: {conds}")
        time.sleep(0.2)


# ---------------------------------------------------------------- finalizers

_HELD = (
    "variables.held == '' || !has(oldObject.metadata.finalizers) || "
    "!(variables.held in oldObject.metadata.finalizers) || "
    "(has(object.metadata.finalizers) && variables.held in object.metadata.finalizers) || "
    f"!has(object.metadata.annotations) || !('{HOLD_ANNOTATION}' in object.metadata.annotations)"
)


def hold_policy() -> list[dict[str, Any]]:
    """The ValidatingAdmissionPolicy and binding that keep kwok from stripping
    a held finalizer: a pod whose annotation HOLD_ANNOTATION names a finalizer
    it carries may not lose it unless the same update drops the annotation."""
    old = "oldObject.metadata"
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": HOLD_POLICY},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["UPDATE"],
                            "resources": ["pods"],
                        }
                    ]
                },
                "variables": [
                    {
                        "name": "held",
                        "expression": f"has({old}.annotations) && "
                        f"'{HOLD_ANNOTATION}' in {old}.annotations ? "
                        f"{old}.annotations['{HOLD_ANNOTATION}'] : ''",
                    }
                ],
                "validations": [
                    {
                        "expression": _HELD,
                        "messageExpression": "'finalizer ' + variables.held + "
                        f"' is held by the e2e suite (annotation {HOLD_ANNOTATION})'",
                        "reason": "Forbidden",
                    }
                ],
            },
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": HOLD_POLICY},
            "spec": {"policyName": HOLD_POLICY, "validationActions": ["Deny"]},
        },
    ]


def _drop_finalizer_dry_run(kubectl: Kubectl, ns: str, pod: str, finalizer: str) -> bool:
    """Whether the apiserver would let the finalizer go (a server-side dry run)."""
    obj = get(kubectl, ns, pod)
    rest = [f for f in obj["metadata"].get("finalizers", []) if f != finalizer]
    proc = kubectl.run(
        "patch", "pod", pod, "-n", ns, "--dry-run=server", "--type=merge",
        "-p", json.dumps({"metadata": {"finalizers": rest or None}}), check=False,
    )  # fmt: skip
    return proc.returncode == 0


def hold_with_finalizer(
    kubectl: Kubectl, ns: str, pod: str, finalizer: str = "example.com/hold", timeout: float = 20
) -> Pod:
    """Add `finalizer` so a deleted pod stays Terminating until `release`,
    guarded against kwok (see the module docstring). Returns once the policy
    is seen refusing the finalizer's removal."""
    kubectl.apply(yaml.safe_dump_all(hold_policy()))
    obj = get(kubectl, ns, pod)
    finalizers = obj["metadata"].get("finalizers") or []
    patch = {
        "metadata": {
            "finalizers": finalizers if finalizer in finalizers else [*finalizers, finalizer],
            "annotations": {HOLD_ANNOTATION: finalizer},
            "resourceVersion": obj["metadata"]["resourceVersion"],
        }
    }
    kubectl.run("patch", "pod", pod, "-n", ns, "--type=merge", "-p", json.dumps(patch))
    deadline = time.monotonic() + timeout
    while _drop_finalizer_dry_run(kubectl, ns, pod, finalizer):
        if time.monotonic() > deadline:
            raise AssertionError(f"policy {HOLD_POLICY} not enforced after {timeout}s")
        time.sleep(0.2)
    return get(kubectl, ns, pod)


def release(kubectl: Kubectl, ns: str, pod: str, finalizer: str = "example.com/hold") -> Pod | None:
    """Drop the finalizer and the hold annotation in one update; a deleted
    pod then goes (kwok deletes it with grace 0). None if the pod is gone."""
    proc = kubectl.run("get", "pod", pod, "-n", ns, "-o", "json", check=False)
    if proc.returncode != 0:
        return None
    obj = json.loads(proc.stdout)
    finalizers = [f for f in obj["metadata"].get("finalizers") or [] if f != finalizer]
    patch = {
        "metadata": {
            "finalizers": finalizers or None,
            "annotations": {HOLD_ANNOTATION: None},
            "resourceVersion": obj["metadata"]["resourceVersion"],
        }
    }
    proc = kubectl.run(
        "patch", "pod", pod, "-n", ns, "--type=merge", "-p", json.dumps(patch), "-o", "json",
        check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        if "NotFound" in proc.stderr:
            return None
        raise AssertionError(f"release of {ns}/{pod} failed: {proc.stderr}")
    return dict(json.loads(proc.stdout))
