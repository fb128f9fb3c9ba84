"""The paging contract on top of a storage back-end: what the file and the database page
stores share (positions, the roll rule, group commit, locking, the state rules).

A back-end (:class:`PageBackend`) only stores bytes: it finds the page stores present at open,
creates and removes one, lists, reads, writes and deletes pages. :class:`GroupCommitPagingManager`
turns that into the contract of :mod:`store.paging.api`:

- page stores found at open are *loaded* on first use: the highest page becomes the current
  page and the roll state continues from its valid records (a torn tail, where the back-end
  has them, is cut back before anything is appended after it). A current page damaged before
  its end cannot be continued: appends go to the next page (a warning is logged) and reading
  the damaged page raises CorruptionError;
- appends go through the :class:`~store.paging.flusher.Flusher` (group commit);
- ``delete_page`` of the current page moves appends to the next page, so a position is never
  handed out twice in one run (after a reopen the current page is the highest page present);
- a :class:`PageStore` whose address was removed refuses every call (JournalClosedError);
  ``store(address)`` then gives a new, empty store.

Locks, always in this order: ``open_lock`` (creating, loading and removing stores), the
flusher's ``io_lock`` (no write in flight), its ``lock`` (the state). I/O is without ``lock``.

Thread-safety: every method may be called from any number of threads.
"""

from __future__ import annotations

import abc
import copy
import logging
import threading
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Final

from store.errors import (
    CorruptionError,
    JournalClosedError,
    JournalStateError,
    LostDataError,
    RecordTooLargeError,
    UnknownRecordError,
)
from store.paging.api import PagePosition, PageStore, PagingManager
from store.paging.flusher import Flusher, WriteBatch
from store.paging.format import (
    MAX_RECORD_SIZE,
    encode_record,
    encoded_size,
    page_binding,
    readable_records,
    scan_page,
    scan_records,
)
from store.paging.manifest import Manifest
from store.paging.memory import PageRoller, check_address

__all__ = ["SUMMARY_NAME", "GroupCommitPagingManager", "PageBackend", "Survey"]

#: The page summary's file name in a page folder, and its row's ``filename`` in a page table:
#: what a clean close knows of each page, so the next open need not read it
#: (:mod:`store.messaging.page_summary`).
SUMMARY_NAME: Final = "summary.bin"

_log = logging.getLogger(__name__)


@dataclass
class Survey:
    """What a back-end finds in its storage, without changing anything: the page stores
    (address -> locator), ``leftovers`` (what open deletes because it can prove them its own
    unfinished work: (where, why)) and ``problems`` (what open refuses, kept as it is)."""

    stores: dict[str, Hashable] = field(default_factory=dict)
    leftovers: list[tuple[str, str]] = field(default_factory=list)
    problems: list[CorruptionError] = field(default_factory=list)


