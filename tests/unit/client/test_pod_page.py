"""The typed page decoder (client.json_wire.pod_page) makes exactly what pod_from_api
makes of the same JSON, for any pod, well-formed or not; a page the typed
structs refuse falls back to the generic path."""

from __future__ import annotations

import dataclasses
import functools
import json
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.client import json_wire
from reconciler.client.errors import NotAList
from reconciler.client.json_wire import page_of, pod_page, raw_page, version_page_json
from reconciler.client.pod_dict import pod_from_api
from reconciler.client.pod_fields import pod_of

text = st.text(max_size=8)
# Mostly what a conforming apiserver sends; sometimes a value of the wrong type.
wrong = st.one_of(st.integers(), st.booleans(), st.lists(st.integers(), max_size=2))
maybe_text = st.one_of(text, text, text, wrong)


def optional(fields: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """A dict with any subset of ``fields``; lists and maps may also be null."""
    return st.fixed_dictionaries({}, optional=fields)


labels = st.one_of(
    st.dictionaries(text, st.one_of(text, text, st.integers()), max_size=3), st.none()
)
owner = optional(
    {
        "apiVersion": maybe_text,
        "kind": maybe_text,
        "name": maybe_text,
        "uid": maybe_text,
        "controller": st.one_of(st.booleans(), st.booleans(), text),
        "blockOwnerDeletion": st.booleans(),
    }
)
meta = optional(
    {
        "name": maybe_text,
        "namespace": maybe_text,
        "uid": maybe_text,
        "resourceVersion": maybe_text,
        "labels": labels,
        "annotations": labels,
        "deletionTimestamp": st.one_of(text, st.none()),
        "deletionGracePeriodSeconds": st.one_of(st.integers(0, 60), st.none(), wrong),
        "generation": st.one_of(st.integers(0, 9), wrong),
        "finalizers": st.one_of(st.lists(maybe_text, max_size=2), st.none()),
        "ownerReferences": st.one_of(st.lists(owner, max_size=3), st.none()),
        "managedFields": st.lists(st.dictionaries(text, text, max_size=2), max_size=2),
    }
)
port = optional({"containerPort": st.one_of(st.integers(1, 65535), text), "name": text})
container = optional(
    {
        "name": maybe_text,
        "image": maybe_text,
        "args": st.one_of(st.lists(maybe_text, max_size=2), st.none()),
        "ports": st.one_of(st.lists(port, max_size=2), st.none()),
    }
)
condition = optional(
    {
        "type": st.one_of(st.sampled_from(["Ready", "PodScheduled", ""]), wrong),
        "status": st.one_of(st.sampled_from(["True", "False", "Unknown"]), st.none()),
        "reason": st.one_of(text, st.none()),
        "message": st.one_of(text, st.none()),
    }
)
detail = optional({"reason": st.one_of(text, st.none()), "message": maybe_text})
container_status = optional(
    {
        "name": maybe_text,
        "state": optional({"waiting": st.one_of(detail, st.none()), "terminated": detail}),
    }
)
pod = optional(
    {
        "metadata": meta,
        "spec": optional({"containers": st.lists(container, max_size=2), "nodeName": text}),
        "status": optional(
            {
                "phase": st.one_of(st.sampled_from(["Pending", "Running", ""]), st.none()),
                "conditions": st.one_of(st.lists(condition, max_size=3), st.none()),
                "reason": st.one_of(text, st.none()),
                "message": maybe_text,
                "containerStatuses": st.one_of(st.lists(container_status, max_size=2), st.none()),
                "podIP": text,
            }
        ),
    }
)


def body(items: list[dict[str, Any]], token: str | None = None) -> bytes:
    return json.dumps({"kind": "PodList", "metadata": {"continue": token}, "items": items}).encode()


@settings(max_examples=300)
@given(st.lists(pod, max_size=4), st.one_of(st.none(), text))
def test_the_typed_decoder_agrees_with_the_generic_one(items, token):
    page = pod_page(body(items, token))
    assert page.items == [pod_from_api(item) for item in items]
    assert page.continue_token == (token or "")
    assert page_of(pod_from_api)(body(items, token)) == page


def test_an_empty_list_a_null_one_and_a_missing_items_key():
    assert pod_page(b'{"kind":"PodList","metadata":{},"items":[]}').items == []
    assert pod_page(b'{"kind":"PodList","metadata":{},"items":null}').items == []
    owned_versions = functools.partial(version_page_json, owned=True)
    made_now = page_of(pod_from_api)  # raw_page's and pod_page's are made at import
    for decode in (pod_page, raw_page, made_now, version_page_json, owned_versions):
        with pytest.raises(NotAList, match=r"^kind 'PodList' with no items$"):  # the kind named
            decode(b'{"kind":"PodList","metadata":{}}')
        with pytest.raises(NotAList, match=r"^no kind and no items$"):
            decode(b'{"metadata":{}}')
    page = raw_page(b'{"kind":"XList","metadata":{"continue":"abc"},"items":[{"a":1}]}')
    assert (page.continue_token, page.kind) == ("abc", "XList")


@settings(max_examples=200)
@given(st.lists(pod, max_size=4), st.data())
def test_an_item_known_at_its_uid_and_version_is_reused_and_no_other(items, data):
    """Only (uid, resourceVersion) is read of a known item; any other item,
    including one whose metadata is malformed, is decoded in full."""
    fresh = page_of(pod_from_api)(body(items)).items
    known = {}
    for i, p in enumerate(fresh):
        if data.draw(st.booleans()):
            version = p.resource_version if data.draw(st.booleans()) else p.resource_version + "x"
            known[(p.uid, version)] = dataclasses.replace(p, phase=f"known-{i}")
    got = page_of(pod_from_api, known)(body(items)).items
    want = [
        f if identity(item) is None else known.get(identity(item), f)
        for item, f in zip(items, fresh, strict=True)
    ]
    assert got == want


def identity(item: dict[str, Any]) -> tuple[str, str] | None:
    """(uid, resourceVersion) as the page decoder reads them, or None if it
    cannot (a field it reads is not a string)."""
    meta = item.get("metadata")
    if not isinstance(meta, dict):
        return None
    fields = ("uid", "resourceVersion", "namespace", "name")
    if not all(isinstance(meta.get(f, ""), str) for f in fields):
        return None
    return (meta.get("uid", ""), meta.get("resourceVersion", ""))


def test_the_structs_made_from_the_schema_read_a_pod_as_the_generic_decoder_does():
    """json_wire makes its structs once, at import, from pod_fields.SCHEMA:
    made again, they read a pod to what pod_from_api makes of it."""
    raw = {
        "metadata": {
            "name": "r-0",
            "namespace": "default",
            "uid": "u-1",
            "resourceVersion": "7",
            "labels": {"app.kubernetes.io/instance": "r"},
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Redis", "name": "r", "uid": "o", "controller": True}
            ],
        },
        "spec": {
            "containers": [
                {"name": "redis", "image": "redis:7", "ports": [{"containerPort": 6379}]}
            ],
            "nodeName": "node-1",
        },
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }
    made = json_wire._structs()["Pod"]
    assert pod_of(msgspec.json.decode(json.dumps(raw), type=made)) == pod_from_api(raw)
