from __future__ import annotations

import gc

import pytest

from reconciler.engine.heap import collector_held


def test_held_inside_and_restored_after_even_on_error() -> None:
    assert gc.isenabled()
    with pytest.raises(RuntimeError), collector_held():
        assert not gc.isenabled()
        raise RuntimeError
    assert gc.isenabled()


def test_nested_holds_restore_the_outer_state() -> None:
    with collector_held():
        with collector_held():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer hold still holds
    assert gc.isenabled()
