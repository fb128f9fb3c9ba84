"""Failover of PostgreSQL itself, on private clusters (a primary and a streaming standby made
with ``pg_basebackup -R``): the store's URL names both hosts with ``targetServerType=primary``,
so after the primary dies and the standby is promoted the store reconnects to it by itself.

- A synchronous standby (every commit waits for it) promoted after the primary crashed loses
  nothing: producers and a consumer carry on and every acknowledged send is there once
  (tests/db/test_outages.py's checks).
- An asynchronous standby behind its primary (stopped while the store committed more, then
  promoted) lacks acknowledged rows: the reconnect's probes (:mod:`store.db.probes`) raise
  LostDataError naming the table, and the store writes nothing more.
- The probes on their own: a row of a live record, or a delete, that the database lost while
  the store was disconnected (done behind its back with a side connection) is LostDataError
  at the reconnect; an outage that lost nothing is ridden out.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from store import Store, StoreConfig, open_store
from store.db.migrate import drop_schema
from store.errors import LostDataError, StoreUnavailableError
from tests.db.test_outages import NETWORK_TIMEOUT_MS, carries_on
from tests.support.backends import unique_prefix
from tests.support.db_backends import store_mapping
from tests.support.pg_cluster import PgCluster, private_cluster


@pytest.fixture
def pair() -> Iterator[tuple[PgCluster, PgCluster]]:
    """A primary and its standby (per test: each test promotes its standby)."""
    with private_cluster() as primary:
        standby = primary.standby()
        try:
            yield primary, standby
        finally:
            standby.remove()


def _config(*clusters: PgCluster) -> StoreConfig:
    hosts = ",".join(f"127.0.0.1:{c.port}" for c in clusters)
    url = f"jdbc:postgresql://{hosts}/postgres?targetServerType=primary"
    timeout = {"jdbc-network-timeout": NETWORK_TIMEOUT_MS}
    return StoreConfig.from_mapping(store_mapping(url, unique_prefix(), user="postgres", **timeout))


def _caught_up(primary: PgCluster, standby: PgCluster) -> None:
    deadline = time.monotonic() + 30
    while True:
        (lsn,) = primary.execute("SELECT pg_current_wal_lsn()::text")[0]
        (done,) = standby.execute(f"SELECT pg_last_wal_replay_lsn() >= '{lsn}'::pg_lsn")[0]
        if done:
            return
        assert time.monotonic() < deadline, "the standby never caught up"
        time.sleep(0.05)


@pytest.mark.parametrize("paged", [False, True], ids=["in-memory", "paged"])
def test_a_synchronous_standby_promoted_after_the_primary_crashed_loses_nothing(
    pair: tuple[PgCluster, PgCluster], paged: bool
) -> None:
    primary, standby = pair
    primary.synchronous(standby)
    config = _config(primary, standby)

    def failover() -> None:
        primary.stop("immediate")
        standby.promote()

    carries_on(config, failover, paged=paged)


def test_an_asynchronous_standby_promoted_behind_is_lost_data_never_silent(
    pair: tuple[PgCluster, PgCluster],
) -> None:
    primary, standby = pair
    config = _config(primary, standby)
    store = open_store(config)
    try:
        store.bindings.load()
        journal = store.messages
        journal.load()
        for i in range(1, 6):
            journal.append_add(i, 7, b"replicated %d" % i, sync=True)
        _caught_up(primary, standby)
        standby.stop("fast")  # from here on the standby falls behind
        for i in range(6, 11):
            journal.append_add(i, 7, b"only on the primary %d" % i, sync=True)
        primary.stop("immediate")
        standby.start()
        standby.promote()
        with pytest.raises(LostDataError) as lost:
            journal.append_add(11, 7, b"after the failover", sync=True)
        assert config.database_store is not None
        table = config.database_store.message_table_name.lower()
        assert table in str(lost.value).lower() and "record 10" in str(lost.value), lost.value
        assert "may be gone" in str(lost.value), lost.value  # the seq range it may lack
        with pytest.raises(StoreUnavailableError, match="lacks commits"):
            journal.append_add(12, 7, b"refused too", sync=True)
    finally:
        try:
            store.close()
        except LostDataError:
            pass
    ids = [r[0] for r in standby.execute(f'SELECT id FROM "{table}" ORDER BY seq')]
    assert ids == [1, 2, 3, 4, 5], "the store wrote on after it knew commits were lost"


def test_pages_and_bodies_on_an_asynchronous_standby_promoted_behind_are_lost_data(
    pair: tuple[PgCluster, PgCluster],
) -> None:
    """As above, for a paged record and a large body committed only on the primary: the
    next page write and the next body write raise LostDataError (after at most a refusal
    while the store learns of the outage), and each part writes nothing more."""
    primary, standby = pair
    config = _config(primary, standby)
    prefix, table = _tables(config)
    store = open_store(config)
    try:
        store.bindings.load()
        store.messages.load()
        pages = store.paging.store("orders")
        pages.append(b"replicated", sync=True)
        _body(store, 1)
        _caught_up(primary, standby)
        standby.stop("fast")
        pages.append(b"only on the primary", sync=True)
        _body(store, 2)
        primary.stop("immediate")
        standby.start()
        standby.promote()
        page_error = _lost(lambda: pages.append(b"after the failover", sync=True))
        assert prefix in str(page_error).lower() and "lacks page commits" in str(page_error)
        body_error = _lost(lambda: _body(store, 3))
        assert table in str(body_error) and "message 2, completed, is gone" in str(body_error)
        with pytest.raises(LostDataError):
            pages.append(b"refused", sync=True)
        with pytest.raises(LostDataError):
            _body(store, 4)
    finally:
        _close(store)
    names = [r[0] for r in standby.execute(f'SELECT filename FROM "{table}" ORDER BY id')]
    assert names == ["1.000000000.chunk", "1.msg"], "bodies were written after the loss"


def _lost(call: Callable[[], object]) -> LostDataError:
    """``call()`` raises LostDataError, perhaps after refusals (StoreUnavailableError) while
    the store learns of the outage. Returns the error."""
    deadline = time.monotonic() + 10
    while True:
        try:
            call()
        except LostDataError as exc:
            return exc
        except StoreUnavailableError:
            assert time.monotonic() < deadline, "never found what the database lost"
            time.sleep(0.1)
        else:
            raise AssertionError("written on a database that lost commits")


@pytest.fixture(scope="module")
def cluster() -> Iterator[PgCluster]:
    with private_cluster() as made:
        yield made


@pytest.mark.parametrize("lost", ["insert", "delete", "nothing"])
def test_the_probes_find_commits_lost_while_the_store_was_away(
    cluster: PgCluster, lost: str
) -> None:
    """Records 1-3 added, 3 deleted; then, behind the store's back: record 2's rows deleted
    (an acknowledged send lost), or record 3's row put back (an acknowledged ack lost), or
    nothing; then every connection is killed and the next append reconnects."""
    config = _config(cluster)
    assert config.database_store is not None
    table = config.database_store.message_table_name.lower()
    dsn = f"host=127.0.0.1 port={cluster.port} dbname=postgres user=postgres"
    try:
        with open_store(config) as store:
            store.bindings.load()
            journal = store.messages
            journal.load()
            for i in (1, 2, 3):
                journal.append_add(i, 7, b"r%d" % i, sync=True)
            with psycopg.connect(dsn, autocommit=True) as side:
                saved = side.execute(f'SELECT * FROM "{table}" WHERE id = 3').fetchall()
                journal.append_delete(3, sync=True)
                if lost == "insert":
                    side.execute(f'DELETE FROM "{table}" WHERE id = 2')
                elif lost == "delete":
                    marks = ", ".join("%s" for _ in saved[0])
                    side.execute(f'INSERT INTO "{table}" VALUES ({marks})', saved[0])
            cluster.terminate_clients()
            if lost == "nothing":
                journal.append_add(4, 7, b"after", sync=True)  # ridden out
                return
            with pytest.raises(LostDataError) as found:
                journal.append_add(4, 7, b"after", sync=True)
            expected = "record 2, committed" if lost == "insert" else "record 3, deleted"
            assert expected in str(found.value), found.value
            with pytest.raises(StoreUnavailableError, match="lacks commits"):
                journal.append_add(5, 7, b"refused", sync=True)
    finally:
        drop_schema(config)


def _tables(config: StoreConfig) -> tuple[str, str]:
    """The page-store prefix and the large-message table of ``config``, lower case."""
    db = config.database_store
    assert db is not None
    return db.page_store_table_name.lower(), db.large_message_table_name.lower()


def _body(store: Store, message_id: int) -> None:
    writer = store.large_messages.create(message_id)
    writer.write(b"body %d " % message_id * 1000)
    writer.complete()


@pytest.mark.parametrize("noticed", ["own", "shared"])
@pytest.mark.parametrize("lost", ["page", "deleted-page", "nothing"])
def test_page_stores_find_page_commits_lost_while_the_store_was_away(
    cluster: PgCluster, lost: str, noticed: str
) -> None:
    """Pages 1 and 2 of one address written, page 1 deleted; then, behind the store's back:
    page 2's rows deleted (acknowledged paged sends lost), or page 1's rows put back (an
    acknowledged page delete lost), or nothing; every connection is killed. The next page
    write finds it: on its own retry (``own``), or because a journal append reconnected
    first (``shared``: the page store's connections were never refused)."""
    config = _config(cluster).replace(address_settings={"orders": {"page_size_bytes": 8192}})
    prefix, _ = _tables(config)
    store = open_store(config)
    try:
        store.bindings.load()
        store.messages.load()
        pages = store.paging.store("orders")
        pages.append(b"1" * 6000, sync=True)
        [(table,)] = cluster.execute(
            f"SELECT tablename FROM pg_tables WHERE tablename LIKE '{prefix}%' "
            f"AND tablename <> '{prefix}'"
        )
        with _side(cluster) as side:
            saved = _rows(side, table, "extension = 'page'")
            assert pages.append(b"2" * 6000, sync=True).page == 2
            pages.delete_page(1)
            if lost == "page":
                side.execute(f"DELETE FROM \"{table}\" WHERE filename LIKE '%2.page'")
            elif lost == "deleted-page":
                _put_back(side, table, saved)
        cluster.terminate_clients()
        if noticed == "shared":
            store.messages.append_add(1, 7, b"reconnects", sync=True)
        if lost == "nothing":
            pages.append(b"after", sync=True)  # ridden out
            assert pages.pages() == [2]
            store.close()
            return
        with pytest.raises(LostDataError) as found:
            pages.append(b"after", sync=True)
        assert table in str(found.value) and "page" in str(found.value), found.value
        with pytest.raises(LostDataError):
            pages.append(b"refused", sync=True)
    finally:
        _close(store)
        drop_schema(config)


@pytest.mark.parametrize("noticed", ["own", "shared"])
@pytest.mark.parametrize("lost", ["body", "deleted-body", "nothing"])
def test_the_large_message_store_finds_bodies_lost_while_the_store_was_away(
    cluster: PgCluster, lost: str, noticed: str
) -> None:
    """Bodies 1 and 2 completed, 2 deleted; then, behind the store's back: body 1's rows
    deleted (an acknowledged large send lost), or body 2's descriptor put back (an
    acknowledged delete lost), or nothing; every connection is killed. The next body write
    finds it: after its own statement failed (``own``), or because a journal append
    reconnected first (``shared``)."""
    config = _config(cluster)
    _, table = _tables(config)
    store = open_store(config)
    try:
        store.bindings.load()
        store.messages.load()
        _body(store, 1)
        with _side(cluster) as side:
            _body(store, 2)
            saved = _rows(side, table, "filename = '2.msg'")
            store.large_messages.delete(2)
            if lost == "body":
                side.execute(f"DELETE FROM \"{table}\" WHERE filename LIKE '1.%'")
            elif lost == "deleted-body":
                _put_back(side, table, saved)
        cluster.terminate_clients()
        if noticed == "shared":
            store.messages.append_add(1, 7, b"reconnects", sync=True)
        else:  # a read fails on its dead connection: the store knows an outage happened
            with pytest.raises(StoreUnavailableError):
                store.large_messages.ids()
        if lost == "nothing":
            _body(store, 3)  # ridden out
            assert store.large_messages.ids() == [1, 3]
            store.close()
            return
        with pytest.raises(LostDataError) as found:
            _body(store, 3)
        expected = "message 1, completed, is gone" if lost == "body" else "2, deleted, is back"
        assert table in str(found.value) and expected in str(found.value), found.value
        with pytest.raises(LostDataError):
            _body(store, 4)
    finally:
        _close(store)
        drop_schema(config)


def _side(cluster: PgCluster) -> psycopg.Connection[tuple[object, ...]]:
    """A connection behind the store's back (autocommit)."""
    dsn = f"host=127.0.0.1 port={cluster.port} dbname=postgres user=postgres"
    return psycopg.connect(dsn, autocommit=True)


def _rows(side: psycopg.Connection[tuple[object, ...]], table: str, where: str) -> list[Any]:
    """The (filename, extension, data) of ``table``'s rows matching ``where``."""
    return side.execute(f'SELECT filename, extension, data FROM "{table}" WHERE {where}').fetchall()


def _put_back(side: psycopg.Connection[tuple[object, ...]], table: str, rows: list[Any]) -> None:
    """Insert ``rows`` (from :func:`_rows`) into ``table`` again, behind the store's back."""
    insert = f'INSERT INTO "{table}" (filename, extension, data) VALUES (%s, %s, %s)'
    side.cursor().executemany(insert, rows)


def _close(store: Store) -> None:
    """Close ``store``, which may have found lost commits (close then raises them)."""
    try:
        store.close()
    except LostDataError:
        pass
