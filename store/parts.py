"""What a back-end's opener hands to :class:`~store.store.Store`: every part of one open store.

Each back-end has exactly one opener, in :mod:`store.opening`, that builds all of its parts and
returns them as a :class:`StoreParts` (``store.opening.file.open_file_store``,
``store.opening.database.open_database_store``, ``store.opening.zero.open_zero_store``; a
read-only open, ``store.opening.read_only.open_read_only_parts``); :func:`store.open_store`
only chooses which opener to call. A part a later back-end feature adds (large messages, page
stores, the node manager) is a field here, filled by every opener, so no back-end is wired
differently from another.

Thread-safety: the parts are as thread-safe as each part says; ``close`` is called once, by
:meth:`Store.close <store.store.Store.close>`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from store.journal.api import Journal
from store.large.api import LargeMessageStore
from store.paging.api import PagingManager

__all__ = ["StoreParts"]


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreParts:
    """The parts of one open store, and how to release them."""

    #: "file", "database" or "none" (zero persistence).
    kind: str
    bindings: Journal
    messages: Journal
    #: Bodies of large messages (docs/large.md); closed by ``close`` before the journals.
    large_messages: LargeMessageStore
    #: Every address's page store (docs/paging.md), usable without the journals' ``load()``.
    paging: PagingManager
    #: Closes every part (making what was appended durable; page stores and large messages
    #: before the journals) and releases the store's lock.
    #: Raises the first StoreError met, after releasing everything it could.
    close: Callable[[], None]
    #: Opened to change nothing (:mod:`store.opening.read_only`): every part refuses writes.
    read_only: bool = False
    #: The database outages the store's parts noticed so far (the engine's reconnect count,
    #: :mod:`store.db.reconnects`); None on a back-end without a database.
    outages: Callable[[], int] | None = None
