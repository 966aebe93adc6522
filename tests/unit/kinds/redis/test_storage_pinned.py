"""storage.py's rules that a sampled mutation run found unpinned (issue 69,
point 6): a size is valid from one byte up, as the CRD's "above zero" says."""

from __future__ import annotations

import pytest

from reconciler.kinds.redis.spec import validate_spec


@pytest.mark.parametrize("size", ["1", 1, "1k"])
def test_the_smallest_sizes_above_zero_are_taken(size):
    assert validate_spec({"num": 1, "storage": {"size": size}}, "redis:5-alpine").errors == ()
