#!/usr/bin/env python3
"""The local cluster's volumes: what a CSI driver's external-provisioner,
external-resizer and kubelet do for claims, played by one polling loop.

Every ``--interval`` seconds it LISTs the StorageClasses, claims and volumes
of the whole cluster and:

- provisions: a Pending claim that the binder handed to us (its annotation
  ``volume.kubernetes.io/storage-provisioner`` names ``--name``, as does its
  class) gets a PersistentVolume of the size it asks for, pre-bound to it by
  ``claimRef``; kube-controller-manager's binder then binds the two;
- deletes: a Released volume of ours whose reclaim policy is Delete is
  deleted, with its directory;
- grows: a Bound claim that asks for more than its volume holds has the
  volume's capacity raised and is marked as external-resizer marks a claim
  whose file system the node must still grow (``FileSystemResizePending``,
  ``allocatedResources``); on a later loop the claim is finished as a kubelet
  finishes it (``status.capacity`` is the new size, the condition is gone).

Volumes are hostPath directories under ``--volumes-dir``: kwok's nodes mount
nothing, so nothing is ever written there. Each loop's errors (an apiserver
that is away, a refused write) are logged and the next loop tries again.

Standard library only, like cluster.py, which starts and stops it.
"""

from __future__ import annotations

import argparse
import http.client
import json
import re
import secrets
import shutil
import signal
import ssl
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

ANN_PROVISIONER = "volume.kubernetes.io/storage-provisioner"  # set by the binder
ANN_PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
FS_RESIZE_PENDING = "FileSystemResizePending"
FS_RESIZE_MESSAGE = (  # external-resizer's words
    "Waiting for user to (re-)start a pod to finish file system resize of volume on node."
)
RESIZE_CONDITIONS = ("Resizing", FS_RESIZE_PENDING)
COMPONENT = "hack-provisioner"
REQUEST_TIMEOUT = 10.0
# A loop that took long (thousands of claims on a loaded machine) starts the
# next only this many times its own length after it started: the provisioner
# takes at most a quarter of a core (what it asks of the apiserver, likewise).
LOAD_FACTOR = 4

JSON = dict[str, Any]


class ApiError(Exception):
    """The apiserver answered, but not with success."""

    def __init__(self, method: str, path: str, code: int, body: bytes) -> None:
        self.code = code
        super().__init__(f"{method} {path}: HTTP {code} {body[:300].decode(errors='replace')}")


class Api:
    """A minimal JSON client for one apiserver, as the cluster's admin."""

    def __init__(self, server: str, token: str, ca_file: Path) -> None:
        self.server, self.token = server.rstrip("/"), token
        self.context = ssl.create_default_context(cafile=str(ca_file))
        # Every endpoint is on loopback: no *_PROXY variable applies.
        self.opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=self.context)
        )

    def call(self, method: str, path: str, body: JSON | None = None) -> JSON:
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = (
                "application/merge-patch+json" if method == "PATCH" else "application/json"
            )
        req = urllib.request.Request(self.server + path, data, headers, method=method)
        try:
            with self.opener.open(req, timeout=REQUEST_TIMEOUT) as resp:
                return json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as err:
            raise ApiError(method, path, err.code, err.read()) from None

    def items(self, path: str) -> list[JSON]:
        return list(self.call("GET", path).get("items") or [])


# ---------------------------------------------------------------- quantities

_QUANTITY = re.compile(r"^([+-]?[0-9.]+)(([KMGTPE]i)|[numkMGTPE]|[eE][+-]?[0-9]+)?$")
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": 1}
_DECIMAL |= {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}


def quantity(text: str) -> Fraction:
    """A Kubernetes resource quantity ("1Gi", "500M", "1e3", "0.5Ti") as a number."""
    m = _QUANTITY.match(text.strip())
    if m is None:
        raise ValueError(f"not a quantity: {text!r}")
    number, suffix = Fraction(m[1]), m[2] or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * _DECIMAL[suffix]
    return number * Fraction(10) ** int(suffix[1:])


# ---------------------------------------------------------------- one loop


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def log(message: str) -> None:
    print(f"{datetime.now(UTC).isoformat(timespec='milliseconds')} {message}", flush=True)


def storage(obj: JSON, *path: str) -> str | None:
    """The ``storage`` entry of the resource list at ``path`` in obj, if any."""
    node: Any = obj
    for key in path:
        node = (node or {}).get(key)
    return (node or {}).get("storage")


