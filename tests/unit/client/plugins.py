"""Exec plugins that misbehave, as real processes, for the tests of
issue 77, item 6: each run is logged, and a child of the plugin holds its
stdout and stderr open."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

V1 = "client.authentication.k8s.io/v1"

SCRIPT = """#!{python}
import json, os, sys, time
with open({runs!r}, "a") as log:
    log.write("%d\\n" % os.getpid())
child = os.fork()
if child == 0:  # holds the plugin's stdout and stderr open
    time.sleep(120)
    os._exit(0)
with open({children!r}, "a") as log:
    log.write("%d\\n" % child)
if {answers!r}:
    print(json.dumps({{"apiVersion": {version!r}, "kind": "ExecCredential",
                      "status": {{"token": "t"}}}}), flush=True)
    sys.exit(0)
time.sleep(120)
"""


@dataclass(frozen=True)
class Plugin:
    """A plugin script, and the files it logs its runs and children to."""

    script: Path
    runs_log: Path
    children_log: Path

    @classmethod
    def write(cls, folder: Path, answers: bool) -> Plugin:
        script = folder / ("answers" if answers else "hangs")
        runs, children = folder / "runs.log", folder / "children.log"
        script.write_text(
            SCRIPT.format(
                python=sys.executable,
                runs=str(runs),
                children=str(children),
                answers=answers,
                version=V1,
            )
        )
        script.chmod(0o755)
        return cls(script, runs, children)

    def pids(self) -> list[int]:
        """The plugin's runs and their children, every one seen so far."""
        found = []
        for log in (self.runs_log, self.children_log):
            if log.exists():
                found += [int(line) for line in log.read_text().split()]
        return found

    def runs(self) -> int:
        return len(self.runs_log.read_text().split()) if self.runs_log.exists() else 0

    def running(self, timeout: float = 20.0) -> None:
        """Wait until a run of the plugin has started its child."""
        end = time.monotonic() + timeout
        while not self.children_log.exists() or not self.children_log.read_text().strip():
            assert time.monotonic() < end, "the plugin did not start"
            time.sleep(0.05)

    def kubeconfig(self, server: str, path: Path) -> Path:
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "c", "cluster": {"server": server}}],
            "users": [
                {
                    "name": "u",
                    "user": {
                        "exec": {
                            "apiVersion": V1,
                            "command": str(self.script),
                            "interactiveMode": "Never",
                        }
                    },
                }
            ],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "x",
        }
        path.write_text(yaml.safe_dump(doc))
        return path

    def cleanup(self) -> None:
        """Whatever a failed test left running."""
        for pid in self.pids():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, not yet reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def all_gone(pids: list[int], seconds: float = 3.0) -> bool:
    end = time.monotonic() + seconds
    while any(alive(pid) for pid in pids):
        if time.monotonic() > end:
            return False
        time.sleep(0.02)
    return True
