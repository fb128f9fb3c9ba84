"""The database page store's tables (store.paging.database, store.db.schema "Page tables"):
the directory row, one table per address, removal, leftovers of a crash, page size cap."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from store.errors import StoreUnavailableError
from store.paging.database import ADDRESS_ROW, decode_directory, encode_directory
from store.paging.format import page_file_name
from store.paging.manifest import MANIFEST_NAME
from tests.paging.contract import PagingFactory


def test_directory_encoding_round_trips() -> None:
    assert encode_directory({12, 3, 100}) == b"3\n12\n100\n"
    assert decode_directory(b"3\n12\n100\n") == {3, 12, 100}
    assert decode_directory(b"") == set()
    with pytest.raises(ValueError):
        decode_directory(b"3\nx\n")


def test_each_address_has_its_table_listed_in_the_directory(paging: PagingFactory) -> None:
    pm = paging.open()
    pm.store("a").append(b"1", sync=True)
    pm.store("b").append(b"2", sync=True)
    prefix = paging.schema.names.page_store
    assert paging.directory() == {1, 2}
    assert paging.page_tables() == {"a": f"{prefix}1", "b": f"{prefix}2"}
    assert paging.existing_page_tables() == {f"{prefix}1", f"{prefix}2"}


def test_a_flushed_batch_is_one_row_of_its_page(paging: PagingFactory) -> None:
    ps = paging.open(page_size=1000, sync_timeout_ns=60 * 10**9).store("a")
    for i in range(10):
        ps.append(b"r%d" % i)
    ps.flush()
    ps.append(b"last", sync=True)
    table = paging.schema.page_table(1)
    with paging.side_engine.connect() as conn:
        rows = conn.execute(
            sa.select(table.c.filename, table.c.extension).order_by(table.c.id)
        ).all()
    assert [tuple(r) for r in rows] == [
        (ADDRESS_ROW, "txt"),
        (MANIFEST_NAME, "txt"),
        (page_file_name(1), "page"),
        (page_file_name(1), "page"),
    ]


def test_remove_drops_the_table_and_the_directory_entry(paging: PagingFactory) -> None:
    pm = paging.open(page_size=100)
    for address in ("a", "b", "c"):
        for i in range(10):
            pm.store(address).append(b"%020d" % i)
    pm.store("b").flush()
    pm.remove("b")
    prefix = paging.schema.names.page_store
    assert paging.directory() == {1, 3}
    assert paging.existing_page_tables() == {f"{prefix}1", f"{prefix}3"}
    pm.remove("a")
    pm.remove("c")
    assert paging.directory() == set()
    assert paging.existing_page_tables() == set()
    assert pm.addresses() == []
    assert paging.reopen().addresses() == []


def test_suffix_is_the_next_after_the_largest_in_use(paging: PagingFactory) -> None:
    pm = paging.open()
    pm.store("a")
    pm.store("b")
    pm.remove("a")
    pm.store("c")  # in one run, a removed suffix is not handed out again
    prefix = paging.schema.names.page_store
    assert paging.page_tables() == {"b": f"{prefix}2", "c": f"{prefix}3"}
    pm.remove("c")
    pm = paging.reopen()
    pm.store("d")  # after a reopen: the next after the largest listed or existing
    assert paging.page_tables() == {"b": f"{prefix}2", "d": f"{prefix}3"}


def test_unlisted_tables_are_leftovers_dropped_at_open(paging: PagingFactory, caplog) -> None:
    pm = paging.open()
    pm.store("a").append(b"1", sync=True)
    paging.close()
    leftover = paging.schema.page_table(7)  # a crash after CREATE TABLE, before the directory
    with paging.side_engine.begin() as conn:
        leftover.create(conn)
        conn.execute(leftover.insert().values(filename=ADDRESS_ROW, extension="txt", data=b"x"))
    pm = paging.open()
    assert pm.addresses() == ["a"]
    prefix = paging.schema.names.page_store
    assert paging.existing_page_tables() == {f"{prefix}1"}
    assert f"{prefix}7" in caplog.text
    pm.store("new")  # the next suffix is after the largest seen, leftovers included
    assert paging.page_tables()["new"] == f"{prefix}8"


def test_page_size_is_capped_by_jdbc_max_page_size_bytes(paging: PagingFactory) -> None:
    db = paging.config.database_store
    assert db is not None
    paging.config = paging.config.replace(database_store=db.replace(jdbc_max_page_size_bytes=1024))
    ps = paging.open(page_size=10 * 1024 * 1024).store("a")
    positions = [ps.append(bytes(100)) for _ in range(10)]  # 110 bytes each: 9 per page
    assert positions[8].page == 1 and positions[9].page == 2


def test_a_failed_write_reaches_the_waiters_and_later_calls_fail_fast(
    paging: PagingFactory,
) -> None:
    """The flusher's transaction fails (the table was dropped behind the store's back): the
    sync appender gets StoreUnavailableError, so does every later call; nothing is retried."""
    pm = paging.open()
    ps = pm.store("a")
    ps.append(b"1", sync=True)
    with paging.side_engine.begin() as conn:
        paging.schema.page_table(1).drop(conn)
    with pytest.raises(StoreUnavailableError):
        ps.append(b"2", sync=True)
    with pytest.raises(StoreUnavailableError):
        ps.append(b"3")
    with pytest.raises(StoreUnavailableError):
        pm.store("b")
    with pytest.raises(StoreUnavailableError):
        pm.close()  # the close reports that not everything appended is durable
