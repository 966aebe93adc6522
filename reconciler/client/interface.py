"""What the code above the client asks of it: the reads and writes of a pass.

The engine takes a `Client`, and is given `Kube` (mypy checks that it is
one) or, in the unit tests, their fake (tests/unit/fakes.py, checked against
this Protocol by `make lint`): a change of a signature breaks the fake at
once rather than a test at run time, as controller-runtime's client.Client
interface does for its fake client.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from reconciler.model import Incremental, Page, ResourceType

if TYPE_CHECKING:
    from reconciler.client.accounting import Stats

T = TypeVar("T")


class WriteFence(Protocol):
    """May this process still write? The one answer to "what keeps a replica
    that lost its Lease from writing": the pass asks it before each object's
    writes, and the client before each retry of a write (a wait of seconds
    after a 429 must not end in a write that is no longer ours)."""

    def may_write(self, owner_uid: str | None = None) -> bool:
        """For the object of uid ``owner_uid`` (its shard bucket is its uid's);
        None: any write at all (a retry, which knows no object)."""
        ...


class _Unfenced:
    """One process alone (`sync`, `run` without a Lease): always."""

    def may_write(self, owner_uid: str | None = None) -> bool:
        return True


UNFENCED: WriteFence = _Unfenced()


class Client(Protocol):
    @property
    def stats(self) -> Stats: ...

    def with_budget(self, qps: float, burst: int, max_retries: int) -> Client:
        """The same connection with a rate limit and retries of its own, and
        no fence: Lease requests never wait behind a pass's writes."""
        ...

    def fenced(self, fence: WriteFence, name: str = "") -> Client:
        """The same connection, its writes' retries asking ``fence``; ``name``
        (a replica's identity) added to the User-Agent the audit log shows."""
        ...

    def list(
        self,
        res: ResourceType,
        namespace: str | None = None,
        selector: str | None = None,
        decode: Callable[[bytes], Page[T]] | None = None,
        accept: str | None = None,
        page_size: int | None = None,
    ) -> builtins.list[T]:
        """Every object of ``res`` (in ``namespace``; None: all), in pages."""
        ...

    def list_streamed(
        self,
        res: ResourceType,
        namespace: str | None,
        start: Callable[[], Incremental[T]],
        accept: str,
        page_size: int | None = None,
        selector: str | None = None,
    ) -> builtins.list[T]:
        """As `list`, each page decoded as it arrives."""
        ...

    def get(self, res: ResourceType, namespace: str, name: str) -> dict[str, Any]: ...

    def create(
        self, res: ResourceType, namespace: str, body: Mapping[str, Any], *, dry_run: bool = False
    ) -> dict[str, Any]:
        """POST; ``dry_run``: the apiserver answers as it would, storing
        nothing (counted as a question, not a write)."""
        ...

    def review(self, res: ResourceType, body: Mapping[str, Any]) -> dict[str, Any]:
        """POST a question that stores nothing (a SelfSubjectAccessReview,
        a SelfSubjectReview); the answer is the review with its status."""
        ...

    def delete(
        self,
        res: ResourceType,
        namespace: str,
        name: str,
        uid: str | None = None,
        *,
        resource_version: str | None = None,
    ) -> None: ...

    def evict(self, namespace: str, name: str, uid: str) -> None: ...

    def replace(
        self, res: ResourceType, namespace: str, name: str, body: Mapping[str, Any]
    ) -> dict[str, Any]: ...

    def merge_patch(
        self,
        res: ResourceType,
        namespace: str,
        name: str,
        body: Mapping[str, Any],
        sub: str = "",
    ) -> dict[str, Any]: ...
