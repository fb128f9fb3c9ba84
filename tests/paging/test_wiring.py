"""Store.paging: every opener builds its back-end's paging manager, usable right after
open_store without the journals' load(), closed (flushing) with the store (docs/paging.md)."""

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


def test_each_address_pages_at_its_configured_page_size(
    backend: BackendSpec, store_factory: StoreFactory
) -> None:
    # 30-byte records framed to 40 bytes: 2 per page under "small.#", many under the default;
    # a database caps every address at jdbc-max-page-size-bytes (here 3 records).
    settings = {"small.#": {"page_size_bytes": 80}, "#": {"page_size_bytes": 10_000}}
    config = store_factory.config.replace(address_settings=settings)
    if config.database_store is not None:
        capped = config.database_store.replace(jdbc_max_page_size_bytes=120)
        config = config.replace(database_store=capped)
    store_factory.config = config
    s = store_factory.open()
    small = [s.paging.store("small.eu").append(b"x" * 30) for _ in range(5)]
    other = [s.paging.store("orders").append(b"x" * 30) for _ in range(5)]
    assert [p.page for p in small] == [1, 1, 2, 2, 3]
    expected_other = [1, 1, 1, 2, 2] if config.database_store is not None else [1] * 5
    assert [p.page for p in other] == expected_other
