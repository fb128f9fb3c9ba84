"""Every job on small stores written by the storage manager (file store, PostgreSQL,
MariaDB), compared with what the journals' own load and the storage manager say."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from pyspark.testing import assertDataFrameEqual

from store.reporting import jobs, schemas
from store.reporting.report import ReportSource, _bodies, _pinned, _records, _settled
from tests.reporting.support import (
    PAGED_QUEUES,
    QUEUES,
    fill_paging,
    filled_store,
    paging_store_config,
    python_live,
    spark_live_rows,
    stored_bytes,
)
from tests.support.backends import StoreFactory


def _types(schema: Any) -> list[tuple[str, Any]]:
    return [(f.name, f.dataType) for f in schema.fields]


def _read(spark: Any, factory: StoreFactory) -> tuple[Any, Any]:
    records, pages = _records(spark, ReportSource(config=factory.config))
    assert records is not None
    return _pinned(records), _pinned(pages)


def test_replay_depths_and_record_types_match_the_python_load(
    spark: Any, report_factory: StoreFactory
) -> None:
    expected = filled_store(report_factory)
    records, pages = _read(spark, report_factory)
    live = _settled(jobs.replay(records))

    depths = jobs.queue_depths(live, pages)
    assert _types(depths.schema) == _types(schemas.QUEUE_DEPTHS)
    assertDataFrameEqual(
        depths,
        spark.createDataFrame(
            [(q, m, b) for q, (m, b) in expected.depths.items()], schemas.QUEUE_DEPTHS
        ),
    )
    assert set(expected.depths) == set(QUEUES)  # the empty queue is a row too
    assert expected.depths["empty"] == (0, 0)

    python = python_live(report_factory)  # after the Spark read: a load may clean rows
    assertDataFrameEqual(
        spark_live_rows(live),
        spark.createDataFrame(python, "journal string, id long, user_record_type int, "
                              "size long, is_update boolean"),
    )  # fmt: skip

    counts: Counter[tuple[str, int]] = Counter()
    sizes: Counter[tuple[str, int]] = Counter()
    for journal, _id, urt, size, _upd in python:
        counts[journal, urt] += 1
        sizes[journal, urt] += size
    types = jobs.record_types(live)
    assert _types(types.schema) == _types(schemas.RECORD_TYPES)
    assertDataFrameEqual(
        types,
        spark.createDataFrame(
            [(j, u, jobs.RECORD_TYPE_NAMES[j, u], n, sizes[j, u]) for (j, u), n in counts.items()],
            schemas.RECORD_TYPES,
        ),
    )

    dead = {r["journal"]: r for r in jobs.dead_records(records, live).collect()}
    for journal in ("bindings", "messages"):
        assert dead[journal]["live_records"] == counts_total(counts, journal)
        assert dead[journal]["dead_records"] == dead[journal]["records"] - counts_total(
            counts, journal
        )
    assert dead["messages"]["dead_records"] > 0  # the acks, the deleted queue's refs, ...


def counts_total(counts: Counter[tuple[str, int]], journal: str) -> int:
    return sum(n for (j, _u), n in counts.items() if j == journal)


@pytest.mark.parametrize("which", ["file-nio", "mariadb"])
def test_message_ages_and_address_bytes(spark: Any, tmp_path: Any, which: str) -> None:
    from tests.support.backends import backend_by_name, unique_prefix

    factory = StoreFactory(backend_by_name(which), tmp_path, unique_prefix())
    try:
        expected = filled_store(factory, messages=12)
        records, pages = _read(spark, factory)
        live = _settled(jobs.replay(records))
        ages = {r["queue"]: r for r in jobs.message_ages(live, pages, now_ms=61_000).collect()}
        by_address = {r["address"]: r for r in jobs.address_bytes(live, pages).collect()}
    finally:
        factory.teardown()  # the reads are lazy: collected before the tables go
    assert ages["empty"]["messages"] == 0 and ages["empty"]["oldest_timestamp"] is None
    assert ages["orders.us"]["oldest_timestamp"] == 1_000  # message 0 went to orders.us
    assert ages["orders.us"]["oldest_age_seconds"] == 60
    assert ages["audit.all"]["newest_timestamp"] == 2_011
    assert {q: r["messages"] for q, r in ages.items()} == {
        q: m for q, (m, _b) in expected.depths.items()
    }
    assert by_address["audit"]["bytes"] == expected.depths["audit.all"][1]
    orders = expected.depths["orders.eu"][1] + expected.depths["orders.us"][1]
    assert by_address["orders"]["bytes"] == orders


def test_replay_applies_commit_position_rollback_and_deletes(spark: Any) -> None:
    # journal order: add 1, tx 7 updates 1 and deletes 2, add 2, commit 7 (deletes the add
    # of 2 written before the commit), tx 8 adds 3 then rolls back, tx 9 prepared only,
    # delete 1 then add 1 again.
    rows = [
        (11, 1, 0, 1), (14, 1, 7, 2), (15, 2, 7, 3), (11, 2, 0, 4), (18, -1, 7, 5),
        (13, 3, 8, 6), (19, -1, 8, 7), (13, 4, 9, 8), (17, -1, 9, 9), (16, 1, 0, 10),
        (11, 1, 0, 11), (11, 5, 0, 12),
    ]  # fmt: skip
    records = spark.createDataFrame(
        [("messages", seq, 0, kind, rid, tx, 45, 1) + (None,) * 15
         for kind, rid, tx, seq in rows],
        schemas.RECORDS,
    )  # fmt: skip
    live = jobs.replay(records).select("id", "kind", "seq")
    assertDataFrameEqual(
        live, spark.createDataFrame([(1, 11, 11), (5, 11, 12)], "id long, kind int, seq long")
    )


def test_replay_drops_transactions_torn_in_their_file_as_the_load_does(
    spark: Any, tmp_path: Any
) -> None:
    """Hand-built journal files: transaction 5's commit counts 3 records where its file has 2
    (torn); the id used again after it and committed with the right count; transaction 6
    prepared with a wrong count, then committed (nothing left to commit); transaction 7
    spans two files and its commit counts its own file's records; transaction 9 spans two
    files and its commit counts one more than its file has (torn). The Spark replay keeps
    what ``load()`` keeps."""
    from store.journal.api import RecordType as T
    from store.reporting.sources import file_journal
    from tests.file.handbuilt import A, B, Builder, load

    b = Builder().file(A).rec(id=1)
    b.rec(T.ADD_TX, id=2, tx_id=5).rec(T.ADD_TX, id=3, tx_id=5)
    b.rec(T.COMMIT, tx_id=5, tx_count=3)  # torn: 2 in this file
    b.rec(T.ADD_TX, id=4, tx_id=5).rec(T.COMMIT, tx_id=5, tx_count=1)  # the id again: good
    b.rec(T.ADD_TX, id=6, tx_id=6).rec(T.PREPARE, tx_id=6, tx_count=2, body=b"xid")  # torn
    b.rec(T.COMMIT, tx_id=6, tx_count=1)
    b.rec(T.ADD_TX, id=7, tx_id=7).rec(T.ADD_TX, id=8, tx_id=9)
    b.file(B).rec(T.ADD_TX, id=9, tx_id=7).rec(T.COMMIT, tx_id=7, tx_count=1)  # per file: good
    b.rec(T.ADD_TX, id=10, tx_id=9).rec(T.COMMIT, tx_id=9, tx_count=2)  # torn: 1 in B
    b.rec(T.DELETE, id=1)
    directory = tmp_path / "journal"
    b.write(directory)
    expected = sorted(r.id for r in load(directory).records)
    assert expected == [4, 7, 9]  # the case is the one named: 2, 3, 6, 8, 10 are dropped
    live = jobs.replay(file_journal(spark, str(directory), "messages"))
    assert sorted(r["id"] for r in live.select("id").collect()) == expected


@pytest.mark.parametrize("which", ["file-nio", "postgresql", "mariadb"])
def test_depths_count_paged_and_large_messages_as_the_storage_manager(
    spark: Any, tmp_path: Any, which: str
) -> None:
    """Paged messages (acked ones, a completed and deleted page, committed, rolled-back and
    prepared page transactions) and large messages, all sent through the storage manager:
    queue_depths equals sm.depth and the stored bytes of what the queues give back; the
    large-message and page-store jobs match the stores."""
    from store import open_store
    from store.db.migrate import drop_schema
    from store.messaging import StorageManager

    config = paging_store_config(tmp_path, which)
    try:
        sm = StorageManager(open_store(config))
        sm.load()
        depth = fill_paging(sm)
        page_bytes = _stored_page_bytes(sm)
        pages_left = sorted(sm._store.paging.store("paged").pages())
        sm.close()
        records, pages = _records(spark, ReportSource(config=config))
        assert records is not None
        records, pages = _pinned(records), _pinned(pages)
        live = _settled(jobs.replay(records))
        depths = {
            r["queue"]: (r["messages"], r["bytes"])
            for r in jobs.queue_depths(live, pages).collect()
        }
        types = {r["name"]: r["records"] for r in jobs.record_types(live).collect()}
        bodies = _bodies(spark, ReportSource(config=config))
        large_frame = jobs.large_messages(records, live, pages, bodies)
        assert _types(large_frame.schema) == _types(schemas.LARGE_MESSAGES)
        large = sorted(large_frame.collect(), key=lambda r: r["message_id"])
        with open_store(config) as s:
            sizes = {mid: s.large_messages.size(mid) for mid in s.large_messages.ids()}
        stores = jobs.page_stores(pages).collect()
        ages = {r["queue"]: r for r in jobs.message_ages(live, pages, now_ms=10**6).collect()}
        by_address = {r["address"]: r for r in jobs.address_bytes(live, pages).collect()}
        sm = StorageManager(open_store(config))
        swept = sm.load().cleaned.get("large_bodies", 0)
        try:
            held = {q: sm.receive(q, max_messages=100_000) for q in PAGED_QUEUES}
            expected = {
                q: (len(ds), sum(stored_bytes(d.message) for d in ds)) for q, ds in held.items()
            }
            distinct: dict[str, dict[int, int]] = {}
            for ds in held.values():
                for d in ds:
                    m = d.message
                    distinct.setdefault(m.address, {})[m.message_id or 0] = stored_bytes(m)
        finally:
            sm.close()
    finally:
        if config.database_store is not None:
            drop_schema(config)
    # the scenario has what it names: a deleted page, a completion, cursor acks, a page tx
    assert pages_left[0] > 0 and len(pages_left) > 1
    assert types["PAGE_CURSOR_COMPLETE"] > 0 and types["ACKNOWLEDGE_CURSOR"] > 0
    assert types["PAGE_TRANSACTION"] == 1
    assert {q: m for q, (m, _b) in expected.items()} == depth
    assert depths == expected
    # ages and bytes per address count the paged messages as the manager delivers them
    for queue, ds in held.items():
        stamps = [d.message.timestamp for d in ds]
        row = ages[queue]
        assert (row["messages"], row["oldest_timestamp"], row["newest_timestamp"]) == (
            len(ds),
            min(stamps),
            max(stamps),
        )
    assert {a: (r["messages"], r["bytes"]) for a, r in by_address.items()} == {
        a: (len(b), sum(b.values())) for a, b in distinct.items()
    }
    assert by_address["paged"]["messages"] > depths["paged.a"][0]  # paged.b's own too
    # big.q: the 7000-byte body in the journal; paged.*: every tenth of 60 (3000 bytes)
    assert [(r["address"], r["body_size"]) for r in large if r["address"] == "big"] == [
        ("big", 7000)
    ]
    paged_large = [r for r in large if r["address"] == "paged"]
    assert paged_large and {r["body_size"] for r in paged_large} == {3000}
    kept = [r for r in large if r["status"] != "orphan"]
    assert all(r["record_bytes"] > 0 and r["status"] == "ok" for r in kept)
    # every body is a row, with the store's own size; orphans are what the next load swept
    assert {r["message_id"]: r["stored_bytes"] for r in large} == sizes
    assert len(large) - len(kept) == swept
    assert [r["address"] for r in stores] == ["paged"]
    assert stores[0]["pages"] == len(pages_left)
    assert stores[0]["bytes"] == page_bytes


def _stored_page_bytes(sm: Any) -> int:
    """Bytes of every page the paging store holds, as its own reads give them."""
    from store.paging.format import encoded_size

    total = 0
    paging = sm._store.paging
    for address in paging.addresses():
        store = paging.store(address)
        for page in store.pages():
            total += sum(encoded_size(len(rec)) for rec in store.read_page(page))
    return total


@pytest.mark.parametrize("which", ["file-nio", "mariadb"])
def test_message_age_histogram_matches_what_the_loaded_storage_manager_delivers(
    spark: Any, tmp_path: Any, which: str
) -> None:
    """Messages aged into every bucket (and on a bucket's edge), some acknowledged, some paged,
    a queue left empty: the histogram per queue equals the ages of what ``receive`` gives
    after ``load()``, bucketed in Python."""
    from store.db.migrate import drop_schema

    now = 1_800_000_000_000
    ages = [0, 5_000, 59_999, 60_000, 600_000, 3_599_999, 3_600_000, 7_200_000, 86_399_999,
            86_400_000, 10 * 86_400_000, -30_000]  # fmt: skip
    config = paging_store_config(tmp_path, which)
    try:
        _check_age_histogram(spark, config, ages, now)
    finally:
        if config.database_store is not None:
            drop_schema(config)


def _check_age_histogram(spark: Any, config: Any, ages: list[int], now: int) -> None:
    from store import open_store
    from store.messaging import Message, StorageManager

    sm = StorageManager(open_store(config))
    sm.load()
    sm.create_address("paged", routing_types=("ANYCAST",))
    for q in ("paged.a", "paged.b", "paged.empty"):
        sm.create_queue(q, address="paged", routing_type="ANYCAST", filter=None)
    for n in range(4):
        for age in ages:
            queues = ["paged.a", "paged.b"] if n % 2 else ["paged.a"]
            sm.send(Message(address="paged", body=bytes(300), timestamp=now - age), queues=queues)
    for d in sm.receive("paged.a", max_messages=5):
        sm.ack("paged.a", d.message.message_id)
    paged = sorted(sm._store.paging.store("paged").pages())
    sm.close()
    records, pages = _records(spark, ReportSource(config=config))
    assert records is not None
    histogram = jobs.message_age_histogram(jobs.replay(records), pages, now)
    assert _types(histogram.schema) == _types(schemas.MESSAGE_AGE_HISTOGRAM)
    rows = {(r["queue"], r["bucket"]): (r["bucket_index"], r["messages"])
            for r in histogram.collect()}  # fmt: skip
    sm = StorageManager(open_store(config))
    sm.load()
    try:
        expected: dict[tuple[str, str], tuple[int, int]] = {}
        for q in ("paged.a", "paged.b", "paged.empty"):
            got = sm.receive(q, max_messages=100_000)
            for i, (name, _bound) in enumerate(jobs.AGE_BUCKETS):
                expected[q, name] = (i, 0)
            for d in got:
                age = max(now - d.message.timestamp, 0)
                i = 0 if age < 60_000 else 1 if age < 3_600_000 else 2 if age < 86_400_000 else 3
                name = jobs.AGE_BUCKETS[i][0]
                expected[q, name] = (i, expected[q, name][1] + 1)
    finally:
        sm.close()
    assert paged  # some of them are paged
    assert rows == expected
    assert [m for (q, _b), (_i, m) in sorted(rows.items(), key=lambda kv: (kv[0][0], kv[1][0]))
            if q == "paged.b"] == [8, 6, 6, 4]  # fmt: skip
