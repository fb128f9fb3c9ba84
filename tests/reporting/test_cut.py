"""A report of a PostgreSQL store is one instant while a broker moves messages (issue 28): a
writer acks a message on one queue and sends it to the other in one local transaction, over
and over, during the read; the queues' total in the report must be the constant total (a
moved message counted exactly once), which a per-partition ``seq`` cut does not give once
acks delete rows in place."""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from store.messaging import Message, StorageManager
from store.reporting import jobs, snapshot
from store.reporting.report import ReportSource, _pinned, _records
from store.reporting.sources import JdbcRead
from tests.support.backends import StoreFactory, backend_by_name, unique_prefix

MESSAGES = 300
QUEUES = ("left", "right")


def _mover(sm: StorageManager, stop: threading.Event, moved: list[int]) -> None:
    """Move one message at a time between the queues, each move one transaction."""
    n = 0
    while not stop.is_set():
        source, target = QUEUES if n % 2 == 0 else QUEUES[::-1]
        got = sm.receive(source, max_messages=1)
        if got:
            tx = sm.begin()
            tx.ack(source, got[0].message.message_id)
            tx.send(Message(address="a", body=got[0].message.body, timestamp=n + 1),
                    queues=[target])  # fmt: skip
            tx.commit()
            moved.append(n)
        n += 1
        time.sleep(0.002)  # leave the driver's thread the GIL now and then


@pytest.mark.slow
@pytest.mark.timeout(900)  # a first read of up to 90 s on a loaded 2-core machine, a second of 30
def test_totals_are_one_instant_while_messages_move_between_queues(
    spark: Any, tmp_path: Path
) -> None:
    factory = StoreFactory(backend_by_name("postgresql"), tmp_path, unique_prefix())
    try:
        sm = StorageManager(factory.open())
        sm.load()
        sm.create_address("a", routing_types=("ANYCAST",))
        for q in QUEUES:
            sm.create_queue(q, address="a", routing_type="ANYCAST", filter=None)
        for i in range(MESSAGES):
            sm.send(Message(address="a", body=bytes(100), timestamp=i + 1), queues=["left"])
        sm.flush()
        db = factory.config.database_store
        assert db is not None
        for _round in range(2):
            stop, moved = threading.Event(), []
            writer = threading.Thread(target=_mover, args=(sm, stop, moved))
            writer.start()
            try:
                with snapshot.exported_snapshot(db) as cut:
                    assert cut is not None
                    source = ReportSource(
                        config=factory.config, jdbc=JdbcRead(partitions=4, fetchsize=50)
                    )
                    source = dataclasses.replace(
                        source, jdbc=dataclasses.replace(source.jdbc, snapshot=cut)
                    )
                    records, pages = _records(spark, source)
                    assert records is not None
                    # Read once as a report reads them (store.reporting.report._pinned):
                    # every partition of each table at its own time, inside the snapshot.
                    records = _pinned(records)
                    live = jobs.replay(records)
                    depths = {
                        r["queue"]: r["messages"] for r in jobs.queue_depths(live, pages).collect()
                    }
                    records.unpersist()
            finally:
                stop.set()
                writer.join()
            assert len(moved) > 10  # messages did move while the report read
            assert sum(depths[q] for q in QUEUES) == MESSAGES, (depths, len(moved))
        sm.close()
    finally:
        factory.teardown()


def test_a_database_that_cannot_share_a_snapshot_says_so() -> None:
    from store import StoreConfig
    from tests.support.db_backends import store_mapping

    mariadb = StoreConfig.from_mapping(store_mapping("jdbc:mariadb://h/db", "t00000000_"))
    postgresql = StoreConfig.from_mapping(store_mapping("jdbc:postgresql://h/db", "t00000000_"))
    assert mariadb.database_store is not None and postgresql.database_store is not None
    note = snapshot.cut_note(mariadb.database_store, None)
    assert note is not None and note.startswith("NOT one instant: MariaDB")
    assert snapshot.cut_note(postgresql.database_store, "00000003-0000001B-1") == (
        snapshot.ONE_INSTANT
    )
    assert snapshot.cut_note(None, None) is None