class PageBackend(abc.ABC):
    """Where a manager's pages are kept. A *locator* is the back-end's handle on one page
    store (any hashable object, compared by identity).

    Thread-safety: ``write`` runs on the flusher thread under ``io_lock``; ``delete_page``
    and ``remove`` run under ``io_lock`` too; the other methods may run concurrently with them
    and with each other (on different page stores, or reading).
    """

    #: Whether the page being written can end in a torn tail (files: yes; a database
    #: commits atomically: no, any damage there is corruption).
    torn_tails: bool = True

    @abc.abstractmethod
    def describe(self) -> str:
        """Where the pages live, for messages. Raises nothing."""

    @abc.abstractmethod
    def survey(self) -> Survey:
        """Every page store present, what a crash left half made and what is damaged, read
        without changing anything (the one place the back-end's open rule is decided; open
        and ``store data verify`` both use it). Raises StoreIOError / StoreUnavailableError."""

    def discover(self) -> dict[str, Hashable]:
        """Every page store present, by address, after removing the leftovers of the
        :meth:`survey`. Raises its first problem (a CorruptionError: nothing was removed),
        StoreIOError / StoreUnavailableError."""
        found = self.survey()
        if found.problems:
            raise found.problems[0]
        for where, why in found.leftovers:
            _log.warning("page store: removing %s (%s)", where, why)
            self.remove_leftover(where)
        self.adopt(found.stores)
        return found.stores

    @abc.abstractmethod
    def remove_leftover(self, where: str) -> None:
        """Delete one leftover of :meth:`survey`. Raises as ``survey``."""

    @abc.abstractmethod
    def adopt(self, stores: dict[str, Hashable]) -> None:
        """Take the stores of a survey as this back-end's open stores. Raises nothing."""

    @abc.abstractmethod
    def create(self, address: str) -> Hashable:
        """Make a new, durable, empty page store for ``address``; returns its locator. Raises
        StoreIOError / StoreUnavailableError, ConfigError when no name is left for it."""

    @abc.abstractmethod
    def page_size(self, configured: int) -> int:
        """The page size to use for an address configured with ``configured`` bytes."""

    @abc.abstractmethod
    def page_numbers(self, locator: Hashable) -> list[int]:
        """Page numbers present, ascending (a page may be empty). Raises as ``discover``."""

    @abc.abstractmethod
    def read_bytes(self, locator: Hashable, page: int) -> bytes | None:
        """The page's bytes (its record stream), or None when it is not there. Raises as
        ``discover``."""

    def read_many(
        self, locator: Hashable, pages: Sequence[int]
    ) -> Iterator[tuple[int, bytes | None]]:
        """``(page, read_bytes(page))`` for each of ``pages``, in that order; a back-end with
        a round trip per read reads several at a time. Raises as ``read_bytes``."""
        for page in pages:
            yield page, self.read_bytes(locator, page)

    @abc.abstractmethod
    def manifest(self, locator: Hashable) -> Manifest | None:
        """The store's page manifest as the back-end keeps it now (read at ``discover``, kept
        up to date by ``write`` and ``delete_page``), or None for a store written before
        manifests (then nothing is checked). Raises nothing."""

    @abc.abstractmethod
    def problems(self, locator: Hashable) -> list[CorruptionError]:
        """What is wrong with the store's pages as stored, without changing anything: pages
        its manifest lists that are missing or of the wrong length (``store.paging.manifest``),
        rows or files that cannot be read as pages. Raises as ``discover``."""

    @abc.abstractmethod
    def stale_pages(self, locator: Hashable) -> list[int]:
        """Pages present that the manifest proves were being deleted when the store stopped
        (their deletion is finished at load). Raises as ``discover``."""

    @abc.abstractmethod
    def page_path(self, locator: Hashable, page: int) -> tuple[str, str]:
        """(``path`` of a CorruptionError about this page, a label naming the page put in
        front of the reason, or ""). Raises nothing."""

    @abc.abstractmethod
    def cut(self, locator: Hashable, page: int, length: int) -> None:
        """Cut the page back to ``length`` bytes (a torn tail), durably. Raises as
        ``discover``."""

    @abc.abstractmethod
    def write(self, batch: WriteBatch) -> None:
        """Append and sync every chunk of ``batch`` (per locator, in order). Raises
        StoreIOError / StoreUnavailableError."""

    @abc.abstractmethod
    def overwrite(self, locator: Hashable, page: int, offset: int, data: bytes) -> None:
        """Replace ``len(data)`` bytes of the page from ``offset`` (within its length: the
        page keeps its length), durably; an offline salvage's replacement of a damaged
        record. Raises ValueError past the page's end, and as ``discover``."""

    @abc.abstractmethod
    def delete_page(self, locator: Hashable, page: int) -> None:
        """Remove the page and its storage. Raises as ``discover``."""

    @abc.abstractmethod
    def remove(self, locator: Hashable) -> None:
        """Remove the whole page store. Raises as ``discover``."""

    @abc.abstractmethod
    def page_lengths(self, locator: Hashable) -> dict[int, int]:
        """Every page's length in bytes as stored now. Raises as ``discover``."""

    @abc.abstractmethod
    def read_summary(self, locator: Hashable) -> bytes | None:
        """The store's page summary (:data:`SUMMARY_NAME`), None when it has none. Raises as
        ``discover``."""

    @abc.abstractmethod
    def write_summary(self, locator: Hashable, data: bytes | None) -> None:
        """Replace the store's page summary with ``data`` (None: delete it), durably.
        Raises as ``discover``."""

    def note_clean_close(self) -> None:
        """After every write was made durable and none failed, at close: record what only a
        clean close knows (the file store: each current page's final length in its manifest,
        so damage to its last records is not taken for a crash's torn tail). Default:
        nothing. Raises StoreIOError."""
        return None

    @abc.abstractmethod
    def close(self) -> None:
        """Release what the back-end holds (open files). Raises nothing."""


