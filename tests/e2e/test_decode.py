"""The fast page decoders read real LIST responses of the apiserver exactly
as the generic decoders do: pods in every state a pass meets, as JSON and as
protobuf, and our kinds."""

from __future__ import annotations

import json

import pytest

from reconciler.client.errors import ApiError
from reconciler.client.json_wire import page_of, pod_page
from reconciler.client.kube import Kube
from reconciler.client.pod_dict import pod_from_api
from reconciler.client.protowire import ACCEPT, MAGIC, META_ACCEPT, pod_page_any, version_page
from reconciler.client.streams import PodStream, VersionStream
from reconciler.config import Config
from reconciler.kinds.registry import KINDS
from reconciler.model import PODS, Version

from .conftest import Kubectl, Reconciler, gated_pod, wait_for
from .test_redis import redis_yaml

pytestmark = pytest.mark.e2e


def raw(kubectl: Kubectl, path: str) -> bytes:
    return kubectl.run("get", "--raw", path).stdout.encode()


def protobuf_pods(cluster, ns: str, limit: int) -> list:
    """The same LIST as protobuf, through the client's own paging."""
    kube = Kube(Config(kubeconfig=str(cluster.kubeconfig), page_size=limit))
    answered: list[bool] = []

    def decode(body: bytes):
        answered.append(body.startswith(MAGIC))
        return pod_page_any(body)

    pods = kube.list(PODS, ns, None, decode, ACCEPT)
    assert answered and all(answered)  # every page came as protobuf
    return pods


def json_pages(kubectl: Kubectl, ns: str, limit: int) -> tuple[list, list]:
    """The pods decoded by the fast decoder, and as plain JSON, page by page."""
    token, items, fast = "", [], []
    while True:
        path = f"/api/v1/namespaces/{ns}/pods?limit={limit}"
        body = raw(kubectl, path + (f"&continue={token}" if token else ""))
        page = pod_page(body)
        fast += page.items
        items += json.loads(body)["items"]
        token = page.continue_token
        if not token:
            return fast, items


def both_ways(kubectl: Kubectl, cluster, ns: str, limit: int) -> tuple[list, list, list]:
    """The same pods listed as JSON and as protobuf, at the same versions: the
    cluster's own controllers may change a pod between the two LISTs (pod
    garbage collection marks the gated pod Failed), and that is no decoding
    difference."""
    for _ in range(10):
        fast, items = json_pages(kubectl, ns, limit)
        proto = protobuf_pods(cluster, ns, limit)
        if [p.resource_version for p in proto] == [p.resource_version for p in fast]:
            return fast, items, proto
    raise AssertionError(f"the pods kept changing between two LISTs: {fast} / {proto}")


def test_real_list_pages_decode_the_same_both_ways(
    kubectl: Kubectl, reconciler: Reconciler, ns: str, cluster
) -> None:
    kubectl.apply(redis_yaml(ns, num=3))
    kubectl.run("apply", "-n", ns, "-k", "config/samples")
    reconciler.sync(ns)
    # A foreign pod, and one held Pending (no node takes it) being deleted behind a finalizer.
    kubectl.apply(gated_pod(ns, {"e2e": "gated"}, finalizers=["e2e.test/hold"]))
    kubectl.run("run", "foreign", "-n", ns, "--image=nginx", "--restart=Never")
    kubectl.run("delete", "pod", "gated", "-n", ns, "--wait=false")
    wait_for(
        lambda: kubectl.json("get", "pod", "gated", "-n", ns)["metadata"].get("deletionTimestamp"),
        what="a terminating pod",
    )
    try:
        for limit in (2, 500):  # several pages, and one
            fast, items, proto = both_ways(kubectl, cluster, ns, limit)
            assert fast == [pod_from_api(item) for item in items]
            assert proto == fast
        assert len(fast) == 5
        kube = Kube(Config(kubeconfig=str(cluster.kubeconfig)))
        for page_size in (0, 2):  # one page, and pages, read as they arrive
            starts: list[bytes] = []

            class Noted(PodStream):
                def feed(self, piece: bytes, starts: list[bytes] = starts) -> None:
                    starts.append(piece[:4])
                    super().feed(piece)

            streamed = kube.list_streamed(PODS, ns, lambda: Noted({}), ACCEPT, page_size)
            assert streamed == fast, page_size
            assert starts and starts[0] == MAGIC  # as protobuf
            chosen = kube.list_streamed(
                PODS, ns, lambda: PodStream({}), ACCEPT, page_size, "e2e=gated"
            )
            assert [p.name for p in chosen] == ["gated"], page_size
        assert {p.name for p in fast if p.terminating} == {"gated"}
        assert {p.name for p in fast if p.ready} >= {"redis-sample-0", "redis-sample-1"}

        for kind in KINDS:
            res = kind.resource
            body = raw(kubectl, f"/apis/{res.group}/{res.version}/namespaces/{ns}/{res.plural}")
            decoded = page_of(kind.decode)(body).items
            assert decoded == [kind.decode(item) for item in json.loads(body)["items"]]
            assert len(decoded) == 1
    finally:
        kubectl.run(
            "patch",
            "pod",
            "gated",
            "-n",
            ns,
            "--type=merge",
            "-p",
            '{"metadata":{"finalizers":null}}',
        )


def test_an_error_asked_as_protobuf_keeps_its_reason_and_message(cluster) -> None:
    """Errors come in the media type asked for; the message must survive."""
    kube = Kube(Config(kubeconfig=str(cluster.kubeconfig)))
    with pytest.raises(ApiError) as err:
        kube.send("GET", "/api/v1/namespaces/no-such-ns-e2e/pods/nope", headers={"Accept": ACCEPT})
    assert (err.value.status, err.value.reason) == (404, "NotFound")
    assert err.value.message == 'pods "nope" not found'


def test_a_list_of_metadata_names_each_object_at_its_version(
    kubectl: Kubectl, reconciler: Reconciler, ns: str, cluster
) -> None:
    """The metadata LIST that tells a pass what changed: asked as protobuf, for
    pods and for our CRDs, paged, it names what the full LIST holds."""
    kubectl.apply(redis_yaml(ns, num=3))
    kubectl.run("apply", "-n", ns, "-k", "config/samples")
    reconciler.sync(ns)
    kube = Kube(Config(kubeconfig=str(cluster.kubeconfig), page_size=2))
    for res in (PODS, *(kind.resource for kind in KINDS)):
        answered: list[bool] = []

        def decode(body: bytes, answered: list[bool] = answered):
            answered.append(body.startswith(MAGIC))
            return version_page(body)

        versions = kube.list(res, ns, None, decode, META_ACCEPT)
        assert answered and all(answered), res.kind  # protobuf, CRDs included
        full = kube.list(res, ns)
        assert versions == [
            Version(
                o["metadata"]["namespace"],
                o["metadata"]["name"],
                o["metadata"]["uid"],
                o["metadata"]["resourceVersion"],
            )
            for o in full
        ], res.kind
        assert versions, res.kind
        for page_size in (0, 2):  # one page, and pages, read as they arrive
            starts: list[bytes] = []

            def noting(starts: list[bytes] = starts) -> VersionStream:
                stream = VersionStream()
                feed = stream.feed

                def note(piece: bytes) -> None:
                    if not starts:
                        starts.append(piece[:4])
                    feed(piece)

                stream.feed = note  # type: ignore[method-assign]
                return stream

            streamed = kube.list_streamed(res, ns, noting, META_ACCEPT, page_size)
            assert starts == [MAGIC], res.kind  # as protobuf
            assert streamed == versions, (res.kind, page_size)
