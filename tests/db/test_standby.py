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
from collections.abc import Iterator

import psycopg
import pytest

from store import StoreConfig, open_store
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
