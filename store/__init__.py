"""store: the persistence layer of a message broker.

An append-only file journal (the default) and a SQLAlchemy database store behind one journal
contract, configured with Artemis's own keys. Start with :func:`open_store`::

    from store import StoreConfig, open_store

    with open_store(StoreConfig.from_mapping({"journal-directory": "data/journal"})) as s:
        loaded = s.messages.load()
        s.messages.append_add(7, 45, b"body", sync=True)
"""

from store.address_settings import AddressSettings
from store.config import DatabaseStoreConfig, RetentionConfig, StoreConfig, load_config
from store.errors import (
    AddressFullError,
    ChecksumError,
    ConfigError,
    CorruptionError,
    DuplicateIdError,
    JournalClosedError,
    JournalStateError,
    LockLostError,
    RecordTooLargeError,
    ReportError,
    SchemaError,
    StoreError,
    StoreIOError,
    StoreLockedError,
    StoreUnavailableError,
    TornTailError,
    UnknownMessageError,
    UnknownQueueError,
    UnknownRecordError,
    UnknownTransactionError,
)
from store.journal.api import (
    Journal,
    JournalStats,
    LoadResult,
    PreparedTransaction,
    RecordInfo,
    RecordType,
)
from store.large.api import LargeMessageStore, LargeMessageWriter
from store.paging.api import PagePosition, PageStore, PagingManager
from store.store import Store, open_store

__all__ = [
    "AddressFullError",
    "AddressSettings",
    "ChecksumError",
    "ConfigError",
    "CorruptionError",
    "DatabaseStoreConfig",
    "DuplicateIdError",
    "Journal",
    "JournalClosedError",
    "JournalStateError",
    "JournalStats",
    "LargeMessageStore",
    "LargeMessageWriter",
    "LoadResult",
    "LockLostError",
    "PagePosition",
    "PageStore",
    "PagingManager",
    "PreparedTransaction",
    "RecordInfo",
    "RecordTooLargeError",
    "RecordType",
    "ReportError",
    "RetentionConfig",
    "SchemaError",
    "Store",
    "StoreConfig",
    "StoreError",
    "StoreIOError",
    "StoreLockedError",
    "StoreUnavailableError",
    "TornTailError",
    "UnknownMessageError",
    "UnknownQueueError",
    "UnknownRecordError",
    "UnknownTransactionError",
    "load_config",
    "open_store",
]
