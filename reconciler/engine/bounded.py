"""A thread pool fed a few items at a time.

Submitting every object of a pass at once holds a Future, its lock and a copy
of the context for each until the pass ends: 1.9 kB an object, 3.7 MB of a
first pass over 2,000 objects, and a process serving several clusters holds
one such pass per cluster. Here at most WINDOW items per worker wait in the
pool, and a slow item never holds back the others.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

WINDOW = 2  # items submitted per worker: one running, one ready to start


def completed(
    fn: Callable[[T], R], items: Sequence[T], workers: int, name: str
) -> Iterator[tuple[int, R]]:
    """(index, fn(item)) as each finishes. Each call runs in a copy of the
    caller's context, so its log lines name the cluster (`cli.logs`). An
    exception of fn stops no other item: the first is raised once all ran."""
    limit = max(1, workers) * WINDOW
    pending: dict[Future[R], int] = {}
    failure: BaseException | None = None
    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix=name) as pool:
        following = iter(enumerate(items))
        while True:
            for i, item in following:
                pending[pool.submit(contextvars.copy_context().run, fn, item)] = i
                if len(pending) >= limit:
                    break
            if not pending:
                break
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                i = pending.pop(future)
                error = future.exception()
                if error is None:
                    yield i, future.result()
                else:
                    failure = failure or error
    if failure is not None:
        raise failure
