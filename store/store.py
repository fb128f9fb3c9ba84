"""Opening a store: the configuration picks the back-end (docs/config.md, docs/journal.md).

- ``persistence-enabled = false``: zero persistence (nothing written, loads return nothing);
- a ``database-store`` section: the database store (``store.db``);
- otherwise: the native file journal, messages in ``journal-directory`` and bindings in
  ``bindings-directory``.

:func:`open_store` only chooses: each back-end has one opener in :mod:`store.opening` that
builds all of its parts and returns them as a :class:`~store.parts.StoreParts`
(``store.opening.zero.open_zero_store``, ``store.opening.database.open_database_store``,
``store.opening.file.open_file_store``, and ``store.opening.read_only.open_read_only_parts``
for ``read_only=True``); :class:`Store` holds them.
Opening takes the store's lock at once, so a second process opening the same store gets
:class:`~store.errors.StoreLockedError` immediately; nothing is read until ``load()``.

Thread-safety: a :class:`Store` may be shared between threads; ``close`` is idempotent.
"""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING

from store.config import StoreConfig
from store.errors import LockLostError
from store.fs import FileSystem
from store.journal.api import Journal
from store.large.api import LargeMessageStore
from store.paging.api import PagingManager
from store.parts import StoreParts

if TYPE_CHECKING:
    from store.ha.api import NodeManager

__all__ = ["Store", "open_store"]


class Store:
    """The parts of one open store (its two journals, large messages, page stores); close it
    (or use ``with``) to release it."""

    def __init__(self, config: StoreConfig, parts: StoreParts) -> None:
        self.config = config
        self._parts = parts
        self._closed = False

    @property
    def bindings(self) -> Journal:
        """The bindings journal (addresses, queues, the id counter)."""
        return self._parts.bindings

    @property
    def messages(self) -> Journal:
        """The messages journal (messages, references, acks, transactions)."""
        return self._parts.messages

    @property
    def paging(self) -> PagingManager:
        """Every address's page store (docs/paging.md); usable before the journals' ``load()``."""
        return self._parts.paging

    @property
    def large_messages(self) -> LargeMessageStore:
        """Bodies of large messages, streamed in and out (docs/large.md): files in
        ``large-messages-directory`` or rows of ``large-message-table-name``. Usable right
        after :func:`open_store`, without the journals' ``load()``."""
        return self._parts.large_messages

    @property
    def read_only(self) -> bool:
        """Whether the store was opened to change nothing (``open_store(read_only=True)``):
        its parts refuse every write, and a storage manager over it sweeps nothing at load."""
        return self._parts.read_only

    @property
    def outages(self) -> int | None:
        """Database outages the store's parts noticed and rode out since the store was
        opened (each one a reconnect; docs/db.md "Outages"); None on the file store and
        without persistence."""
        count = self._parts.outages
        return None if count is None else count()

    @property
    def kind(self) -> str:
        """Which back-end holds the store: "file", "database" or "none" (zero persistence)."""
        return self._parts.kind

    def close(self) -> None:
        """Close every part (making what was appended durable) and release the store.
        Idempotent. Raises the first StoreError a part raised, after closing the others."""
        if self._closed:
            return
        self._closed = True
        self._parts.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store(kind={self.kind!r}, closed={self._closed})"


def open_store(
    config: StoreConfig,
    *,
    fs: FileSystem | None = None,
    node_manager: NodeManager | None = None,
    read_only: bool = False,
) -> Store:
    """Open the store ``config`` describes; returns a :class:`Store` whose journals need ``load()``.

    ``fs`` replaces the file-system seam of the file store (tests use a fault-injecting one).
    ``node_manager`` (docs/ha.md): a live HA node manager of this store; its live lock replaces
    the store lock, and every write batch of a database store (journals, page stores) checks
    in its own transaction that this node still holds that lock with its generation. A write
    that fails gives the lock up (``node_manager.store_failed``: through the fence on a
    database, through the file-system seam on files), so the backup takes over.
    Raises LockLostError when ``node_manager`` is not live, StoreLockedError when another
    process holds the store (or, without a node manager, a live HA lease on it), ConfigError
    for settings the back-end refuses, StoreUnavailableError when a database cannot be
    reached, SchemaError for a database schema older than the code.

    ``read_only``: open it to read and change nothing (:mod:`store.opening.read_only`: the
    read-only tools; every write is refused; a storage manager over it sweeps nothing at
    load); ``fs`` and ``node_manager`` do not apply then.
    """
    if read_only:
        if fs is not None or node_manager is not None:
            raise ValueError("a read-only open takes neither fs nor node_manager")
        from store.opening.read_only import open_read_only_parts

        return Store(config, open_read_only_parts(config))
    if node_manager is not None and not node_manager.is_live:
        raise LockLostError(
            "the node manager does not hold the live lock",
            hint="call start_primary() or await_live() before opening the store",
        )
    if not config.persistence_enabled:
        from store.opening.zero import open_zero_store

        return Store(config, open_zero_store(page_size_of=config.page_size_of))
    if config.database_store is not None:
        from store.opening.database import open_database_store

        if node_manager is None:
            return Store(config, open_database_store(config))
        fence = node_manager.fence()
        floor = node_manager.seq_floor()
        parts = open_database_store(config, fence=fence, store_lock=False, seq_floor=floor)
        return Store(config, parts)
    from store.opening.file import open_file_store, refuse_live_file_node

    if node_manager is None:
        refuse_live_file_node(config)
        return Store(config, open_file_store(config, fs=fs))
    from store.fs import OsFileSystem
    from store.ha.watch import WatchedFileSystem

    # A write that fails on the store's files gives the live lock up (docs/ha.md#store-failure).
    watched = WatchedFileSystem(fs or OsFileSystem(), node_manager.store_failed)
    return Store(config, open_file_store(config, fs=watched, lock=False))
