"""Opening a database store (docs/db.md): the journals through
:func:`store.db.open_database_journals` (which takes the store lock and checks the schema),
then the large messages (docs/large.md) and page stores (docs/paging.md) in the same
database, on the journals' engine and under the same fence."""

from __future__ import annotations

from typing import TYPE_CHECKING

from store.db import DatabaseJournals, open_database_journals
from store.db.reconnects import reconnects
from store.db.writer import Fence
from store.large.database import DatabaseLargeMessages
from store.paging.database import DatabasePagingManager
from store.parts import StoreParts

if TYPE_CHECKING:
    from store.config import StoreConfig

__all__ = ["open_database_store"]


def open_database_store(
    config: StoreConfig,
    *,
    fence: Fence | None = None,
    store_lock: bool = True,
    seq_floor: int = 0,
) -> StoreParts:
    """The database store's one opener (what :func:`store.open_store` calls): opens it as
    :func:`~store.db.open_database_journals` does, plus its large messages and page stores on
    the same engine (removing the rows of bodies a dead process left incomplete,
    :mod:`store.large.database`), and returns its :class:`~store.parts.StoreParts`; ``fence``
    guards the journals' batches, the large messages' writes and the page stores' writes
    alike. Raises what :func:`~store.db.open_database_journals` raises, and
    StoreUnavailableError when the large-message or page tables cannot be read."""
    journals = open_database_journals(
        config, fence=fence, store_lock=store_lock, seq_floor=seq_floor
    )
    try:
        large_messages = DatabaseLargeMessages(
            journals.engine, journals.schema.large_messages, fence=fence
        )
        try:
            paging = _paging(config, journals, fence)
        except BaseException:
            large_messages.close()
            raise
    except BaseException:
        journals.close()
        raise

    def close() -> None:
        try:
            try:
                paging.close()
            finally:
                large_messages.close()
        finally:
            journals.close()

    return StoreParts(
        kind="database",
        bindings=journals.bindings,
        messages=journals.messages,
        large_messages=large_messages,
        paging=paging,
        close=close,
        outages=lambda: reconnects(journals.engine).count,
    )


def _paging(
    config: StoreConfig, journals: DatabaseJournals, fence: Fence | None
) -> DatabasePagingManager:
    """The page stores in the store's page tables. Raises StoreUnavailableError."""
    db = config.database_store
    assert db is not None
    return DatabasePagingManager(
        journals.engine,
        journals.schema,
        page_size_of=config.page_size_of,
        sync_timeout_ns=config.page_sync_timeout,
        max_page_size=db.jdbc_max_page_size_bytes,
        where=journals.target.display,
        fence=fence,
        network_timeout=db.jdbc_network_timeout / 1000,
    )
