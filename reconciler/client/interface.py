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


class Client(Protocol):
    @property
    def stats(self) -> Stats: ...

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
        self, res: ResourceType, namespace: str, body: Mapping[str, Any]
    ) -> dict[str, Any]: ...

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
