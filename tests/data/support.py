"""What the tests of ``tests/data/`` share: a storage manager loaded over a test's store."""

from __future__ import annotations

from store.messaging.manager import StorageManager
from store.store import Store
from tests.support.backends import StoreFactory


def loaded_manager(factory: StoreFactory) -> StorageManager:
    """Open ``factory``'s store and load a storage manager over it; returns the manager
    (closing it closes the store)."""
    store = factory.open()
    assert isinstance(store, Store)
    sm = StorageManager(store)
    sm.load()
    return sm
