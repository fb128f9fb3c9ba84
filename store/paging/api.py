"""The paging contract every back-end keeps (docs/paging.md).

Each address can have a page store: a folder per address in ``paging-directory`` holding
``address.txt`` and ``NNNNNNNNN.page`` files (file store), a table per address named from
``page-store-table-name`` plus a generated suffix and listed in a directory row (database
store), or memory (zero persistence, where nothing survives the process).

Rules every implementation follows (the contract tests in ``tests/paging/`` check them):

1. Page numbers start at 1. A new page starts when the current page holds at least one record
   and the next record would take it past the address's ``page-size-bytes`` (capped by
   ``jdbc-max-page-size-bytes`` on a database), counting records' encoded bytes with their
   framing (at most 64 bytes per record). At open, the current page is the highest page
   present, and appends continue it under the same rule.
2. ``append(record, sync=False)`` returns the record's :class:`PagePosition` at once; appends
   are group-committed within ``page-sync-timeout``; ``sync=True`` and ``flush()`` return once
   everything appended before them is durable. ``read_page`` sees every record appended before
   it was called.
3. Every page record is checksummed. ``read_page`` ignores a torn tail of the page being
   written; a damaged record before it raises :class:`~store.errors.CorruptionError` with
   ``path`` the page file (or the table name on a database, the message then names the page
   number) and ``offset`` the byte offset within the page. ``read_page`` of a page that is not
   there raises :class:`~store.errors.UnknownRecordError`.
4. ``delete_page`` removes the page's file or rows; ``PagingManager.remove`` deletes the
   address's folder or drops its table and directory row. A page store that never held a
   record may be forgotten at close. Deleting the current page moves appends to the next
   page, so a position is never handed out twice while the store is open (after a reopen
   the current page is the highest page present, rule 1). A ``PageStore`` whose address was
   removed raises :class:`~store.errors.JournalClosedError`; ``store(address)`` then gives
   a new, empty one.
5. After the manager's ``close()`` every call raises :class:`~store.errors.JournalClosedError`;
   a clean close makes everything appended durable.
6. Open never deletes what it cannot prove is its own unfinished work (a removal it had
   committed, a store whose creation a crash interrupted before it held a record, a page
   whose deletion it had recorded): a folder or table holding page records that lost its
   address or directory entry is kept and reported as :class:`~store.errors.CorruptionError`
   naming it (``store data repair --adopt-pages / --remove-pages``). Each page store keeps a
   manifest of the pages that must exist (:mod:`store.paging.manifest`): a page it lists that
   is missing or shorter than written is :class:`~store.errors.LostDataError` at load and on
   read, never fewer records (``store data repair --accept-lost-pages`` accepts the loss).

Thread-safety: every method may be called from any number of threads.
"""

from __future__ import annotations

import abc
import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Final, NamedTuple

__all__ = ["DEFAULT_PAGE_SIZE", "PagePosition", "PageStore", "PagingManager", "make_position"]

#: Artemis's default ``page-size-bytes`` (``AddressSettings.DEFAULT_PAGE_SIZE``): 10 MiB.
DEFAULT_PAGE_SIZE: Final = 10 * 1024 * 1024


class PagePosition(NamedTuple):
    """Where a paged record lives: its page number and its 0-based index in that page.

    Ordered as the records were appended (page first, then index), as Artemis's
    ``PagePosition(pageNr, messageNr)``; cursor acks and page-complete records in the message
    journal name records by it (:mod:`store.messaging.page_records`). Immutable and hashable;
    a named tuple (it was a frozen dataclass until 2026-11-29: hashing, comparing and making
    one are then done in C, a few times per receive of a deep queue), so it also equals the
    plain tuple ``(page, index)``.
    """

    page: int
    index: int  # type: ignore[assignment]  # (shadows tuple.index, which positions never use)


