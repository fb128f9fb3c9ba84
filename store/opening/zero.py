"""Opening a store with zero persistence (``persistence-enabled = false``): the journals are
:class:`~store.journal.zero.ZeroJournal`, the page stores and large-message bodies live in
memory, and nothing is written anywhere."""

from __future__ import annotations

from collections.abc import Callable

from store.journal.zero import ZeroJournal
from store.large.memory import MemoryLargeMessages
from store.paging.api import DEFAULT_PAGE_SIZE
from store.paging.memory import MemoryPagingManager
from store.parts import StoreParts

__all__ = ["open_zero_store"]


def open_zero_store(*, page_size_of: Callable[[str], int] | None = None) -> StoreParts:
    """The parts of a store with ``persistence-enabled = false``: nothing is written (page
    stores live in memory, ``page_size_of(address)`` giving ``page-size-bytes``, default
    10 MiB). Raises nothing."""
    bindings, messages = ZeroJournal("bindings"), ZeroJournal("messages")
    paging = MemoryPagingManager(page_size_of or (lambda address: DEFAULT_PAGE_SIZE))
    large_messages = MemoryLargeMessages()

    def close() -> None:
        paging.close()
        large_messages.close()
        messages.close()
        bindings.close()

    return StoreParts(
        kind="none",
        bindings=bindings,
        messages=messages,
        large_messages=large_messages,
        paging=paging,
        close=close,
    )
