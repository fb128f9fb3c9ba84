"""Stores for the reporting tests, written through the storage manager, and what the Python
side (journal loads, storage manager) says about them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from store import StoreConfig, open_store
from store.journal.api import UPDATE, UPDATE_TX
from store.messaging import Message, StorageManager, Xid
from tests.support.backends import StoreFactory

QUEUES = ("orders.eu", "orders.us", "audit.all", "empty")


@dataclass
class Expected:
    """What the storage manager reported before the store was closed."""

    depths: dict[str, tuple[int, int]]  # queue -> (messages, bytes)


def fill(sm: StorageManager, *, messages: int = 30) -> Expected:
    """Addresses, queues (one left empty), sends, acks, a committed, a rolled-back and a
    prepared transaction, a cancel, a deleted queue. Returns the depths the manager sees."""
    sm.create_address("orders", routing_types=("ANYCAST",))
    sm.create_address("audit", routing_types=("ANYCAST",))
    for name in QUEUES:
        address = "audit" if name.startswith("audit") else "orders"
        sm.create_queue(name, address=address, routing_type="ANYCAST", filter=None)
    sm.create_queue("gone", address="orders", routing_type="ANYCAST", filter=None)
    for i in range(messages):
        queue = "orders.eu" if i % 3 else "orders.us"
        sm.send(
            Message(address="orders", body=b"b" * (i * 7 % 50), timestamp=1_000 + i,
                    properties={"n": i}),
            queues=[queue, "gone"],
        )  # fmt: skip
        sm.send(Message(address="audit", body=b"a" * i, timestamp=2_000 + i), queues=["audit.all"])
    for d in sm.receive("orders.eu", max_messages=5):
        sm.ack("orders.eu", d.message.message_id)
    for d in sm.receive("orders.us", max_messages=2):
        sm.cancel("orders.us", d.message.message_id)
    tx = sm.begin()
    tx.send(Message(address="orders", body=b"committed", timestamp=3_000), queues=["orders.us"])
    for d in sm.receive("audit.all", max_messages=3):
        tx.ack("audit.all", d.message.message_id)
    tx.commit()
    tx = sm.begin()
    tx.send(Message(address="orders", body=b"rolled back"), queues=["orders.us"])
    tx.rollback()
    tx = sm.begin()
    tx.send(Message(address="orders", body=b"prepared", timestamp=3_001), queues=["orders.eu"])
    for d in sm.receive("audit.all", max_messages=2):
        tx.ack("audit.all", d.message.message_id)
    tx.prepare(Xid(1, b"gtid", b"bq"))
    sm.delete_queue("gone")
    sm.flush()
    return Expected(depths=depths_of(sm))


def depths_of(sm: StorageManager) -> dict[str, tuple[int, int]]:
    """queue -> (depth, stored bytes of its messages) as the manager holds them."""
    out = {}
    for info in sm.queues():
        queue = sm._state.queues[info.name]
        size = sum(sm._state.messages[mid].size for mid in queue.message_ids())
        out[info.name] = (sm.depth(info.name), size)
    return out


def filled_store(factory: StoreFactory, *, messages: int = 30) -> Expected:
    """Fill a fresh store of ``factory`` and close it; returns what the manager saw."""
    sm = StorageManager(factory.open())
    sm.load()
    try:
        return fill(sm, messages=messages)
    finally:
        sm.close()


def python_live(factory: StoreFactory) -> list[tuple[str, int, int, int, bool]]:
    """(journal, id, user_record_type, size, is_update) of every record the journals' own
    load returns (opens and closes the store)."""
    rows: list[tuple[str, int, int, int, bool]] = []
    with open_store(factory.config) as s:
        for journal, j in (("bindings", s.bindings), ("messages", s.messages)):
            for rec in j.load().records:
                rows.append((journal, rec.id, rec.user_record_type, len(rec.data), rec.is_update))
    return rows


def spark_live_rows(live: Any) -> Any:
    """The same columns of a replayed Spark frame."""
    from pyspark.sql import functions as F

    return live.select(
        "journal", "id", "user_record_type", "size",
        F.col("kind").isin(UPDATE, UPDATE_TX).alias("is_update"),
    )  # fmt: skip


#: Queues of :func:`fill_paging` and what they hold.
PAGED_QUEUES = ("paged.a", "paged.b", "big.q")
LARGE_LIMIT = 1024


def paging_store_config(tmp_path: Path, which: str) -> StoreConfig:
    """A new store of ``which`` (``"file-nio"`` or a database back-end's name) with
    :func:`paging_mapping`'s settings, its schema made on a database (the caller drops it:
    ``store.db.migrate.drop_schema``)."""
    from store.db.migrate import upgrade
    from tests.support.backends import file_config_mapping, unique_prefix
    from tests.support.db_backends import new_store_mapping

    if which == "file-nio":
        mapping = file_config_mapping(tmp_path, "NIO")
    else:
        mapping = new_store_mapping(tmp_path, unique_prefix(), which)
    config = StoreConfig.from_mapping(paging_mapping(mapping))
    if config.database_store is not None:
        upgrade(config)
    return config


def paging_mapping(mapping: dict[str, Any]) -> dict[str, Any]:
    """``mapping`` with an address "paged" that pages past 2 KiB (2 KiB pages) and bodies over
    :data:`LARGE_LIMIT` bytes in the large-message store."""
    return {
        **mapping,
        "min-large-message-size": LARGE_LIMIT,
        "address-settings": {
            "paged": {
                "max-size-bytes": 2048,
                "page-size-bytes": 2048,
                "address-full-policy": "PAGE",
            }
        },
    }


def fill_paging(sm: StorageManager) -> dict[str, int]:
    """Paged messages (inline and large) on two queues, some acknowledged (so pages complete
    and go, and cursor acks stay), page transactions committed, rolled back and prepared, and
    large messages of a non-paging address, one acknowledged. Returns the depths the manager
    sees."""
    sm.create_address("paged", routing_types=("ANYCAST",))
    sm.create_address("big", routing_types=("ANYCAST",))
    for name in PAGED_QUEUES:
        address = "big" if name == "big.q" else "paged"
        sm.create_queue(name, address=address, routing_type="ANYCAST", filter=None)
    for i in range(60):
        body = bytes([i]) * (3000 if i % 10 == 7 else 200)  # every tenth a large message
        sm.send(Message(address="paged", body=body, timestamp=i), queues=["paged.a", "paged.b"])
    for queue, n in (("paged.a", 25), ("paged.b", 13)):
        for d in sm.receive(queue, max_messages=n):
            sm.ack(queue, d.message.message_id)
    tx = sm.begin()
    for _ in range(3):
        tx.send(Message(address="paged", body=b"c" * 150), queues=["paged.a"])
    tx.commit()
    tx = sm.begin()
    tx.send(Message(address="paged", body=b"r" * 150), queues=["paged.a", "paged.b"])
    tx.rollback()
    tx = sm.begin()
    tx.send(Message(address="paged", body=b"p" * 150), queues=["paged.b"])
    tx.prepare(Xid(2, b"gtid", b"bq"))
    for size in (5000, 7000, 100):
        sm.send(Message(address="big", body=b"L" * size), queues=["big.q"])
    first = sm.receive("big.q", max_messages=1)[0]
    sm.ack("big.q", first.message.message_id)
    sm.flush()
    return {q: sm.depth(q) for q in PAGED_QUEUES}


def stored_bytes(m: Message) -> int:
    """The stored size of a received message as the storage manager writes it: its record
    (45, or 30 plus the body in the large-message store). Raises what reading a large body
    raises."""
    from store.messaging.message_records import encode_large_message, encode_message

    if m.is_large:
        with m.open_body() as f:
            size = len(f.read())
        return len(encode_large_message(m, size)) + size
    assert isinstance(m.body, bytes)
    return len(encode_message(m, m.body))


def drained(sm: StorageManager, queues: tuple[str, ...]) -> dict[str, tuple[int, int]]:
    """queue -> (messages, stored bytes) of everything ``receive`` gives from each queue of a
    loaded manager (paged ones included; nothing is acknowledged)."""
    out = {}
    for queue in queues:
        got = sm.receive(queue, max_messages=100_000)
        out[queue] = (len(got), sum(stored_bytes(d.message) for d in got))
    return out


def check_report(
    out: Path, stdout: str, expected: Expected, live: list[tuple[str, int, int, int, bool]]
) -> None:
    """What every end-to-end ``store report`` must show for a :func:`filled_store`: its
    summary line, charts and page, queue depths equal to what the manager saw, record types
    adding up to what the journals' own load returns (``live``: :func:`python_live`)."""
    import pyarrow.parquet as pq

    assert "queues 4" in stdout
    total = sum(m for m, _b in expected.depths.values())
    assert f"messages {total}," in stdout
    for name in ("index.html", "queue_depths.png", "record_types.png"):
        assert (out / name).stat().st_size > 500
    rows = pq.read_table(out / "queue_depths").to_pylist()
    assert {r["queue"]: (r["messages"], r["bytes"]) for r in rows} == expected.depths
    types = pq.read_table(out / "record_types").to_pylist()
    assert sum(r["records"] for r in types) == len(live)
    assert sum(r["bytes"] for r in types) == sum(size for *_x, size, _u in live)
    assert {r["name"] for r in types} >= {"QUEUE_BINDING_RECORD", "ADD_MESSAGE_PROTOCOL"}
    html = (out / "index.html").read_text()
    assert 'data-dataset="queue_depths"' in html and "orders.eu" in html
