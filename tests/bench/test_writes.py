"""The bench's write limit asks the real planner and executor which requests a
first pass sends; this keeps that harness in step with their signatures
(bench/ is not type-checked, and `make bench` is not part of `make test`)."""

from __future__ import annotations

from typing import Any

from bench.writes import _kind, first_pass_requests


def _object(api_version: str, kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    meta = {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": "1"}
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": meta | {"generation": 1},
        "spec": spec,
    }


def test_a_first_pass_over_new_objects_is_recorded_per_object_in_executor_order():
    redis = [_object("myapp.demo.kubebuilder.io/v1", "Redis", "r", {"num": 3, "port": 6379})]
    xcas = [_object("apps.xca.k8s.kb.cx/v1beta1", "Xca", "x", {"foo": "bar"})]
    groups = [[_kind(r) for r in g] for g in first_pass_requests(redis, xcas)]
    assert groups == [
        ["PATCH redis", *["POST pods"] * 3, "PATCH redis/status", "POST events"],
        ["PATCH xcas/status", "POST events"],
    ]