#: ``PagePosition(page, index)`` from a ``(page, index)`` pair in one C call (the named
#: tuple's own ``__new__`` is a Python function; every paged send and receive makes one).
make_position: Final[Callable[[tuple[int, int]], PagePosition]] = functools.partial(
    tuple.__new__, PagePosition
)


class PageStore(abc.ABC):
    """The pages of one address (see the module docstring)."""

    #: The address these pages belong to.
    address: str

    @abc.abstractmethod
    def append(self, record: bytes | bytearray | memoryview, *, sync: bool = False) -> PagePosition:
        """Append one record to the current page (rolling to a new page by rule 1); returns its
        position. ``sync=True`` waits until it is durable. Raises StoreIOError /
        StoreUnavailableError when the storage fails, JournalClosedError after close."""

    @abc.abstractmethod
    def flush(self) -> None:
        """Return once everything appended so far is durable. Raises as ``append``."""

    @abc.abstractmethod
    def pages(self) -> list[int]:
        """Page numbers present, ascending (the current one too, once it holds a record)."""

    @abc.abstractmethod
    def read_page(self, page: int) -> list[bytes]:
        """The page's records, in order. Raises UnknownRecordError for a page that is not
        there, CorruptionError for a damaged record before the torn tail (rule 3)."""

    def read_pages(self, pages: Sequence[int]) -> Iterator[tuple[int, Sequence[bytes]]]:
        """``(page, records)`` for each of ``pages``, in that order, the records equal to
        ``read_page(page)``'s (what a load that reads every page calls). A back-end may read
        several pages per round trip (the database store does) and give a sequence that holds
        the page's bytes rather than a bytes object per record (both back-ends of
        :mod:`store.paging.base` do); this default reads one page at a time. Raises as
        ``read_page``, for the first page that fails (the pages before it were yielded)."""
        for page in pages:
            yield page, self.read_page(page)

    @abc.abstractmethod
    def delete_page(self, page: int) -> None:
        """Remove the page and its storage. Raises UnknownRecordError for a page not there."""

    def page_lengths(self) -> dict[int, int]:
        """Every page's length in bytes as stored, once what was appended so far is durable
        (what a page summary is checked against). This default, for a store that keeps no
        summary, answers {}. Raises as ``append``."""
        return {}

    def read_summary(self) -> bytes | None:
        """The page summary last written by :meth:`write_summary` (an opaque blob its owner
        encodes and checks: :mod:`store.messaging.page_summary`), None when there is none.
        This default keeps none. Raises as ``read_page``."""
        return None

    def write_summary(self, data: bytes | None) -> None:
        """Replace the page summary with ``data`` (None: delete it), durably. This default
        keeps none and does nothing. Raises as ``append``."""
        del data

    def read_page_readable(self, page: int) -> tuple[list[bytes | None], list[str]]:
        """The page's records with each damaged record whose framing still says where it
        ends as None (indexes stay the page's), and what is wrong with each (path, offset,
        reason): what a tool that reads everything readable (``store data exp
        --skip-damaged``) reads a page with. This default reads the page whole. Raises as
        ``read_page`` for other damage (a page gone or cut short, a damaged length)."""
        return list(self.read_page(page)), []

    def page_path(self, page: int) -> str:
        """How errors name the page (its file, or its table with the page); this default
        names the address and the page. Raises nothing."""
        return f"page {page} of address {self.address!r}"

    @property
    @abc.abstractmethod
    def current_page(self) -> int:
        """The page appends go to (1 for a new store)."""


class PagingManager(abc.ABC):
    """Every address's page store (see the module docstring)."""

    @abc.abstractmethod
    def store(self, address: str) -> PageStore:
        """The address's page store, created on first use. Raises ValueError for an empty
        address."""

    @abc.abstractmethod
    def addresses(self) -> list[str]:
        """Every address with a page store, sorted; rediscovered at open."""

    @abc.abstractmethod
    def remove(self, address: str) -> None:
        """Delete the address's whole page store (no-op when it has none)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Make everything appended durable and release the manager; idempotent."""
