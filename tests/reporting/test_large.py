"""The large-message store as a report reads it (issue 28): the ``large_messages/`` dataset's
stored sizes are what the store's own API says, a body deleted by hand is ``missing``, a
damaged one ``damaged``, and a body no message refers to an ``orphan``, the one the next
load sweeps; on the file store and PostgreSQL."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from store import StoreConfig, open_store
from store.data import repair_store
from store.errors import LostDataError
from store.messaging import Message, StorageManager
from store.reporting.report import ReportSource, run_report
from tests.reporting.support import paging_store_config

#: A body written through the large-message store's API, no message naming it.
ORPHAN_ID = 9_000_000_001
#: Bodies of the large messages sent (min-large-message-size is 1 KiB): the chunk size is
#: 1 MiB, so the last one has three chunks.
SIZES = (5000, 7000, 2500, 9000, 2 * (1 << 20) + 17)


def _by_hand(config: StoreConfig, missing: int, damaged: int) -> None:
    """Delete ``missing``'s body and damage ``damaged``'s (its file cut short, or its last
    chunk row deleted), outside the store."""
    db = config.database_store
    if db is None:
        folder = config.large_messages_directory
        os.remove(os.path.join(folder, f"{missing}.msg"))
        path = os.path.join(folder, f"{damaged}.msg")
        os.truncate(path, os.path.getsize(path) - 10)
        return
    import sqlalchemy as sa

    from store.db.engine import create_store_engine, dispose_store_engine
    from store.db.schema import StoreSchema, TableNames

    t = StoreSchema(TableNames.from_config(db)).large_messages
    engine, _target = create_store_engine(db)
    try:
        with engine.begin() as conn:
            conn.execute(sa.delete(t).where(t.c.filename.like(f"{missing}.%")))
            conn.execute(sa.delete(t).where(t.c.filename == f"{damaged}.000000002.chunk"))
    finally:
        dispose_store_engine(engine)


@pytest.mark.parametrize("which", ["file-nio", "postgresql"])
def test_large_messages_show_stored_sizes_missing_damaged_and_orphan_bodies(
    spark: Any, tmp_path: Path, which: str
) -> None:
    import pyarrow.parquet as pq

    from store.db.migrate import drop_schema

    config = paging_store_config(tmp_path, which)
    try:
        sm = StorageManager(open_store(config))
        sm.load()
        sm.create_address("big", routing_types=("ANYCAST",))
        sm.create_queue("big.q", address="big", routing_type="ANYCAST", filter=None)
        ids = [
            sm.send(Message(address="big", body=bytes([n]) * size), queues=["big.q"])
            for n, size in enumerate(SIZES)
        ]
        acked = sm.receive("big.q", max_messages=1)[0].message.message_id
        sm.ack("big.q", acked)  # its body goes with it: no row at all
        with sm._store.large_messages.create(ORPHAN_ID) as w:
            w.write(b"o" * 3333)
        sm.close()
        missing, damaged = ids[1], ids[4]
        assert None not in ids and acked == ids[0]
        _by_hand(config, missing, damaged)
        with open_store(config) as s:  # the store's own view, no messaging load
            lm = s.large_messages
            stored = {mid: lm.size(mid) for mid in lm.ids() if mid != damaged}
        summary = run_report(spark, ReportSource(config=config), str(tmp_path / "out"))
        rows = pq.read_table(tmp_path / "out" / "large_messages").to_pylist()
        store = open_store(config)
        try:  # the next load refuses the store: queued messages' bodies are gone or cut short
            with pytest.raises(LostDataError) as refused:
                StorageManager(store).load()
        finally:
            store.close()
        repair_store(config, salvage_journals=True)  # removes those two messages, only them
        sm = StorageManager(open_store(config))
        swept = sm.load().cleaned.get("large_bodies", 0)
        sm.close()
    finally:
        if config.database_store is not None:
            drop_schema(config)
    by_id = {r["message_id"]: r for r in rows}
    assert set(by_id) == {*ids[1:], ORPHAN_ID}
    assert missing not in stored and set(stored) == {ids[2], ids[3], ORPHAN_ID}
    for mid, size in stored.items():
        assert by_id[mid]["stored_bytes"] == size
    for mid, size in zip(ids[2:4], SIZES[2:4], strict=True):
        assert by_id[mid]["status"] == "ok" and by_id[mid]["body_size"] == size
        assert by_id[mid]["address"] == "big" and by_id[mid]["chunks"] == 1
        assert by_id[mid]["record_bytes"] > 0 and by_id[mid]["error"] is None
    gone = by_id[missing]
    assert (gone["status"], gone["body_size"], gone["stored_bytes"]) == ("missing", 7000, 0)
    bad = by_id[damaged]
    assert bad["status"] == "damaged" and bad["body_size"] == SIZES[4]
    assert bad["stored_bytes"] < SIZES[4] and str(damaged) in bad["error"]
    assert bad["chunks"] == 2  # of 3: the last one cut short or deleted
    orphan = by_id[ORPHAN_ID]
    assert orphan["status"] == "orphan" and orphan["stored_bytes"] == 3333
    assert orphan["address"] is None and orphan["body_size"] is None
    assert str(missing) in refused.value.path or str(damaged) in refused.value.path
    assert swept == 1  # the load after the salvage sweeps the orphan, and only it
    t = summary.totals
    assert (t.large_bodies, t.large_missing, t.orphan_bodies, t.orphan_bytes) == (4, 2, 1, 3333)
    assert t.large_bytes == sum(r["stored_bytes"] for r in rows if r["status"] != "orphan")
    page = (tmp_path / "out" / "index.html").read_text()
    assert 'data-total="orphan_bodies" data-value="1"' in page