class _Store(PageStore):
    """One address's page store on a back-end; its state is guarded by the manager's lock."""

    def __init__(
        self,
        manager: GroupCommitPagingManager,
        address: str,
        locator: Hashable,
        roller: PageRoller,
        pages: set[int],
    ) -> None:
        self.address = address
        self.locator = locator
        self._manager = manager
        self._roller = roller
        self._pages = pages
        self._last_seq = 0
        self.removed = False

    def page_path(self, page: int) -> str:
        path, label = self._manager.backend.page_path(self.locator, page)
        return f"{path} ({label})" if label else path

    def read_page_readable(self, page: int) -> tuple[list[bytes | None], list[str]]:
        try:
            return list(self.read_page(page)), []
        except LostDataError:
            raise
        except CorruptionError:  # damaged records: read around them
            data = self._manager.backend.read_bytes(self.locator, page) or b""
        path = self.page_path(page)
        records, bad = readable_records(data, path=path, binding=page_binding(self.address, page))
        skipped = [d for d in bad if d.header is None]  # (one whose header alone is damaged: read)
        return records, [
            f"{path} at offset {d.offset}: damaged page record: {d.problem}" for d in skipped
        ]

    def _check_locked(self) -> None:
        self._manager.check_locked()
        if self.removed:
            raise JournalClosedError(f"the page store of address {self.address!r} was removed")

    def append(self, record: bytes | bytearray | memoryview, *, sync: bool = False) -> PagePosition:
        data = record if type(record) is bytes else bytes(record)
        if len(data) > MAX_RECORD_SIZE:
            raise RecordTooLargeError(
                f"a page record holds at most {MAX_RECORD_SIZE} bytes, not {len(data)}"
            )
        if self._manager.read_only:
            self._manager.refuse_write(f"append to the page store of address {self.address!r}")
        manager = self._manager
        flusher = manager.flusher
        with flusher.lock:
            # _check_locked() unless all is well: admit_locked raises as it would for the
            # flusher, and returns True when it let the lock go (closed or removed since?).
            if self.removed or manager._closed or flusher.admit_locked(encoded_size(len(data))):
                self._check_locked()
            position = self._roller.place(len(data))
            encoded = encode_record(data, page_binding(self.address, position.page))
            self._pages.add(position.page)
            seq = self._last_seq = flusher.queue_locked(self.locator, position.page, encoded)
        if sync:
            flusher.wait(seq)
        return position

    def flush(self) -> None:
        flusher = self._manager.flusher
        with flusher.lock:
            self._check_locked()
            seq = self._last_seq
        flusher.wait(seq)

    def pages(self) -> list[int]:
        with self._manager.flusher.lock:
            self._check_locked()
            return sorted(self._pages)

    def read_page(self, page: int) -> list[bytes]:
        flusher = self._manager.flusher
        with flusher.lock:
            self._check_locked()
            if page not in self._pages:
                raise UnknownRecordError(f"address {self.address!r} has no page {page}")
            # A page that is not the current one now got its last record before this call;
            # only the current one may be appended to while it is read (its tail torn).
            torn = page >= self._roller.page
            seq = self._last_seq
            pending = not flusher.is_durable_locked(seq)
        if pending:
            flusher.wait(seq)
        return self._manager.read(self, page, torn_tail=torn)

    def read_pages(self, pages: Sequence[int]) -> Iterator[tuple[int, Sequence[bytes]]]:
        """As :meth:`PageStore.read_pages`, each page's records as a :class:`PageRecords`
        (no bytes object per record until one is asked for)."""
        flusher = self._manager.flusher
        with flusher.lock:
            self._check_locked()
            for page in pages:
                if page not in self._pages:
                    raise UnknownRecordError(f"address {self.address!r} has no page {page}")
            current = self._roller.page  # as read_page: only this one may have a torn tail
            seq = self._last_seq
            pending = not flusher.is_durable_locked(seq)
        if pending:
            flusher.wait(seq)
        manager = self._manager
        for page, data in manager.backend.read_many(self.locator, pages):
            yield page, manager.records(self, page, data, torn_tail=page >= current)

    def delete_page(self, page: int) -> None:
        self._manager.refuse_write(f"deleting page {page} of address {self.address!r}")
        flusher = self._manager.flusher
        with flusher.lock:
            self._check_locked()
            if page not in self._pages:
                raise UnknownRecordError(f"address {self.address!r} has no page {page}")
            if page == self._roller.page:  # positions are never handed out twice
                self._roller = PageRoller(self._roller.page_size, page + 1)
            seq = self._last_seq
        flusher.wait(seq)  # nothing of the page is left to write
        with flusher.io_lock:
            with flusher.lock:
                self._check_locked()
                if page not in self._pages:
                    raise UnknownRecordError(f"address {self.address!r} has no page {page}")
            self._manager.backend.delete_page(self.locator, page)
            with flusher.lock:
                self._pages.discard(page)

    def page_lengths(self) -> dict[int, int]:
        self.flush()
        return self._manager.backend.page_lengths(self.locator)

    def read_summary(self) -> bytes | None:
        with self._manager.flusher.lock:
            self._check_locked()
        return self._manager.backend.read_summary(self.locator)

    def write_summary(self, data: bytes | None) -> None:
        self._manager.refuse_write(f"writing the page summary of address {self.address!r}")
        flusher = self._manager.flusher
        with flusher.io_lock:
            with flusher.lock:
                self._check_locked()
            self._manager.backend.write_summary(self.locator, data)

    @property
    def current_page(self) -> int:
        with self._manager.flusher.lock:
            return self._roller.page

    def __repr__(self) -> str:
        return f"PageStore({self.address!r}, current_page={self._roller.page})"


