"""Store.paging: every opener builds its back-end's paging manager, usable right after
open_store without the journals' load(), closed (flushing) with the store (DESIGN §7.2)."""

from __future__ import annotations

import pytest

import store
from store.errors import JournalClosedError
from store.paging.database import DatabasePagingManager
from store.paging.files import FilePagingManager
from store.paging.memory import MemoryPagingManager
from tests.support.backends import BackendSpec, StoreFactory

EXPECTED = {
    "file": FilePagingManager,
    "database": DatabasePagingManager,
    "none": MemoryPagingManager,
}


def test_paging_is_exported() -> None:
    assert store.PagingManager is store.paging.api.PagingManager
    assert {"PagingManager", "PageStore", "PagePosition"} <= set(store.__all__)


def test_open_store_builds_the_back_ends_paging_manager(
    backend: BackendSpec, store_factory: StoreFactory
) -> None:
    s = store_factory.open()
    assert isinstance(s.paging, EXPECTED[s.kind])
    ps = s.paging.store("orders")  # no load() of either journal
    assert ps.append(b"one") == store.PagePosition(1, 0)
    ps.append(b"two")  # not synced: the store's close makes it durable
    s.close()
    with pytest.raises(JournalClosedError):
        s.paging.addresses()
    s = store_factory.open()
    if backend.persistent:
        assert s.paging.addresses() == ["orders"]
        assert s.paging.store("orders").read_page(1) == [b"one", b"two"]
    else:
        assert s.paging.addresses() == []
    s.messages.load()
    s.messages.append_add(1, 1, b"journal still works", sync=True)
