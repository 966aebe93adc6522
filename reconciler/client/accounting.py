"""What the client's threads share: the rate limiter, the request counts a
pass reads for its summary and the metrics for their totals, and the
apiserver's Warning headers, each logged once.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)


class RateLimiter:
    """Token bucket shared by all threads: ``qps`` sustained, ``burst`` at once."""

    def __init__(self, qps: float, burst: int, clock: Any = time.monotonic) -> None:
        self.qps = qps
        self.capacity = float(max(burst, 1))
        self.tokens = self.capacity
        self.clock = clock
        self.stamp = clock()
        self.lock = threading.Lock()

    def reserve(self) -> float:
        """Take a token; return how long the caller must wait for it."""
        with self.lock:
            now = self.clock()
            self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.qps)
            self.stamp = now
            self.tokens -= 1.0
            return 0.0 if self.tokens >= 0 else -self.tokens / self.qps

    def acquire(self) -> None:
        wait = self.reserve()
        if wait > 0:
            time.sleep(wait)


# The verbs a POST that stores nothing is counted under: a question, not a write.
DRY_RUN, REVIEW = "DRYRUN", "REVIEW"
NOT_WRITES = frozenset({"GET", "LIST", DRY_RUN, REVIEW})


@dataclass(frozen=True)
class Usage:
    """Requests by (verb, code) and bytes received over some span of time."""

    requests: Counter[tuple[str, str]]
    bytes_received: int

    def __sub__(self, earlier: Usage) -> Usage:
        return Usage(self.requests - earlier.requests, self.bytes_received - earlier.bytes_received)

    @property
    def total(self) -> int:
        return sum(self.requests.values())

    @property
    def writes(self) -> int:
        return sum(n for (verb, _), n in self.requests.items() if verb not in NOT_WRITES)

    def by_code(self) -> dict[str, int]:
        return {f"{verb} {code}": n for (verb, code), n in sorted(self.requests.items())}


# One warning of a Warning header: code, agent, "text" (RFC 7234, 5.5).
_WARNING = re.compile(r'\d{3} \S+ "((?:[^"\\]|\\.)*)"')


class Warnings:
    """The apiserver's Warning headers (deprecated APIs, unknown or pruned
    fields), each logged once per process: they repeat on every request."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self.lock = threading.Lock()

    def say(self, header: str) -> None:
        for text in _WARNING.findall(header) or [header]:
            text = text.replace('\\"', '"')
            with self.lock:
                if text in self.seen:
                    continue
                self.seen.add(text)
            log.warning("the apiserver warns: %s", text)


class Stats:
    """Running request counts, shared by the client's threads; a pass takes the
    difference of two snapshots for its summary, and the metrics read the totals."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: Counter[tuple[str, str]] = Counter()
        self.bytes_received = 0

    def record(self, verb: str, code: str, size: int) -> None:
        with self.lock:
            self.requests[(verb, code)] += 1
            self.bytes_received += size

    def snapshot(self) -> Usage:
        with self.lock:
            return Usage(Counter(self.requests), self.bytes_received)
