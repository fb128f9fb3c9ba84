"""Stores for the reporting tests, written through the storage manager, and what the Python
side (journal loads, storage manager) says about them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from store import open_store
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
        queue = sm._queues[info.name]
        size = sum(sm._messages[mid].size for mid in queue.message_ids())
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