class Provisioner:
    def __init__(self, api: Api, name: str, volumes_dir: Path) -> None:
        self.api, self.name, self.volumes_dir = api, name, volumes_dir

    def loop(self) -> None:
        """One look at the whole cluster; each object's failure is logged alone."""
        classes = {c["metadata"]["name"]: c for c in self.api.items(STORAGE_CLASSES)}
        claims = self.api.items("/api/v1/persistentvolumeclaims")
        volumes = {v["metadata"]["name"]: v for v in self.api.items("/api/v1/persistentvolumes")}
        for claim in claims:
            self._each(self.provision_or_grow, claim, classes, volumes)
        for volume in volumes.values():
            self._each(self.delete_released, volume)

    def _each(self, step: Any, obj: JSON, *args: Any) -> None:
        try:
            step(obj, *args)
        except (ApiError, OSError, http.client.HTTPException, ValueError) as err:
            meta = obj["metadata"]
            log(f"{meta.get('namespace', '')}/{meta['name']}: {err}")

    def ours(self, volume: JSON | None) -> bool:
        annotations = ((volume or {}).get("metadata") or {}).get("annotations") or {}
        return annotations.get(ANN_PROVISIONED_BY) == self.name

    def provision_or_grow(self, claim: JSON, classes: dict[str, JSON], volumes: dict) -> None:
        if claim["metadata"].get("deletionTimestamp"):
            return
        phase = (claim.get("status") or {}).get("phase")
        if phase == "Pending" and not claim["spec"].get("volumeName"):
            self.provision(claim, classes)
        elif phase == "Bound":
            volume = volumes.get(claim["spec"].get("volumeName", ""))
            if self.ours(volume):
                self.grow(claim, volume)

    # -------------------------------------------------------- provisioning

    def provision(self, claim: JSON, classes: dict[str, JSON]) -> None:
        meta, spec = claim["metadata"], claim["spec"]
        class_name = spec.get("storageClassName") or ""
        sc = classes.get(class_name)
        handed_to_us = (meta.get("annotations") or {}).get(ANN_PROVISIONER) == self.name
        if sc is None or sc.get("provisioner") != self.name or not handed_to_us:
            return
        size = storage(spec, "resources", "requests")
        if size is None:
            return
        name = f"pvc-{meta['uid']}"  # as external-provisioner names them: one per claim
        path = self.volumes_dir / name
        volume = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": name, "annotations": {ANN_PROVISIONED_BY: self.name}},
            "spec": {
                "capacity": {"storage": size},
                "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
                "volumeMode": spec.get("volumeMode") or "Filesystem",
                "storageClassName": class_name,
                "persistentVolumeReclaimPolicy": sc.get("reclaimPolicy") or "Delete",
                "mountOptions": sc.get("mountOptions") or None,
                "hostPath": {"path": str(path), "type": "DirectoryOrCreate"},
                "claimRef": {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "namespace": meta["namespace"],
                    "name": meta["name"],
                    "uid": meta["uid"],
                },
            },
        }
        path.mkdir(parents=True, exist_ok=True)
        try:
            self.api.call("POST", "/api/v1/persistentvolumes", volume)
        except ApiError as err:
            if err.code != 409:  # made by an earlier loop, not yet bound
                raise
            return
        log(f"{meta['namespace']}/{meta['name']}: provisioned {name} ({size})")
        self.event(claim, "ProvisioningSucceeded", f"Successfully provisioned volume {name}")

    # -------------------------------------------------------- deleting

    def delete_released(self, volume: JSON) -> None:
        """What external-provisioner does for a Released volume of its own
        whose policy is Delete: the binder leaves those to it."""
        status, spec = volume.get("status") or {}, volume["spec"]
        if (
            not self.ours(volume)
            or status.get("phase") != "Released"
            or spec.get("persistentVolumeReclaimPolicy") != "Delete"
            or volume["metadata"].get("deletionTimestamp")
        ):
            return
        name = volume["metadata"]["name"]
        path = Path((spec.get("hostPath") or {}).get("path", ""))
        if path.parent == self.volumes_dir:  # never anything outside our own directory
            shutil.rmtree(path, ignore_errors=True)
        try:
            self.api.call("DELETE", f"/api/v1/persistentvolumes/{name}")
        except ApiError as err:
            if err.code != 404:
                raise
            return
        ref = spec.get("claimRef") or {}
        log(f"deleted {name}, released by {ref.get('namespace')}/{ref.get('name')}")

    # -------------------------------------------------------- growing

    def grow(self, claim: JSON, volume: JSON) -> None:
        wanted = storage(claim["spec"], "resources", "requests")
        has = storage(volume["spec"], "capacity")
        if wanted is None or has is None:
            return
        status = claim.get("status") or {}
        conditions = status.get("conditions") or []
        pending = any(c.get("type") == FS_RESIZE_PENDING for c in conditions)
        if quantity(wanted) > quantity(has):
            self.expand_volume(claim, volume, wanted)
        elif pending and quantity(has) >= quantity(storage(status, "allocatedResources") or "0"):
            self.finish_on_node(claim, volume, has)

    def expand_volume(self, claim: JSON, volume: JSON, size: str) -> None:
        """external-resizer's part: the volume grows (here, a number in its
        spec), and the claim waits for the node to grow the file system."""
        meta, name = claim["metadata"], volume["metadata"]["name"]
        self.event(claim, "Resizing", f"External resizer is resizing volume {name}")
        self.api.call(
            "PATCH", f"/api/v1/persistentvolumes/{name}", {"spec": {"capacity": {"storage": size}}}
        )
        conditions = [
            c
            for c in (claim.get("status") or {}).get("conditions") or []
            if c.get("type") not in RESIZE_CONDITIONS
        ]
        conditions.append(
            {
                "type": FS_RESIZE_PENDING,
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": now(),
                "message": FS_RESIZE_MESSAGE,
            }
        )
        status = {
            "allocatedResources": {"storage": size},
            "allocatedResourceStatuses": {"storage": "NodeResizePending"},
            "conditions": conditions,
        }
        self.api.call("PATCH", claim_status(meta), {"status": status})
        log(
            f"{meta['namespace']}/{meta['name']}: grew {name} to {size}; file system resize pending"
        )
        self.event(
            claim, "FileSystemResizeRequired", "Require file system resize of volume on node"
        )

    def finish_on_node(self, claim: JSON, volume: JSON, size: str) -> None:
        """The kubelet's part, done at once: kwok's nodes have no file system to grow."""
        meta, name = claim["metadata"], volume["metadata"]["name"]
        conditions = [
            c
            for c in (claim.get("status") or {}).get("conditions") or []
            if c.get("type") not in RESIZE_CONDITIONS
        ]
        status = {
            "capacity": {"storage": size},
            "allocatedResourceStatuses": None,
            "conditions": conditions,
        }
        self.api.call("PATCH", claim_status(meta), {"status": status})
        log(f"{meta['namespace']}/{meta['name']}: file system of {name} grown to {size}")
        self.event(
            claim,
            "FileSystemResizeSuccessful",
            f"MountVolume.NodeExpandVolume succeeded for volume {name!r}",
        )

    # -------------------------------------------------------- events

    def event(self, claim: JSON, reason: str, message: str) -> None:
        """An Event on the claim, as the components played here record them
        (best effort: a lost event is logged, the work is done)."""
        meta, stamp = claim["metadata"], now()
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{meta['name']}.{secrets.token_hex(8)}",
                "namespace": meta["namespace"],
            },
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": meta["namespace"],
                "name": meta["name"],
                "uid": meta["uid"],
                "resourceVersion": meta.get("resourceVersion"),
            },
            "reason": reason,
            "message": message,
            "type": "Normal",
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        try:
            self.api.call("POST", f"/api/v1/namespaces/{meta['namespace']}/events", event)
        except (ApiError, OSError, http.client.HTTPException) as err:
            log(f"event {reason} on {meta['namespace']}/{meta['name']} lost: {err}")


