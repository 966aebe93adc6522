"""server.py's rules that a sampled mutation run found unpinned (issue 69,
point 6): what a pod records of these fields, for its hash."""

from __future__ import annotations

import pytest

from reconciler.kinds.redis import server
from tests.unit.kinds.redis.test_server import AUTH, errors, spec_of


def test_a_server_with_none_of_these_fields_adds_nothing_to_a_pod_s_hash():
    """Empty, so that pods made before these fields existed are not rolled."""
    assert server.pod_fields(spec_of().server) == {}


def test_the_secret_and_the_restart_stamp_are_each_recorded():
    assert server.pod_fields(spec_of(auth=AUTH).server) == {"password": ["creds", "password"]}
    stamp = "2026-11-28T21:00:00Z"
    assert server.pod_fields(spec_of(restartedAt=stamp).server) == {server.RESTARTED_FIELD: stamp}


LONG = "x" * 254  # a name is at most 253 characters; cut short in the message
CUT = f"'{'x' * 79}... (256 characters)"


@pytest.mark.parametrize(("name", "got"), [("", "''"), (5, "5"), (LONG, CUT)])
def test_a_secret_s_name_that_is_no_name_is_quoted_in_the_error(name, got):
    found = errors(auth={"passwordSecret": {"name": name}})
    assert found == [f"spec.auth.passwordSecret.name: must be a Secret's name, got {got}"]
