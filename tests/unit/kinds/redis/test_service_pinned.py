"""service.py's rules that a sampled mutation run found unpinned (issue 69,
point 6): a port change is said to follow the spec only when every stored
port is one we set, as we set it; anything else was changed by hand."""

from __future__ import annotations

import dataclasses

import pytest

from reconciler.actions import PatchChild
from tests.unit.builders import pod, redis, service_of
from tests.unit.kinds.redis.test_service import planned


def _repair(ports):
    r = redis(num=1)
    ours = service_of(r)
    edited = dataclasses.replace(ours, spec={**ours.spec, "ports": ports})
    (patch,) = [a for a in planned(r, [edited], [pod(r, 0)]) if isinstance(a, PatchChild)]
    return patch


def test_a_port_of_ours_at_an_old_number_follows_the_spec():
    patch = _repair([{"name": "redis", "port": 7000, "targetPort": "redis", "protocol": "TCP"}])
    assert patch.why == "ports follow spec.port and spec.exporter"
    assert patch.event.message == "Updated service r: ports follow spec.port and spec.exporter"


@pytest.mark.parametrize(
    "port",
    [
        {"name": "redis", "port": 6379, "targetPort": 6379, "protocol": "TCP"},  # by number
        {"name": "admin", "port": 6379, "targetPort": "admin", "protocol": "TCP"},  # renamed
    ],
)
def test_a_port_renamed_or_retargeted_by_hand_is_restored_as_drift(port):
    patch = _repair([port])
    assert patch.why == "drift: ports changed by hand"
    assert patch.event.message == "Restored service r: drift: ports changed by hand"
