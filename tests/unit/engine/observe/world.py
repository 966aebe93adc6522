"""What the observe tests share: objects as the apiserver serves them, a
FakeKube holding them, and a pass or two over it."""

from __future__ import annotations

from reconciler.buckets import Scope, bucket_of
from reconciler.config import Config
from reconciler.constants import LABEL_MANAGED_BY, MANAGED_BY, MANAGED_POD_SELECTOR
from reconciler.engine.observe import observe
from reconciler.engine.observe.lister import ListSettings
from reconciler.model import LABEL_BUCKET
from tests.unit.fakes import FakeKube

PAGE = Config().metadata_page_size


FULL = Config().page_size


def gets(kube: FakeKube) -> list[tuple[str, str]]:
    """The GETs of pods and of our objects, in order (the lookups of Services
    by name are tested on their own)."""
    return [c for c in kube.calls if c[0] == "GET" and "/" not in c[1]]


def ns_obj(name: str, phase: str = "Active") -> dict:
    return {"metadata": {"name": name}, "status": {"phase": phase}}


def redis_obj(name: str, version: str = "1", num: int = 0) -> dict:
    """num 0 by default: these tests are about the objects, and a desired pod
    that no LIST shows would be looked up by name."""
    meta = {"name": name, "namespace": "a", "uid": f"uid-{name}", "resourceVersion": version}
    return {"metadata": meta, "spec": {"num": num}, "status": {}}


def two_passes(kube: FakeKube, change, protobuf: bool = False) -> tuple:
    kube.held["Redis"] = [redis_obj(f"r{i}") for i in range(3)]
    first = observe(
        kube, (), None, ListSettings(protobuf=protobuf, page_size=FULL, metadata_page_size=PAGE)
    )
    kube.accepts.clear()
    kube.page_sizes.clear()
    kube.calls.clear()
    change(kube)
    second = observe(
        kube,
        (),
        None,
        ListSettings(protobuf=protobuf, page_size=FULL, metadata_page_size=PAGE),
        previous=first.snapshot,
    )
    return first.snapshot, second


def redis_lists(kube: FakeKube) -> list[str | None]:
    """The Accept of each LIST of Redis: None for a full LIST."""
    return [accept for kind, accept in kube.accepts if kind == "Redis"]


def pod_obj(name: str, *, labelled: bool, owner: str | None = None, ns: str = "a") -> dict:
    meta: dict = {"name": name, "namespace": ns, "uid": f"pod-{ns}-{name}", "resourceVersion": "1"}
    if labelled:
        meta["labels"] = {LABEL_MANAGED_BY: MANAGED_BY}
    if owner is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": "myapp.demo.kubebuilder.io/v1",
                "kind": "Redis",
                "name": owner.removeprefix("uid-"),
                "uid": owner,
                "controller": True,
            }
        ]
    return {"metadata": meta, "spec": {"containers": []}, "status": {}}


def cluster(*pods: dict, redis: tuple[dict, ...] = ()) -> FakeKube:
    """A cluster holding these pods and Redis."""
    kube = FakeKube()
    kube.held["Pod"] = pods
    kube.held["Redis"] = redis
    return kube


def one_pass(kube: FakeKube, previous=None, report: str | None = None):
    return observe(
        kube,
        (),
        report,
        ListSettings(protobuf=False, page_size=FULL, metadata_page_size=PAGE),
        previous=previous,
    )


def names(pods) -> list[str]:
    return sorted(p.name for p in pods)


def bucketed(obj: dict, bucket: int | None) -> dict:
    """The object with this bucket label (None: none)."""
    meta = dict(obj["metadata"])
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k != LABEL_BUCKET}
    if bucket is not None:
        labels[LABEL_BUCKET] = str(bucket)
    return {**obj, "metadata": {**meta, "labels": labels}}


def sharded_cluster() -> tuple[FakeKube, dict[str, int]]:
    """Eight Redis, each labelled with its true bucket of 4 but r7, not
    labelled yet, and r6, labelled by hand with a bucket not its own."""
    true = {f"r{i}": bucket_of(f"uid-r{i}", 4) for i in range(8)}
    redis = [bucketed(redis_obj(n), b) for n, b in true.items() if n not in ("r6", "r7")]
    redis += [bucketed(redis_obj("r6"), (true["r6"] + 1) % 4), redis_obj("r7")]
    pods = [
        bucketed(pod_obj(f"{n}-0", labelled=True, owner=f"uid-{n}"), b) for n, b in true.items()
    ]
    return cluster(*pods, redis=tuple(redis)), true


def sharded_pass(kube: FakeKube, scope: Scope):
    return observe(
        kube,
        (),
        MANAGED_POD_SELECTOR,
        ListSettings(protobuf=False, page_size=FULL, metadata_page_size=PAGE),
        scope=scope,
    )


def service_obj(name: str, *, labelled: bool, owner: str | None = None, ns: str = "a") -> dict:
    svc = pod_obj(name, labelled=labelled, owner=owner, ns=ns)
    svc["metadata"]["uid"] = f"svc-{ns}-{name}"
    return {"metadata": svc["metadata"], "spec": {"clusterIP": "None"}}


def services(kube: FakeKube, *objs: dict) -> None:
    kube.held["Service"] = objs


def service_gets(kube: FakeKube) -> list[str]:
    return sorted(c[1] for c in kube.calls if c[0] == "GET" and c[1].startswith("service/"))
