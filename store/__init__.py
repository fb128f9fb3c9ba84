"""store: the persistence layer of a message broker.

An append-only file journal (the default) and a SQLAlchemy database store behind one journal
contract, configured with Artemis's own keys. Start with :func:`open_store`::

    from store import StoreConfig, open_store

    with open_store(StoreConfig.from_mapping({"journal-directory": "data/journal"})) as s:
        loaded = s.messages.load()
        s.messages.append_add(7, 45, b"body", sync=True)

:class:`StorageManager` (the messaging layer over an opened store) and :class:`NodeManager` (the HA
pair's live lock) are exported here too, but imported on first use (PEP 562): the storage
manager's modules would add about 0.35 s, 60 %, to every ``import store``, and a lazy name cannot
become an import cycle with the packages those modules import. ``tests/test_layout.py`` holds
the list of exported names.
"""

import typing

from store import _lazy
from store.config import DatabaseStoreConfig, RetentionConfig, StoreConfig, load_config
from store.config.addresses import AddressSettings
from store.errors import (
    AddressFullError,
    ChecksumError,
    ConfigError,
    CorruptionError,
    DuplicateIdError,
    JournalClosedError,
    JournalStateError,
    LockLostError,
    LostDataError,
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

if typing.TYPE_CHECKING:
    from store.ha.api import NodeManager
    from store.messaging.manager import StorageManager

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
    "LostDataError",
    "NodeManager",
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
    "StorageManager",
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

#: The names imported on first use, and the module each comes from.
_LAZY = {"NodeManager": "store.ha.api", "StorageManager": "store.messaging.manager"}


__getattr__, __dir__ = _lazy.lazy_exports(__name__, _LAZY, globals())
