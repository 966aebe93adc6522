"""What telling a hand edit from admission would cost on every pod of a pass,
by managedFields against the pod's generation.

    python -m bench.managed_fields [--pods 30000] [--repeat 5]

Builds one protobuf page of ``--pods`` pods as the apiserver sends our pods
(three managedFields entries: ours at create, the scheduler's binding, the
kubelet's status; their FieldsV1 as a 1.34 apiserver writes them) and times
three decoders over it, best of ``--repeat``:

- ``generation``: reconciler.client.protowire as shipped, which reads
  ``metadata.generation`` and skips managedFields unparsed;
- ``managers``: the same schema with managedFields declared (manager,
  operation, subresource, FieldsV1 bytes), as reading "who set the image"
  would need, the FieldsV1 left unparsed;
- ``image owner``: that, plus finding in each FieldsV1 whether it sets our
  container's image (a JSON decode per entry), which is the question itself.

Client CPU only: no cluster. The answer decides docs/architecture.md's choice.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from reconciler.client import protowire
from reconciler.client.pod_fields import Field
from reconciler.client.protowire import _SCHEMA, MAGIC, MESSAGES, pod_page_any

_F = descriptor_pb2.FieldDescriptorProto
CONTAINER = 'k:{"name":"redis"}'

# FieldsV1 of a pod we create, as the apiserver records them (the shape of a
# real entry; values are "{}" leaves).
OURS = {
    "f:metadata": {
        "f:annotations": {".": {}, "f:myapp.demo.kubebuilder.io/template-hash": {}},
        "f:labels": {
            ".": {},
            "f:app.kubernetes.io/instance": {},
            "f:app.kubernetes.io/managed-by": {},
            "f:app.kubernetes.io/name": {},
        },
        "f:ownerReferences": {".": {}, 'k:{"uid":"5b1c7c62-0d1e-4b43-9d55-1a3c9a1d2f00"}': {}},
    },
    "f:spec": {
        "f:containers": {
            CONTAINER: {
                ".": {},
                "f:args": {},
                "f:image": {},
                "f:imagePullPolicy": {},
                "f:name": {},
                "f:ports": {
                    ".": {},
                    'k:{"containerPort":6379,"protocol":"TCP"}': {
                        ".": {},
                        "f:containerPort": {},
                        "f:name": {},
                        "f:protocol": {},
                    },
                },
                "f:readinessProbe": {
                    ".": {},
                    "f:failureThreshold": {},
                    "f:periodSeconds": {},
                    "f:successThreshold": {},
                    "f:tcpSocket": {".": {}, "f:port": {}},
                    "f:timeoutSeconds": {},
                },
                "f:resources": {},
                "f:terminationMessagePath": {},
                "f:terminationMessagePolicy": {},
            }
        },
        "f:dnsPolicy": {},
        "f:enableServiceLinks": {},
        "f:restartPolicy": {},
        "f:schedulerName": {},
        "f:securityContext": {},
        "f:terminationGracePeriodSeconds": {},
    },
}
STATUS = {
    "f:status": {
        "f:conditions": {
            f'k:{{"type":"{t}"}}': {
                ".": {},
                "f:lastProbeTime": {},
                "f:lastTransitionTime": {},
                "f:status": {},
                "f:type": {},
            }
            for t in ("ContainersReady", "Initialized", "PodReadyToStartContainers", "Ready")
        },
        "f:containerStatuses": {},
        "f:hostIP": {},
        "f:hostIPs": {},
        "f:phase": {},
        "f:podIP": {},
        "f:podIPs": {".": {}, 'k:{"ip":"10.0.0.1"}': {".": {}, "f:ip": {}}},
        "f:startTime": {},
    }
}
ENTRIES = [
    ("reconciler", "Update", "", OURS),
    ("kube-scheduler", "Update", "status", {"f:status": {"f:conditions": {}}}),
    ("kwok", "Update", "status", STATUS),
]


def _managed_schema() -> dict[str, Any]:
    """protowire's messages, with ObjectMeta.managedFields declared: built as
    protowire builds its own, in a pool of their own."""
    proto = descriptor_pb2.FileDescriptorProto(
        name="bench/managed_fields.proto", package=protowire._PACKAGE, syntax="proto2"
    )
    schema = {name: list(fields) for name, fields in _SCHEMA.items()}
    schema["FieldsV1"] = [Field("raw", 1, _F.TYPE_BYTES)]
    schema["ManagedFieldsEntry"] = [
        Field("manager", 1, _F.TYPE_STRING),
        Field("operation", 2, _F.TYPE_STRING),
        Field("fields_v1", 7, "FieldsV1"),
        Field("subresource", 8, _F.TYPE_STRING),
    ]
    schema["ObjectMeta"].append(Field("managed_fields", 17, "ManagedFieldsEntry", many=True))
    for name, fields in schema.items():
        message = proto.message_type.add(name=name)
        for f in fields:
            protowire._field(message, f.name, f.number, f.kind, f.many)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return {
        name: message_factory.GetMessageClass(
            pool.FindMessageTypeByName(f"{protowire._PACKAGE}.{name}")
        )
        for name in schema
    }


MANAGED = _managed_schema()


def page(count: int) -> bytes:
    """``count`` Ready pods of ours, each with its three managedFields entries."""
    pods = MANAGED["PodList"]()
    for i in range(count):
        pod = pods.items.add()
        meta = pod.metadata
        meta.name, meta.namespace = f"r{i // 3}-{i % 3}", f"scale-{i % 20:02d}"
        meta.uid, meta.resource_version, meta.generation = f"uid-{i}", str(1000 + i), 1
        meta.labels.update({"app.kubernetes.io/managed-by": "reconciler"})
        meta.annotations.update({"myapp.demo.kubebuilder.io/template-hash": "1f105b0566"})
        for manager, operation, subresource, fields in ENTRIES:
            entry = meta.managed_fields.add(
                manager=manager, operation=operation, subresource=subresource
            )
            entry.fields_v1.raw = json.dumps(fields, separators=(",", ":")).encode()
        container = pod.spec.containers.add(name="redis", image="redis:5-alpine")
        container.args.extend(["--port", "6379"])
        container.ports.add(container_port=6379)
        pod.status.phase = "Running"
        pod.status.conditions.add(type="Ready", status="True")
        pod.status.container_statuses.add(name="redis").state.SetInParent()
    envelope = MESSAGES["Unknown"](raw=pods.SerializeToString())
    return MAGIC + envelope.SerializeToString()


def _managers(body: bytes) -> int:
    """Parse with managedFields declared, touching each entry's manager."""
    parsed = MANAGED["PodList"].FromString(protowire._unwrap(body))
    return sum(len(e.manager) for p in parsed.items for e in p.metadata.managed_fields)


