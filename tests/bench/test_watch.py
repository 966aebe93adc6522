"""The benches' end state: what every contender must have made before its
clock stops."""

from __future__ import annotations

from bench.watch import Board, Tracker, common_end_state, owned

CONTROLLED = {"metadata": {"ownerReferences": [{"kind": "Redis", "controller": True}]}}


def board_with(counts: dict[str, tuple[int, int]]) -> Board:
    """A board whose trackers hold (good, total) objects each."""
    board = Board()
    for name, (good, total) in counts.items():
        tracker = Tracker(api=None, path="", judge=owned, board=board)  # type: ignore[arg-type]
        for i in range(total):
            tracker._set(f"o{i}", i < good)
        board.trackers[name] = tracker
    return board


DONE = {"pods": (6, 6), "redis": (2, 2), "xcas": (2, 2)}


def test_the_end_state_needs_each_redis_s_service_and_budget_when_asked():
    check = common_end_state(2, children=True)
    assert check(board_with({**DONE, "services": (2, 2), "budgets": (2, 2)}))
    assert not check(board_with({**DONE, "services": (2, 2), "budgets": (1, 1)}))
    assert not check(board_with({**DONE, "services": (1, 2), "budgets": (2, 2)}))


def test_without_children_the_end_state_is_pods_objects_and_xcas():
    assert common_end_state(2)(board_with(DONE))
    assert not common_end_state(2)(board_with({**DONE, "pods": (5, 6)}))


def test_only_a_controlled_child_counts():
    assert owned(CONTROLLED)
    assert not owned({"metadata": {"ownerReferences": [{"kind": "Redis"}]}})
    assert not owned({})
