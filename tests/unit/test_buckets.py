"""Buckets: a fixed function of the uid, and a balanced, shared assignment."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from reconciler.buckets import Scope, assign, bucket_of, stable_hash

members = st.sets(st.text(alphabet="abcdefgh0123456789_-", min_size=1, max_size=12), max_size=9)


def test_the_hash_is_crc32_the_same_in_every_process():
    # The check value of CRC-32 (IEEE), and one fixed uid: a bucket never moves.
    assert stable_hash("123456789") == 0xCBF43926
    assert (
        bucket_of("9f1c1d4e-0000-4000-8000-000000000000", 32)
        == stable_hash("9f1c1d4e-0000-4000-8000-000000000000") % 32
    )


def test_a_scope_of_every_bucket_covers_everything():
    assert all(Scope(4, frozenset(range(4))).covers(f"uid-{i}") for i in range(50))


def test_a_scope_covers_the_objects_of_its_buckets():
    uids = [f"uid-{i}" for i in range(200)]
    scope = Scope(8, frozenset({1, 5}))
    assert {u for u in uids if scope.covers(u)} == {u for u in uids if bucket_of(u, 8) in (1, 5)}


@given(members, st.integers(min_value=1, max_value=64))
def test_every_bucket_has_one_live_holder_and_each_holds_floor_or_ceil(live, total):
    out = assign(total, live)
    if not live:
        assert out == {}
        return
    assert set(out) == set(range(total))
    assert set(out.values()) <= live
    counts = Counter(out.values())
    low, high = total // len(live), -(-total // len(live))
    assert all(low <= counts.get(m, 0) <= high for m in live)


@given(members, st.integers(min_value=1, max_value=64), st.randoms())
def test_every_replica_computes_the_same_answer(live, total, rnd):
    order = sorted(live)
    rnd.shuffle(order)
    assert assign(total, order) == assign(total, live)


def test_a_member_that_joins_takes_its_share_and_few_others_move():
    before = assign(32, ["a", "b", "c"])
    after = assign(32, ["a", "b", "c", "d"])
    moved = {b for b in range(32) if before[b] != after[b]}
    to_new = {b for b in moved if after[b] == "d"}
    assert len(to_new) == 8
    # The bound on the capacities moves a few buckets between the old members too.
    assert len(moved - to_new) <= 8
