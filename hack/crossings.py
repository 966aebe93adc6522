"""Which modules of the package the client object and the config are handed
to in one steady pass, in order, and how often each comes back to a module it
had left: a measure of how far one job is spread over the package.

The pass is a daemon's second (the first one's State kept), in dry-run mode,
over the unit tests' fake client holding three Redis objects whose status
never lands, so that they are planned again. Only calls that receive the
object itself as an argument count, or the pass's `PassSetup`, which carries
both: a module that reads it from an attribute (``self.kube``) is not
entered by it here.

    python -m hack.crossings
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from itertools import pairwise
from types import FrameType
from typing import Any

from reconciler.config import Config
from reconciler.engine.state import State
from reconciler.engine.sync import Mode, PassSetup, pass_once
from tests.unit.fakes import FakeKube

PACKAGE = "reconciler."


@dataclass(frozen=True)
class Route:
    modules: int  # distinct modules entered
    moves: int  # hand-overs from one module to another
    returns: int  # moves into a module it had already left
    path: tuple[str, ...]


def route_of(path: list[str]) -> Route:
    left: set[str] = set()
    returns = 0
    for here, there in pairwise(path):
        left.add(here)
        returns += there in left
    return Route(len(set(path)), max(len(path) - 1, 0), returns, tuple(path))


def _redis(i: int) -> dict[str, Any]:
    meta = {"name": f"r{i}", "namespace": "a", "uid": f"uid-r{i}", "resourceVersion": "1"}
    return {"metadata": {**meta, "generation": 1}, "spec": {"num": 0}, "status": {}}


def trace() -> dict[str, Route]:
    kube, config, state = FakeKube(), Config(), State()
    kube.held["Redis"] = [_redis(i) for i in range(3)]
    setup = PassSetup(kube=kube, config=config, mode=Mode.DRY_RUN)
    pass_once(setup, state)
    paths: dict[str, list[str]] = {"client": [], "config": []}
    followed = {"client": (kube, setup), "config": (config, setup)}

    def called(frame: FrameType, event: str, arg: object) -> None:
        module = frame.f_globals.get("__name__", "")
        if event != "call" or not module.startswith(PACKAGE):
            return
        code = frame.f_code
        names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        args = [frame.f_locals.get(name) for name in names]
        if names[:1] == ("self",) and args[0] is setup:
            return  # the setup reading its own fields hands nothing over
        for what, objs in followed.items():
            path = paths[what]
            if any(a is o for a in args for o in objs) and (not path or path[-1] != module):
                path.append(module)

    sys.setprofile(called)
    try:
        pass_once(setup, state)
    finally:
        sys.setprofile(None)
    return {what: route_of(path) for what, path in paths.items()}


def main() -> None:
    routes = trace()
    print(json.dumps({what: vars(route) for what, route in routes.items()}, indent=2))


if __name__ == "__main__":
    main()
