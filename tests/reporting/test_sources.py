"""The sources: a JDBC read is partitioned (several partitions, every row once) and a
consistent cut (rows appended while it runs are left out); a retention history gives the
audit every message that passed through an address."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from store import StoreConfig, open_store
from store.messaging import Message, StorageManager
from store.reporting import jobs, sources
from tests.support.backends import StoreFactory, backend_by_name, file_config_mapping, unique_prefix


@pytest.mark.parametrize("which", ["postgresql", "mariadb"])
def test_jdbc_read_is_partitioned_and_ignores_rows_appended_during_it(
    spark: Any, tmp_path: Path, which: str
) -> None:
    factory = StoreFactory(backend_by_name(which), tmp_path, unique_prefix())
    try:
        s = factory.open()
        s.bindings.load()
        s.messages.load()
        for i in range(2_000):
            s.messages.append_add(i, 45, i.to_bytes(4, "big"))
        s.messages.flush()
        db = factory.config.database_store
        assert db is not None
        bounds = sources.table_bounds(spark, db, "messages")
        assert bounds is not None and bounds[1] - bounds[0] + 1 == 2_000
        stop = threading.Event()
        written = []

        def writer() -> None:
            n = 10_000
            while not stop.is_set():
                s.messages.append_add(n, 45, b"late", sync=True)
                written.append(n)
                n += 1

        thread = threading.Thread(target=writer)
        thread.start()
        try:
            frame = sources.table_journal(
                spark, db, "messages", read=sources.JdbcRead(partitions=4, fetchsize=100),
                bounds=bounds,
            )  # fmt: skip
            assert frame.rdd.getNumPartitions() == 4
            per_partition = frame.rdd.glom().map(len).collect()
            rows = frame.select("id", "seq").collect()
        finally:
            stop.set()
            thread.join()
        assert len(written) > 0  # the writer did append while the read ran
        assert sum(1 for n in per_partition if n > 0) > 1
        ids = [r["id"] for r in rows]
        assert len(ids) == len(set(ids)) == 2_000  # every row once
        assert set(ids) == set(range(2_000))  # none of the late rows
        assert max(r["seq"] for r in rows) == bounds[1]
    finally:
        factory.teardown()


def test_audit_lists_every_message_that_passed_through_an_address(
    spark: Any, tmp_path: Path
) -> None:
    mapping = file_config_mapping(tmp_path, "NIO")
    mapping["journal-retention"] = {"directory": str(tmp_path / "history")}
    config = StoreConfig.from_mapping(mapping)
    sm = StorageManager(open_store(config))
    sm.load()
    sm.create_address("orders", routing_types=("ANYCAST",))
    sm.create_address("other", routing_types=("ANYCAST",))
    sm.create_queue("q", address="orders", routing_type="ANYCAST", filter=None)
    sm.create_queue("o", address="other", routing_type="ANYCAST", filter=None)
    sent = []
    for i in range(300):  # several 64 KiB files: finished files go to the history
        mid = sm.send(Message(address="orders", body=bytes(400), timestamp=10_000 + i))
        sent.append((mid, 10_000 + i))
        sm.send(Message(address="other", body=bytes(400), timestamp=10_000 + i))
        for d in sm.receive("q", max_messages=1):
            sm.ack("q", d.message.message_id)  # consumed: gone from the live journal
    sm.close()
    history = sources.history_journal(spark, str(tmp_path / "history"))
    assert history.count() > 0
    window = jobs.audit(history, address="orders", start_ms=10_050, end_ms=10_100)
    found = sorted((r["message_id"], r["timestamp"]) for r in window.collect())
    # the history holds finished files: every message of the window that is in one of them
    archived = {r["id"] for r in history.filter(F.col("user_record_type") == 45).collect()}
    expected = [(m, t) for m, t in sent if 10_050 <= t < 10_100 and m in archived]
    assert found == expected and len(found) == 50
    assert {r["address"] for r in window.collect()} == {"orders"}
