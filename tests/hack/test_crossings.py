"""hack/crossings.py: the route of the client and the config through a pass."""

from __future__ import annotations

from hack.crossings import route_of, trace


def test_a_return_is_a_move_into_a_module_already_left():
    route = route_of(["a", "b", "a", "c", "b"])
    assert (route.modules, route.moves, route.returns) == (3, 4, 2)
    assert route_of([]) == route_of([]) and route_of([]).moves == 0


def test_one_pass_hands_the_client_to_observe_and_apply_and_the_config_to_the_planner():
    routes = trace()
    client, config = routes["client"].path, routes["config"].path
    assert client[0] == config[0] == "reconciler.engine.sync"
    assert "reconciler.engine.apply" in client and "reconciler.engine.plan" in config
    assert not any(m.startswith("reconciler.kinds") for m in client)
    # The kinds read their settings from their input, found once a pass.
    assert "reconciler.kinds.redis.settings" not in config
    assert routes["config"].returns <= 2
