"""Page stores in memory, for zero persistence (``persistence-enabled = false``).

Nothing is written anywhere and nothing survives the process; every other rule of
:mod:`store.paging.api` holds (page numbering, the roll rule, positions), so code runs against
it as it will against a real store. :class:`PageRoller` is the roll rule every back-end uses.

Thread-safety: every method may be called from any thread (one lock per manager).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from store.errors import JournalClosedError, UnknownRecordError
from store.paging.api import PagePosition, PageStore, PagingManager, make_position
from store.paging.format import FRAMING

__all__ = ["MemoryPagingManager", "PageRoller", "check_address"]


def check_address(address: str) -> str:
    """Returns ``address`` when it is a non-empty str. Raises ValueError otherwise."""
    if not isinstance(address, str) or not address:
        raise ValueError(f"an address must be a non-empty string, not {address!r}")
    return address


class PageRoller:
    """The roll rule (docs/paging.md#roll): where the next record of an address goes.

    Keeps the current page, how many records it holds and their encoded bytes. Not
    thread-safe: the page store calls it under its own lock.
    """

    def __init__(self, page_size: int, page: int = 1, records: int = 0, size: int = 0) -> None:
        self.page_size = page_size
        self.page = page
        self.records = records
        self.size = size

    def place(self, payload_size: int) -> PagePosition:
        """Account one record of ``payload_size`` bytes; returns its position. Raises nothing."""
        needed = payload_size + FRAMING  # encoded_size(payload_size), on every paged send
        if self.records > 0 and self.size + needed > self.page_size:
            self.page += 1
            self.records = 0
            self.size = 0
        position = make_position((self.page, self.records))
        self.records += 1
        self.size += needed
        return position


class _MemoryPageStore(PageStore):
    def __init__(self, owner: MemoryPagingManager, address: str, page_size: int) -> None:
        self.address = address
        self._owner = owner
        self._roller = PageRoller(page_size)
        self._pages: dict[int, list[bytes]] = {}
        self.removed = False

    def _check(self) -> None:
        self._owner.check_open()
        if self.removed:
            raise JournalClosedError(f"the page store of address {self.address!r} was removed")

    def append(self, record: bytes | bytearray | memoryview, *, sync: bool = False) -> PagePosition:
        data = bytes(record)
        with self._owner.lock:
            self._check()
            position = self._roller.place(len(data))
            self._pages.setdefault(position.page, []).append(data)
            return position

    def flush(self) -> None:
        with self._owner.lock:
            self._check()

    def pages(self) -> list[int]:
        with self._owner.lock:
            self._check()
            return sorted(self._pages)

    def read_page(self, page: int) -> list[bytes]:
        with self._owner.lock:
            self._check()
            if page not in self._pages:
                raise UnknownRecordError(f"address {self.address!r} has no page {page}")
            return list(self._pages[page])

    def delete_page(self, page: int) -> None:
        with self._owner.lock:
            self._check()
            if self._pages.pop(page, None) is None:
                raise UnknownRecordError(f"address {self.address!r} has no page {page}")
            if page == self._roller.page:  # positions are never handed out twice (rule 4)
                self._roller = PageRoller(self._roller.page_size, page + 1)

    @property
    def current_page(self) -> int:
        with self._owner.lock:
            return self._roller.page


class MemoryPagingManager(PagingManager):
    """Every address's pages in dicts (see module docstring). ``page_size_of(address)`` gives
    the address's ``page-size-bytes``."""

    def __init__(self, page_size_of: Callable[[str], int]) -> None:
        self.lock = threading.RLock()
        self._page_size_of = page_size_of
        self._stores: dict[str, _MemoryPageStore] = {}
        self._closed = False

    def check_open(self) -> None:
        """Raises JournalClosedError after close; returns None otherwise."""
        if self._closed:
            raise JournalClosedError("the paging manager is closed")

    def store(self, address: str) -> PageStore:
        check_address(address)
        with self.lock:
            self.check_open()
            found = self._stores.get(address)
            if found is None:
                found = _MemoryPageStore(self, address, self._page_size_of(address))
                self._stores[address] = found
            return found

    def addresses(self) -> list[str]:
        with self.lock:
            self.check_open()
            return sorted(self._stores)

    def remove(self, address: str) -> None:
        with self.lock:
            self.check_open()
            removed = self._stores.pop(address, None)
            if removed is not None:
                removed.removed = True

    def close(self) -> None:
        with self.lock:
            self._closed = True
            self._stores.clear()