STORAGE_CLASSES = "/apis/storage.k8s.io/v1/storageclasses"


def claim_status(meta: JSON) -> str:
    ns, name = urllib.parse.quote(meta["namespace"]), urllib.parse.quote(meta["name"])
    return f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{name}/status"


# ---------------------------------------------------------------- main


def run(provisioner: Provisioner, interval: float, ready_file: Path | None) -> None:
    """Loop until killed; the first loop that works writes ready_file."""
    failing = False
    while True:
        started = time.monotonic()
        try:
            provisioner.loop()
        except (ApiError, OSError, http.client.HTTPException, ValueError, KeyError) as err:
            if not failing:  # once per outage, not twice a second
                log(f"loop failed, trying again: {err}")
            failing = True
        else:
            if failing:
                log("loop works again")
            failing = False
            if ready_file is not None and not ready_file.exists():
                ready_file.write_text(f"{now()}\n")
                log("first loop done")
        took = time.monotonic() - started
        time.sleep(max(interval - took, (LOAD_FACTOR - 1) * took, 0.0))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", required=True, help="the apiserver's URL")
    parser.add_argument("--ca-file", type=Path, required=True, help="the apiserver's CA")
    parser.add_argument(
        "--token-file",
        type=Path,
        required=True,
        help="the admin token: the first field of this file (the apiserver's --token-auth-file)",
    )
    parser.add_argument("--name", required=True, help="the provisioner name classes give")
    parser.add_argument("--volumes-dir", type=Path, required=True, help="where volumes live")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between loops")
    parser.add_argument("--ready-file", type=Path, help="written after the first loop that works")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    token = args.token_file.read_text().split(",", 1)[0].strip()
    args.volumes_dir.mkdir(parents=True, exist_ok=True)
    api = Api(args.server, token, args.ca_file)
    log(f"provisioner {args.name} for {args.server}, volumes in {args.volumes_dir}")
    run(Provisioner(api, args.name, args.volumes_dir.resolve()), args.interval, args.ready_file)
    return 0


if __name__ == "__main__":
    sys.exit(main())
