import contextvars
import threading

import pytest

from reconciler.engine.bounded import WINDOW, completed

TAG: contextvars.ContextVar[str] = contextvars.ContextVar("TAG", default="")


def test_every_item_once_with_its_index() -> None:
    got = dict(completed(lambda x: x * 10, list(range(50)), 3, "t"))
    assert got == {i: i * 10 for i in range(50)}


def test_no_more_than_the_window_waits_in_the_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each submission copies the context once: counting the copies counts
    what the pool holds before the first item is done."""
    submitted = 0
    real_copy = contextvars.copy_context

    def counting_copy() -> contextvars.Context:
        nonlocal submitted
        submitted += 1
        return real_copy()

    monkeypatch.setattr(contextvars, "copy_context", counting_copy)
    release = threading.Event()
    workers = 3
    stream = completed(lambda x: release.wait(5) and x, list(range(40)), workers, "t")
    threading.Timer(0.2, release.set).start()
    next(stream)
    assert submitted == workers * WINDOW
    assert len(list(stream)) == 39
    assert submitted == 40


def test_a_failing_item_stops_no_other() -> None:
    ran: list[int] = []

    def work(x: int) -> int:
        if x == 2:
            raise ValueError("bad item")
        ran.append(x)
        return x

    with pytest.raises(ValueError, match="bad item"):
        list(completed(work, list(range(20)), 2, "t"))
    assert sorted(ran) == [i for i in range(20) if i != 2]


def test_each_item_runs_in_the_callers_context() -> None:
    TAG.set("prod")
    got = dict(completed(lambda _: TAG.get(), list(range(5)), 2, "t"))
    assert set(got.values()) == {"prod"}