class GroupCommitPagingManager(PagingManager):
    """The paging contract on ``backend`` (see module docstring).

    ``page_size_of(address)`` gives the address's ``page-size-bytes`` (the back-end may cap
    it); ``sync_timeout_ns`` is ``page-sync-timeout``. Construction discovers the page stores
    present; it raises what ``backend.discover`` raises.

    ``read_only`` (the read-only tools, :mod:`store.opening.read_only`): nothing is ever
    written. The survey's leftovers stay where they are, a page whose deletion a crash
    interrupted is left on disk but not offered, a torn tail is not cut, and ``append``,
    ``delete_page``, ``remove`` and ``store()`` of an address without a page store raise
    JournalStateError.
    """

    def __init__(
        self,
        backend: PageBackend,
        *,
        page_size_of: Callable[[str], int],
        sync_timeout_ns: int,
        read_only: bool = False,
    ) -> None:
        self.backend = backend
        self.read_only = read_only
        self._page_size_of = page_size_of
        self._found = self._survey() if read_only else backend.discover()
        self._stores: dict[str, _Store] = {}
        self._open_lock = threading.Lock()
        self._closed = False
        self.flusher = Flusher(
            name=backend.describe(), timeout_ns=sync_timeout_ns, write=backend.write
        )

    def _survey(self) -> dict[str, Hashable]:
        """:meth:`PageBackend.discover` without removing anything (``read_only``)."""
        found = self.backend.survey()
        if found.problems:
            raise found.problems[0]
        self.backend.adopt(found.stores)
        return found.stores

    def refuse_write(self, what: str) -> None:
        """Raise JournalStateError when opened ``read_only``; returns None otherwise."""
        if self.read_only:
            raise JournalStateError(
                f"the page stores of {self.backend.describe()} are open read-only: {what} refused"
            )

    def check_locked(self) -> None:
        """Raises JournalClosedError after close, the write failure once one happened;
        returns None otherwise. Called with the flusher's lock held."""
        if self._closed:
            raise JournalClosedError(f"the paging manager of {self.backend.describe()} is closed")
        self.flusher.check_locked()

    def store(self, address: str) -> PageStore:
        check_address(address)
        with self.flusher.lock:
            self.check_locked()
            found = self._stores.get(address)
        if found is not None:
            return found
        with self._open_lock:
            with self.flusher.lock:
                self.check_locked()
                found = self._stores.get(address)
                locator = self._found.get(address)
            if found is not None:
                return found
            created = self._new(address) if locator is None else self._load(address, locator)
            with self.flusher.lock:
                self.check_locked()
                self._stores[address] = created
                self._found.pop(address, None)
            return created

    def _new(self, address: str) -> _Store:
        self.refuse_write(f"creating the page store of address {address!r}")
        locator = self.backend.create(address)
        roller = PageRoller(self.backend.page_size(self._page_size_of(address)))
        return _Store(self, address, locator, roller, set())

    def _load(self, address: str, locator: Hashable) -> _Store:
        """The store found at open, its roll state continued from its highest page. Raises
        LostDataError / CorruptionError for pages its manifest says are gone or damaged
        (``store.paging.manifest``); finishes page deletions a crash interrupted."""
        size = self.backend.page_size(self._page_size_of(address))
        problems = self.backend.problems(locator)
        if problems:
            raise problems[0]
        stale = self.backend.stale_pages(locator)
        for page in [] if self.read_only else stale:
            _log.info("page store of address %r: finishing the deletion of page %d", address, page)
            self.backend.delete_page(locator, page)
        pages = [p for p in self.backend.page_numbers(locator) if p not in stale]
        if not pages:
            return _Store(self, address, locator, PageRoller(size), set())
        highest = pages[-1]
        data = self.backend.read_bytes(locator, highest) or b""
        path, _ = self.backend.page_path(locator, highest)
        manifest = self.backend.manifest(locator)
        durable = manifest.expected(highest) if manifest is not None else None
        try:
            records, end = scan_page(
                data,
                path=path,
                torn_tail=self.backend.torn_tails,
                binding=page_binding(address, highest),
            )
        except CorruptionError as exc:
            _log.warning(
                "page store of address %r: current page %d is damaged (%s); appends go to page %d",
                address,
                highest,
                exc,
                highest + 1,
            )
            return _Store(self, address, locator, PageRoller(size, highest + 1), set(pages))
        if durable is not None and end < durable[0]:
            raise LostDataError(
                path,
                end,
                f"page {highest} has {end} valid bytes; its manifest lists {durable[0]} bytes "
                "written (records after the damage are gone)",
                hint="restore the page from a backup, or accept the loss with "
                "`store data repair --pages`",
            )
        if end < len(data) and not self.read_only:
            _log.warning(
                "page store of address %r: cutting the torn tail of page %d (%d bytes at %d)",
                address,
                highest,
                len(data) - end,
                end,
            )
            self.backend.cut(locator, highest, end)
        present = set(pages) if records else set(pages[:-1])
        roller = PageRoller(size, highest, len(records), end)
        return _Store(self, address, locator, roller, present)

    def _lost(self, store: _Store, page: int, have: int | None) -> LostDataError | None:
        """The LostDataError for ``page`` of ``store`` read back with ``have`` bytes (None:
        missing) when its manifest says more was written; None when nothing is wrong."""
        manifest = self.backend.manifest(store.locator)
        expected = manifest.expected(page) if manifest is not None else None
        if expected is None or (have is not None and have >= expected[0]):
            return None
        path, label = self.backend.page_path(store.locator, page)
        what = "is missing" if have is None else f"is {have} bytes"
        return LostDataError(
            path,
            have or 0,
            f"{label or f'page {page}'} {what}; its manifest lists {expected[0]} bytes written",
        )

    def read(self, store: _Store, page: int, *, torn_tail: bool) -> list[bytes]:
        """The records of ``store``'s ``page``. Raises UnknownRecordError when it is not there,
        CorruptionError for a damaged record (naming the page)."""
        data = self.backend.read_bytes(store.locator, page)
        records = self.records(store, page, data, torn_tail=torn_tail, scan=scan_page)
        assert isinstance(records, list)  # scan_page's: no copy on the depaging path
        return records

    def records(
        self,
        store: _Store,
        page: int,
        data: bytes | None,
        *,
        torn_tail: bool,
        scan: Callable[..., tuple[Sequence[bytes], int]] = scan_records,
    ) -> Sequence[bytes]:
        """The records of ``store``'s ``page`` read as ``data`` (None: not there), by
        ``scan`` (:func:`scan_records`: a :class:`PageRecords`; or :func:`scan_page`: a
        list). Raises as :meth:`read`."""
        lost = self._lost(store, page, None if data is None else len(data))
        if lost is not None:
            raise lost
        if data is None:
            raise UnknownRecordError(f"address {store.address!r} has no page {page}")
        path, label = self.backend.page_path(store.locator, page)
        binding = page_binding(store.address, page)
        try:
            torn = torn_tail and self.backend.torn_tails
            return scan(data, path=path, torn_tail=torn, binding=binding)[0]
        except CorruptionError as exc:
            if not label:
                raise
            raise CorruptionError(exc.path, exc.offset, f"{label}: {exc.reason}") from None

    def addresses(self) -> list[str]:
        with self.flusher.lock:
            self.check_locked()
            return sorted({*self._found, *self._stores})

    def remove(self, address: str) -> None:
        self.refuse_write(f"removing the page store of address {address!r}")
        with self._open_lock, self.flusher.io_lock:
            with self.flusher.lock:
                self.check_locked()
                found = self._stores.pop(address, None)
                locator = self._found.pop(address, None)
                if found is not None:
                    found.removed = True
                    locator = found.locator
                    self.flusher.drop_locked(locator)
            if locator is not None:
                self.backend.remove(locator)

    def close(self) -> None:
        with self.flusher.lock:
            if self._closed:
                return
            self._closed = True
        error = self.flusher.close()
        try:
            if error is None and not self.read_only:
                self.backend.note_clean_close()
        finally:
            self.backend.close()
        if error is not None:
            raise copy.copy(error) from error

    def __repr__(self) -> str:
        return f"PagingManager({self.backend.describe()!r}, closed={self._closed})"