def _image_owner(body: bytes) -> int:
    """Which manager last set our container's image, for every pod."""
    parsed = MANAGED["PodList"].FromString(protowire._unwrap(body))
    owners = 0
    for pod in parsed.items:
        for entry in pod.metadata.managed_fields:
            fields = json.loads(entry.fields_v1.raw)
            container = fields.get("f:spec", {}).get("f:containers", {}).get(CONTAINER, {})
            owners += "f:image" in container
    return owners


def best(run: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.process_time()
        run()
        times.append(time.process_time() - start)
    return min(times)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.managed_fields")
    p.add_argument("--pods", type=int, default=30000)
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args(argv)
    body = page(args.pods)
    assert len(pod_page_any(body).items) == args.pods
    base = best(lambda: pod_page_any(body), args.repeat)
    # What declaring managedFields adds: its parse and use, less the parse
    # of the same page by the shipped schema (which the shipped decode does).
    plain = best(lambda: MESSAGES["PodList"].FromString(protowire._unwrap(body)), args.repeat)
    rows = [
        ("generation (shipped)", base),
        ("managers", base + best(lambda: _managers(body), args.repeat) - plain),
        ("image owner", base + best(lambda: _image_owner(body), args.repeat) - plain),
    ]
    print(f"{args.pods} pods, {len(body) / 1e6:.1f} MB as protobuf; CPU s, best of {args.repeat}")
    print("| decoder | CPU s | / shipped |")
    print("|---|---|---|")
    for name, seconds in rows:
        print(f"| {name} | {seconds:.3f} | {seconds / base:.2f}x |")


if __name__ == "__main__":
    main()
