"""pods.py's rules that a sampled mutation run found unpinned (issue 69,
point 6): pod_manifest is the manifest a pass's create sends (the benches
make their pods with it), its name and its own claims included."""

from __future__ import annotations

from reconciler.actions import CreatePod
from reconciler.kinds.redis.pods import pod_manifest
from reconciler.kinds.redis.spec import validate
from tests.unit.kinds.redis.test_claims import plan, with_storage


def test_pod_manifest_is_what_the_create_of_each_pod_sends():
    r = with_storage(num=2)
    spec = validate(r, "redis:5-alpine").spec
    creates = [a for a in plan(r) if isinstance(a, CreatePod)]
    assert [c.name for c in creates] == ["r-0", "r-1"]
    for i, create in enumerate(creates):
        made = pod_manifest(r, spec, i)
        assert made == create.manifest
        assert made["metadata"]["name"] == f"r-{i}"
        (volume,) = made["spec"]["volumes"]
        assert volume["persistentVolumeClaim"]["claimName"] == f"data-r-{i}"
