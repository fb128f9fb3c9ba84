"""The sources: a JDBC read is partitioned (several partitions, every row once) and a
consistent cut (rows appended while it runs are left out); a retention history gives the
audit every message that passed through an address; an embedded Derby or H2 store is read
once its store has closed, refused while one has it open, and can be opened again in this
process after the report."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from store import StoreConfig, open_store
from store.db.migrate import drop_schema, upgrade
from store.errors import StoreLockedError
from store.messaging import Message, StorageManager
from store.reporting import jobs, sources
from store.reporting.report import ReportSource, run_report
from store.reporting.snapshot import EMBEDDED_DERBY
from tests.reporting.support import filled_store, python_live
from tests.support.backends import (
    BackendSpec,
    StoreFactory,
    backend_by_name,
    file_config_mapping,
    unique_prefix,
)
from tests.support.db_backends import DERBY_CLASSPATH, store_mapping


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


def _embedded(which: str) -> BackendSpec:
    """A store in an embedded database of the test's own (not the session's shared Derby
    database: nothing else in this process may have it booted while Spark reads it)."""

    def make_config(tmp_path: Path, prefix: str) -> StoreConfig:
        if which == "derby":
            url = f"jdbc:derby:{tmp_path / 'derby'};create=true"
            extra = {"jdbc-driver-classpath": DERBY_CLASSPATH}
        else:
            url = f"jdbc:h2:{tmp_path / 'h2db'}"
            extra = {
                "jdbc-driver-class-name": "org.h2.Driver",
                "jdbc-driver-classpath": "/usr/share/java/h2.jar",
            }
        config = StoreConfig.from_mapping(store_mapping(url, prefix, **extra))
        upgrade(config)
        return config

    return BackendSpec(name=which, persistent=True, make_config=make_config, cleanup=drop_schema)


@pytest.mark.slow  # a whole report on Spark
@pytest.mark.parametrize("which", ["derby", "h2"])
def test_a_report_on_an_embedded_derby_or_h2_store_has_the_store_s_numbers(
    spark: Any, tmp_path: Path, which: str
) -> None:
    """Issue 28: the embedded database is opened by Spark's JVM, not the store's (JayDeBeApi
    in this process): refused while the store is open, read once it closed, and the store
    opens again in this process after the report (Derby is shut down in Spark's JVM)."""
    import pyarrow.parquet as pq

    had_log = (Path.cwd() / "derby.log").exists()
    factory = StoreFactory(_embedded(which), tmp_path, unique_prefix())
    try:
        expected = filled_store(factory)
        source = ReportSource(config=factory.config)
        factory.open()
        with pytest.raises(StoreLockedError, match="open in another process"):
            run_report(spark, source, str(tmp_path / "refused"))
        assert not (tmp_path / "refused").exists()
        factory.close()
        out = tmp_path / "report"
        summary = run_report(spark, source, str(out))
        live = python_live(factory)  # opens the store again, in this process
    finally:
        factory.teardown()
    assert summary.queues == 4
    # Derby: booted by the report alone, one instant; H2 closes the database between reads.
    if which == "derby":
        assert summary.cut == EMBEDDED_DERBY
    else:
        assert summary.cut is not None and summary.cut.startswith("NOT one instant: H2")
    # Spark's Derby logs to the temporary folder, not the working one.
    assert (Path.cwd() / "derby.log").exists() == had_log
    assert summary.messages == sum(m for m, _b in expected.depths.values())
    rows = pq.read_table(out / "queue_depths").to_pylist()
    assert {r["queue"]: (r["messages"], r["bytes"]) for r in rows} == expected.depths
    types = pq.read_table(out / "record_types").to_pylist()
    assert sum(r["records"] for r in types) == summary.live_records == len(live)
    assert sum(r["bytes"] for r in types) == sum(size for *_x, size, _u in live)
