"""Run a child process and get *its own* resource usage.

``getrusage(RUSAGE_CHILDREN)`` reports the maximum RSS over all children ever
reaped, so it cannot tell one pass from another. ``os.wait4`` returns the
rusage of exactly the child it reaps: its own peak RSS and CPU time.
Output goes to files, not pipes, so a chatty child can never block on a full
pipe while we wait for it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ProcResult:
    returncode: int
    wall: float  # seconds, spawn to exit
    cpu: float  # user + sys seconds of the child alone
    max_rss_mb: float  # the child's peak resident set
    stdout: str
    stderr_tail: str


def _status_code(status: int) -> int:
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


class Child:
    """A started child whose rusage we collect with wait4 when it ends."""

    def __init__(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        log_path: Path | None = None,
        cwd: Path | None = None,
    ) -> None:
        # Both files live as long as the child and are closed in wait().
        self._out = tempfile.TemporaryFile()  # noqa: SIM115
        self._err = open(log_path, "w+b") if log_path else tempfile.TemporaryFile()  # noqa: SIM115
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=self._out,
            stderr=self._err,
            env=dict(env),
            cwd=cwd,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def exited(self) -> bool:
        """True once the child has ended; it stays unreaped for wait()."""
        if self.proc.returncode is not None:
            return True
        return os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None

    def stop(self, grace: float = 20.0) -> None:
        """SIGTERM (a graceful operator shutdown), then SIGKILL after ``grace``."""
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if self.exited():
                return
            time.sleep(0.1)
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()

    def wait(self) -> ProcResult:
        _, status, usage = os.wait4(self.pid, 0)
        wall = time.monotonic() - self.started
        self.proc.returncode = _status_code(status)  # tell Popen it is reaped
        self._out.seek(0)
        self._err.seek(0, os.SEEK_END)
        size = self._err.tell()
        self._err.seek(max(0, size - 4000))
        result = ProcResult(
            returncode=self.proc.returncode,
            wall=wall,
            cpu=usage.ru_utime + usage.ru_stime,
            max_rss_mb=usage.ru_maxrss / 1024.0,  # Linux reports KiB
            stdout=self._out.read().decode(errors="replace"),
            stderr_tail=self._err.read().decode(errors="replace"),
        )
        self._out.close()
        self._err.close()
        return result


def run(
    argv: Sequence[str],
    env: Mapping[str, str],
    log_path: Path | None = None,
    cwd: Path | None = None,
) -> ProcResult:
    """Run to completion and return wall time, CPU and peak RSS of that child only."""
    return Child(argv, env, log_path, cwd).wait()
