"""Each test computes the pods' hashes and templates itself.

They are cached (pods.py, placement.py) for the passes' sake; a cache filled
by an earlier test, or by the process a mutation run forks each mutant from,
would answer for the code under test, and a change to the code behind it
would go unseen."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from reconciler.kinds.redis import placement, pods

CACHED = (
    pods.template_hash,
    pods.pod_fields_hash,
    pods._pod_spec,
    placement._decoded,
    placement.fields_hash,
)


@pytest.fixture(autouse=True)
def _fresh_caches() -> Iterator[None]:
    for cached in CACHED:
        cached.cache_clear()
    yield
