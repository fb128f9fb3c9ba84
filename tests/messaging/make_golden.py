"""Writes the golden bodies of the messaging records, version 1, into
``tests/testdata/messaging/v1/`` (one ``<name>.bin`` per record).

REGENERATE ONLY ON PURPOSE. These bytes are the promise that records written by body version 1
stay readable; ``tests/messaging/test_records.py`` checks that the current code encodes each
value of :data:`GOLDEN` to exactly the committed bytes and decodes the bytes back to it. If a
codec change makes that fail, the change alters the format: bump the body version, keep the
version-1 decoder, and add a ``v2`` folder beside this one instead of regenerating it. Run it
with ``python -m tests.messaging.make_golden``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from store.messaging import message_records as mr
from store.messaging import records as r
from store.messaging.values import Message, Xid

GOLDEN_DIR = os.path.join(os.path.dirname(os.path.dirname(__file__)), "testdata", "messaging", "v1")


@dataclass(frozen=True)
class Golden:
    """One golden body: its file name, user record type, the value, how to encode / decode."""

    name: str
    record_type: int | None  # None: not a record (the XID extra data of a PREPARE)
    value: Any
    encode: Callable[[], bytes]
    decode: Callable[[bytes], Any]


_MESSAGE = Message(
    "orders",
    b"hello",
    priority=7,
    durable=True,
    timestamp=1_700_000_000_000,
    expiration=1_700_000_060_000,
    scheduled_delivery=0,
    properties={
        "none": None,
        "no": False,
        "yes": True,
        "n": -2,
        "x": 0.5,
        "s": "é",
        "b": b"\x00\xff",
    },
    message_id=333,
)
_LARGE = Message("big", b"", durable=False, priority=0, properties={}, message_id=334)


def _message_value(m: Message) -> tuple[object, ...]:
    return (
        m.message_id,
        m.address,
        m.body,
        m.durable,
        m.priority,
        m.timestamp,
        m.expiration,
        m.scheduled_delivery,
        m.properties,
    )


GOLDEN: list[Golden] = [
    Golden(
        "address",
        44,
        r.AddressRecord("orders", ("ANYCAST", "MULTICAST")),
        r.AddressRecord("orders", ("ANYCAST", "MULTICAST")).encode,
        r.AddressRecord.decode,
    ),
    Golden(
        "queue",
        21,
        r.QueueRecord("orders.eu", "orders", "ANYCAST", "region = 'eu'"),
        r.QueueRecord("orders.eu", "orders", "ANYCAST", "region = 'eu'").encode,
        r.QueueRecord.decode,
    ),
    Golden(
        "queue-no-filter",
        21,
        r.QueueRecord("q", "a", "MULTICAST", None),
        r.QueueRecord("q", "a", "MULTICAST", None).encode,
        r.QueueRecord.decode,
    ),
    Golden(
        "id-counter",
        24,
        r.IdCounterRecord(20_001),
        r.IdCounterRecord(20_001).encode,
        r.IdCounterRecord.decode,
    ),
    Golden("add-ref", 32, r.RefRecord(5), r.RefRecord(5).encode, r.RefRecord.decode),
    Golden("ack-ref", 33, r.AckRecord(5), r.AckRecord(5).encode, r.AckRecord.decode),
    Golden(
        "delivery-count",
        34,
        r.DeliveryCountRecord(5, 3),
        r.DeliveryCountRecord(5, 3).encode,
        r.DeliveryCountRecord.decode,
    ),
    Golden(
        "scheduled-time",
        36,
        r.ScheduledTimeRecord(5, 1_700_000_000_000),
        r.ScheduledTimeRecord(5, 1_700_000_000_000).encode,
        r.ScheduledTimeRecord.decode,
    ),
    Golden(
        "duplicate-id",
        37,
        r.DuplicateIdRecord("orders", b"order-17"),
        r.DuplicateIdRecord("orders", b"order-17").encode,
        r.DuplicateIdRecord.decode,
    ),
    Golden(
        "message",
        45,
        _message_value(_MESSAGE),
        lambda: mr.encode_message(_MESSAGE, b"hello"),
        lambda data: _message_value(mr.decode_message(data, 333)),
    ),
    Golden(
        "large-message",
        30,
        (_message_value(_LARGE), 1_048_576),
        lambda: mr.encode_large_message(_LARGE, 1_048_576),
        lambda data: (lambda decoded: (_message_value(decoded[0]), decoded[1]))(
            mr.decode_large_message(data, 334)
        ),
    ),
    Golden(
        "paged-message",
        None,
        mr.PagedMessage(333, 0, 45, b"\x01body", (5, 6)),
        mr.PagedMessage(333, 0, 45, b"\x01body", (5, 6)).encode,
        mr.PagedMessage.decode,
    ),
    Golden(
        "xid",
        None,
        Xid(0x1234, b"global-1", b"branch-1"),
        lambda: r.encode_xid(Xid(0x1234, b"global-1", b"branch-1")),
        r.decode_xid,
    ),
]


def path_of(golden: Golden) -> str:
    """The golden file of ``golden``."""
    return os.path.join(GOLDEN_DIR, f"{golden.name}.bin")


def main() -> int:
    os.makedirs(GOLDEN_DIR, exist_ok=True)
    for golden in GOLDEN:
        with open(path_of(golden), "wb") as f:
            f.write(golden.encode())
    sys.stderr.write(f"wrote {len(GOLDEN)} golden bodies into {GOLDEN_DIR}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
