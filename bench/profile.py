"""Profile one `reconciler sync` with pyinstrument, worker threads included.

``python -m pyinstrument -m reconciler sync`` samples only the main thread,
which during the apply phase just waits for the executor's pool. So this
driver runs the same CLI in-process under a main-thread profiler and swaps
the executor's ThreadPoolExecutor for a pool of the same size whose threads
each run their own profiler (pyinstrument samples per thread). Scheduling is
unchanged: N threads pull owners in order and results keep their order.

    python -m bench.profile OUT_PREFIX -- sync -n NS --kubeconfig K -o json
    python -m bench.profile OUT_PREFIX --steady -- sync ...

``--steady`` profiles the second of two passes that share one State, as the
daemon's passes do: the first, unprofiled, leaves what the next may reuse.

writes OUT_PREFIX.{main,workers}.txt (call trees; workers combined),
OUT_PREFIX.{main,workers}.flat.txt (self time by function) and the sessions
as OUT_PREFIX.*.pyisession for `pyinstrument --load`.
"""

from __future__ import annotations

import queue
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any

from pyinstrument import Profiler
from pyinstrument.renderers import ConsoleRenderer
from pyinstrument.session import Session

import reconciler.cli.commands
import reconciler.engine.apply
import reconciler.engine.runner
from reconciler.cli import cli

INTERVAL = 0.001
_sessions: list[Session] = []
_lock = threading.Lock()


class ProfiledPool:
    """The subset of ThreadPoolExecutor the executor uses, one profiler per thread."""

    def __init__(self, max_workers: int, thread_name_prefix: str = "") -> None:
        self.workers = max_workers
        self.prefix = thread_name_prefix

    def __enter__(self) -> ProfiledPool:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType
    ) -> None:
        return None

    def map(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> list[Any]:
        work: queue.Queue[tuple[int, Any]] = queue.Queue()
        for pair in enumerate(items):
            work.put(pair)
        results: dict[int, Any] = {}

        def worker() -> None:
            profiler = Profiler(interval=INTERVAL, async_mode="disabled")
            profiler.start()
            try:
                while True:
                    try:
                        index, item = work.get_nowait()
                    except queue.Empty:
                        return
                    results[index] = fn(item)
            finally:
                session = profiler.stop()
                with _lock:
                    _sessions.append(session)

        threads = [
            threading.Thread(target=worker, name=f"{self.prefix}_{i}") for i in range(self.workers)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return [results[i] for i in range(len(results))]


def _merge_threads(session: Session) -> Session:
    """One tree for all workers: they run the same code, and 8 copies of the
    same tree hide the shape of the whole."""
    merged = f"{len(_sessions)} apply workers\x00<thread>\x000"
    session.frame_records = [
        ([merged, *stack[1:]] if stack and "\x00<thread>\x00" in stack[0] else stack, t)
        for stack, t in session.frame_records
    ]
    return session


def _write(prefix: Path, name: str, session: Session) -> None:
    """The session, its call tree, and a flat list of where time was spent."""
    base = str(prefix) + f".{name}"
    session.save(base + ".pyisession")
    Path(base + ".txt").write_text(ConsoleRenderer(short_mode=False).render(session))
    flat = ConsoleRenderer(flat=True, flat_time="self", time="percent_of_total")
    Path(base + ".flat.txt").write_text(flat.render(session))


def _second_pass_only(profiler: Profiler) -> None:
    """Make `sync` run an unprofiled pass first, then the profiled one, on one State."""
    real = reconciler.engine.runner.pass_once

    def twice(*args: Any, **kwargs: Any) -> Any:
        real(*args, **kwargs)
        profiler.start()
        return real(*args, **kwargs)

    reconciler.engine.runner.pass_once = twice  # type: ignore[assignment]


def main(argv: list[str]) -> int:
    steady = len(argv) > 1 and argv[1] == "--steady"
    if steady:
        argv = [argv[0], *argv[2:]]
    if len(argv) < 2 or argv[1] != "--":
        print(__doc__, file=sys.stderr)
        return 2
    prefix, args = Path(argv[0]), argv[2:]
    reconciler.engine.apply.ThreadPoolExecutor = ProfiledPool  # type: ignore[attr-defined,misc]
    profiler = Profiler(interval=INTERVAL)
    if steady:
        _second_pass_only(profiler)
    else:
        profiler.start()
    code = 0
    try:
        cli.main(args=args, prog_name="reconciler", standalone_mode=True)
    except SystemExit as exc:
        code = int(exc.code or 0)
    finally:
        main_session = profiler.stop()
        _write(prefix, "main", main_session)
        if _sessions:
            combined = _sessions[0]
            for session in _sessions[1:]:
                combined = Session.combine(combined, session)
            _write(prefix, "workers", _merge_threads(combined))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
