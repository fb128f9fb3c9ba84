"""Every job on small stores written by the storage manager (file store, PostgreSQL,
MariaDB), compared with what the journals' own load and the storage manager say."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from pyspark.testing import assertDataFrameEqual

from store.reporting import jobs, schemas
from store.reporting.report import ReportSource, _records
from tests.reporting.support import QUEUES, filled_store, python_live, spark_live_rows
from tests.support.backends import StoreFactory


def _types(schema: Any) -> list[tuple[str, Any]]:
    return [(f.name, f.dataType) for f in schema.fields]


def _read(spark: Any, factory: StoreFactory) -> Any:
    records, _pages = _records(spark, ReportSource(config=factory.config))
    assert records is not None
    return records.cache()


def test_replay_depths_and_record_types_match_the_python_load(
    spark: Any, report_factory: StoreFactory
) -> None:
    expected = filled_store(report_factory)
    records = _read(spark, report_factory)
    live = jobs.replay(records).cache()

    depths = jobs.queue_depths(live)
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


def test_message_ages_and_address_bytes(spark: Any, tmp_path: Any) -> None:
    from tests.support.backends import backend_by_name, unique_prefix

    factory = StoreFactory(backend_by_name("file-nio"), tmp_path, unique_prefix())
    try:
        expected = filled_store(factory, messages=12)
        live = jobs.replay(_read(spark, factory)).cache()
    finally:
        factory.teardown()
    ages = {r["queue"]: r for r in jobs.message_ages(live, now_ms=61_000).collect()}
    assert ages["empty"]["messages"] == 0 and ages["empty"]["oldest_timestamp"] is None
    assert ages["orders.us"]["oldest_timestamp"] == 1_000  # message 0 went to orders.us
    assert ages["orders.us"]["oldest_age_seconds"] == 60
    assert ages["audit.all"]["newest_timestamp"] == 2_011
    assert {q: r["messages"] for q, r in ages.items()} == {
        q: m for q, (m, _b) in expected.depths.items()
    }
    by_address = {r["address"]: r for r in jobs.address_bytes(live).collect()}
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
        [("messages", seq, 0, kind, rid, tx, 45, 1) + (None,) * 8
         for kind, rid, tx, seq in rows],
        schemas.RECORDS,
    )  # fmt: skip
    live = jobs.replay(records).select("id", "kind", "seq")
    assertDataFrameEqual(
        live, spark.createDataFrame([(1, 11, 11), (5, 11, 12)], "id long, kind int, seq long")
    )


def test_large_messages(spark: Any, tmp_path: Any) -> None:
    # The storage manager of this version writes no large messages yet: the records are
    # written through the journals, with the messaging codecs.
    from store import StoreConfig, open_store
    from store.messaging import Message
    from store.messaging import records as r
    from store.messaging.message_records import encode_large_message, encode_message
    from tests.support.backends import file_config_mapping

    config = StoreConfig.from_mapping(file_config_mapping(tmp_path, "NIO"))
    with open_store(config) as s:
        s.bindings.load()
        s.messages.load()
        s.bindings.append_add(1, 44, r.AddressRecord("big", ("ANYCAST",)).encode())
        s.bindings.append_add(2, 21, r.QueueRecord("big.q", "big", "ANYCAST", None).encode())
        large = encode_large_message(Message(address="big", body=b""), 50_000)
        small = encode_message(Message(address="big", body=b""), b"small")
        s.messages.append_add(10, r.ADD_LARGE_MESSAGE, large)
        s.messages.append_update(10, r.ADD_REF, r.RefRecord(2).encode())
        s.messages.append_add(11, r.ADD_MESSAGE_PROTOCOL, small)
        s.messages.append_update(11, r.ADD_REF, r.RefRecord(2).encode())
    records, _pages = _records(spark, ReportSource(config=config))
    assert records is not None
    live = jobs.replay(records)
    rows = [r.asDict() for r in jobs.large_messages(live).collect()]
    assert rows == [
        {"message_id": 10, "address": "big", "body_size": 50_000, "record_bytes": len(large)}
    ]
    depths = {r["queue"]: (r["messages"], r["bytes"]) for r in jobs.queue_depths(live).collect()}
    assert depths == {"big.q": (2, len(large) + 50_000 + len(small))}


@pytest.mark.parametrize("which", ["file-nio", "postgresql"])
def test_page_stores(spark: Any, tmp_path: Any, which: str) -> None:
    from store import StoreConfig, open_store
    from store.db.migrate import drop_schema, upgrade
    from store.messaging import Message, StorageManager
    from tests.support.backends import file_config_mapping, unique_prefix
    from tests.support.db_backends import new_store_mapping

    if which == "file-nio":
        mapping = file_config_mapping(tmp_path, "NIO")
    else:
        mapping = new_store_mapping(tmp_path, unique_prefix(), which)
    mapping["address-settings"] = {"paged": {"max-size-bytes": 2048, "address-full-policy": "PAGE"}}
    config = StoreConfig.from_mapping(mapping)
    if config.database_store is not None:
        upgrade(config)
    try:
        sm = StorageManager(open_store(config))
        sm.load()
        sm.create_address("paged", routing_types=("ANYCAST",))
        sm.create_queue("paged.q", address="paged", routing_type="ANYCAST", filter=None)
        for i in range(40):
            sm.send(Message(address="paged", body=bytes(200) + bytes([i])))
        depth = sm.depth("paged.q")
        paged_bytes = _stored_page_bytes(sm)
        sm.close()
        records, pages = _records(spark, ReportSource(config=config))
        assert records is not None
        depths = {r["queue"]: r for r in jobs.queue_depths(jobs.replay(records)).collect()}
        stores = jobs.page_stores(pages).collect()
    finally:
        if config.database_store is not None:
            drop_schema(config)
    assert [r["address"] for r in stores] == ["paged"]
    assert stores[0]["records"] > 0 and stores[0]["pages"] >= 1
    # queue_depths counts the messages in the journal; the rest of the 40 are paged
    assert stores[0]["records"] + depths["paged.q"]["messages"] == depth == 40
    assert stores[0]["bytes"] == paged_bytes


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
