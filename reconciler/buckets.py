"""Buckets: how sharded replicas split the objects (`reconciler run --shard`).

An object's bucket is a pure function of its uid, so it never changes: only
buckets change hands. A pod belongs to its controller's bucket. Which live
member holds which bucket is also a pure function (`assign`), so every
replica that sees the same members computes the same answer; the bucket
Leases (reconciler/run/shard.py) make sure that two replicas that do not
never both hold one bucket.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol


def stable_hash(text: str) -> int:
    """CRC-32: the same in every process (Python's hash() is salted), and in
    C: a pass that keeps the objects of its buckets hashes every uid it
    lists (at 50,000 uids, 7 ms where a pure-Python FNV-1a took 153)."""
    return zlib.crc32(text.encode())


def bucket_of(uid: str, total: int) -> int:
    return stable_hash(uid) % total


@dataclass(frozen=True)
class Scope:
    """The buckets a replica holds now, out of ``total``. With ``select``,
    its LISTs ask only for what is labelled with these buckets or with no
    bucket at all (or one that is no bucket); without, they ask for
    everything and keep what is in scope, which also finds an object whose
    label was changed by hand to another replica's bucket."""

    total: int
    held: frozenset[int]
    select: bool = False

    def covers(self, uid: str) -> bool:
        return len(self.held) == self.total or bucket_of(uid, self.total) in self.held

    def claims(self, label: str | None) -> bool:
        """Does this bucket label name a held bucket?"""
        return label is not None and label.isdigit() and int(label) in self.held

    @property
    def others(self) -> str:
        """The buckets not held, as a label selector's set: `notin` them
        selects ours, and what carries no bucket label (not labelled yet)."""
        return ",".join(str(b) for b in range(self.total) if b not in self.held)


class Holder(Protocol):
    """What a pass asks of a sharded replica. It is the pass's write fence
    too (`client.interface.WriteFence`): one value, so the buckets a pass
    observes and the buckets it may write for are one replica's."""

    @property
    def name(self) -> str:
        """The replica's name, stable across its incarnations (status.shard)."""
        ...

    def scope(self) -> Scope:
        """The buckets held now: the pass observes only their objects."""
        ...

    def may_write(self, owner_uid: str | None = None) -> bool:
        """Asked before each write, for the object the write is for (its
        owner's uid), and by the client before each retry of a write (None)."""
        ...

    def report(self, mislabelled: frozenset[int]) -> None:
        """After a pass: the buckets of the objects and pods it saw under the
        label of a bucket it holds that are not its own (a label changed by
        hand). Their holders, told, list everything once to find them."""
        ...


def _capacities(total: int, members: list[str]) -> dict[str, int]:
    """⌊total/N⌋ each, and one more for the first ``total mod N`` members in
    the order of their hash: balanced, and the same answer everywhere."""
    base, extra = divmod(total, len(members))
    ranked = sorted(members, key=lambda m: (stable_hash(f"extra/{m}"), m))
    return {m: base + (1 if i < extra else 0) for i, m in enumerate(ranked)}


def assign(total: int, members: Iterable[str]) -> Mapping[int, str]:
    """The desired holder of each bucket: rendezvous hashing (each bucket
    prefers the members in the order of hash(bucket, member)) bounded by the
    capacities above, so that every member holds ⌊B/N⌋ or ⌈B/N⌉ buckets and
    a member that joins or leaves moves few buckets besides its own."""
    live = sorted(set(members))
    if not live:
        return {}
    room = _capacities(total, live)
    out: dict[int, str] = {}
    for bucket in range(total):
        prefs = sorted(live, key=lambda m: (stable_hash(f"{bucket}/{m}"), m), reverse=True)
        holder = next(m for m in prefs if room[m] > 0)
        room[holder] -= 1
        out[bucket] = holder
    return out
