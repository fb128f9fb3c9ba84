"""Codecs of the storage manager's journal records, except the message itself
(:mod:`store.messaging.message_records`) and the page records
(:mod:`store.messaging.page_records`).

User record types are Artemis's (reference §3.1); bodies ours (docs/messaging.md), each starting
with the version byte (:data:`~store.messaging.codec.VERSION`, 1), fields big-endian, strings
and byte strings length-prefixed as :mod:`store.messaging.codec` documents.

**Bindings journal**

====  =====================  ==================  ==============================================
type  record                 journal use         body after the version byte
====  =====================  ==================  ==============================================
44    ADDRESS_BINDING_RECORD ADD [address id]    name str, n u8, n x routing type str
21    QUEUE_BINDING_RECORD   ADD [queue id]      name str, address str, routing type str,
                                                 filter str?
24    ID_COUNTER_RECORD      ADD [new id], sync  next_id i64: every id below it may be in use
====  =====================  ==================  ==============================================

**Message journal** (the record id is the message id unless said otherwise)

====  ===========================  ===================  =======================================
type  record                       journal use          body after the version byte
====  ===========================  ===================  =======================================
32    ADD_REF                      UPDATE (tx: -tx)     queue_id i64
33    ACKNOWLEDGE_REF              UPDATE (tx: -tx)     queue_id i64
34    UPDATE_DELIVERY_COUNT        UPDATE               queue_id i64, count i32
36    SET_SCHEDULED_DELIVERY_TIME  UPDATE               queue_id i64, time i64 (ms, UTC)
37    DUPLICATE_ID                 ADD [new id] (tx)    address str, dup_id bytes
====  ===========================  ===================  =======================================

**XA prepare record**: the ``xid`` extra data of a PREPARE is :func:`encode_xid`: version u8,
format_id i32, global transaction id bytes, branch qualifier bytes.

Decoding checks the version and the exact length and raises ``ValueError`` naming the record;
the storage manager adds the record id. Versioning: a change to any body bumps the version of
that body; readers keep decoding every older version (none yet).

Thread-safety: immutable values and pure functions.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import ClassVar, Final

from store.messaging.codec import Reader, Writer
from store.messaging.values import ROUTING_TYPES, Xid

__all__ = [
    "ACKNOWLEDGE_REF",
    "ADDRESS_BINDING_RECORD",
    "ADD_LARGE_MESSAGE",
    "ADD_MESSAGE_PROTOCOL",
    "ADD_REF",
    "DUPLICATE_ID",
    "ID_COUNTER_RECORD",
    "QUEUE_BINDING_RECORD",
    "SET_SCHEDULED_DELIVERY_TIME",
    "UPDATE_DELIVERY_COUNT",
    "AckRecord",
    "AddressRecord",
    "DeliveryCountRecord",
    "DuplicateIdRecord",
    "IdCounterRecord",
    "QueueRecord",
    "RefRecord",
    "ScheduledTimeRecord",
    "decode_xid",
    "encode_xid",
    "queue_id_body",
]

QUEUE_BINDING_RECORD: Final = 21
ID_COUNTER_RECORD: Final = 24
ADDRESS_BINDING_RECORD: Final = 44
ADD_LARGE_MESSAGE: Final = 30
ADD_REF: Final = 32
ACKNOWLEDGE_REF: Final = 33
UPDATE_DELIVERY_COUNT: Final = 34
SET_SCHEDULED_DELIVERY_TIME: Final = 36
DUPLICATE_ID: Final = 37
ADD_MESSAGE_PROTOCOL: Final = 45


def _routing_type(value: str, what: str) -> str:
    if value not in ROUTING_TYPES:
        raise ValueError(f"{what}: routing type {value!r} is not one of {', '.join(ROUTING_TYPES)}")
    return value


@dataclass(frozen=True, slots=True)
class AddressRecord:
    """An address and its routing types (type 44, bindings journal)."""

    record_type: ClassVar[int] = ADDRESS_BINDING_RECORD
    name: str
    routing_types: tuple[str, ...]

    def encode(self) -> bytes:
        """The body. Raises ValueError for more than 255 routing types or an unknown one."""
        w = Writer("ADDRESS_BINDING_RECORD").text(self.name, "name")
        w.u8(len(self.routing_types), "routing type count")
        for rt in self.routing_types:
            w.text(_routing_type(rt, "ADDRESS_BINDING_RECORD"), "routing type")
        return w.body()

    @classmethod
    def decode(cls, body: bytes) -> AddressRecord:
        """Returns the record. Raises ValueError for a bad body."""
        r = Reader(body, "ADDRESS_BINDING_RECORD")
        name = r.text("name")
        count = r.u8("routing type count")
        types = tuple(
            _routing_type(r.text("routing type"), "ADDRESS_BINDING_RECORD") for _ in range(count)
        )
        r.done()
        return cls(name, types)


@dataclass(frozen=True, slots=True)
class QueueRecord:
    """A durable queue (type 21, bindings journal; the record id is the queue id)."""

    record_type: ClassVar[int] = QUEUE_BINDING_RECORD
    name: str
    address: str
    routing_type: str
    filter: str | None

    def encode(self) -> bytes:
        """The body. Raises ValueError for an unknown routing type."""
        return (
            Writer("QUEUE_BINDING_RECORD")
            .text(self.name, "name")
            .text(self.address, "address")
            .text(_routing_type(self.routing_type, "QUEUE_BINDING_RECORD"), "routing type")
            .optional_text(self.filter, "filter")
            .body()
        )

    @classmethod
    def decode(cls, body: bytes) -> QueueRecord:
        """Returns the record. Raises ValueError for a bad body."""
        r = Reader(body, "QUEUE_BINDING_RECORD")
        record = cls(
            r.text("name"),
            r.text("address"),
            _routing_type(r.text("routing type"), "QUEUE_BINDING_RECORD"),
            r.optional_text("filter"),
        )
        r.done()
        return record


@dataclass(frozen=True, slots=True)
class IdCounterRecord:
    """A checkpoint of the id generator (type 24): ids below ``next_id`` may be in use."""

    record_type: ClassVar[int] = ID_COUNTER_RECORD
    next_id: int

    def encode(self) -> bytes:
        """The body. Raises ValueError when ``next_id`` does not fit 64 bits."""
        return Writer("ID_COUNTER_RECORD").i64(self.next_id, "next_id").body()

    @classmethod
    def decode(cls, body: bytes) -> IdCounterRecord:
        """Returns the record. Raises ValueError for a bad body."""
        r = Reader(body, "ID_COUNTER_RECORD")
        record = cls(r.i64("next_id"))
        r.done()
        return record


@dataclass(frozen=True, slots=True)
class _QueueIdRecord:
    queue_id: int

    record_type: ClassVar[int]
    what: ClassVar[str]

    def encode(self) -> bytes:
        """The body. Raises ValueError when the queue id does not fit 64 bits."""
        return Writer(self.what).i64(self.queue_id, "queue_id").body()

    @classmethod
    def _decode_queue_id(cls, body: bytes) -> int:
        r = Reader(body, cls.what)
        queue_id = r.i64("queue_id")
        r.done()
        return queue_id


@functools.lru_cache(maxsize=4096)
def queue_id_body(queue_id: int) -> bytes:
    """The body of a :class:`RefRecord` or an :class:`AckRecord` of ``queue_id`` (the two
    encode alike), made once per queue: a send writes one per queue it routes to and an ack
    one, 0.5 µs each when encoded every time. Raises ValueError as ``encode``."""
    return RefRecord(queue_id).encode()


@dataclass(frozen=True, slots=True)
class RefRecord(_QueueIdRecord):
    """The message is routed to queue ``queue_id`` (type 32)."""

    record_type: ClassVar[int] = ADD_REF
    what: ClassVar[str] = "ADD_REF"

    @classmethod
    def decode(cls, body: bytes) -> RefRecord:
        """Returns the record. Raises ValueError for a bad body."""
        return cls(cls._decode_queue_id(body))


@dataclass(frozen=True, slots=True)
class AckRecord(_QueueIdRecord):
    """Queue ``queue_id`` acknowledged the message (type 33)."""

    record_type: ClassVar[int] = ACKNOWLEDGE_REF
    what: ClassVar[str] = "ACKNOWLEDGE_REF"

    @classmethod
    def decode(cls, body: bytes) -> AckRecord:
        """Returns the record. Raises ValueError for a bad body."""
        return cls(cls._decode_queue_id(body))


@dataclass(frozen=True, slots=True)
class DeliveryCountRecord:
    """The message's delivery count on queue ``queue_id`` is now ``count`` (type 34)."""

    record_type: ClassVar[int] = UPDATE_DELIVERY_COUNT
    queue_id: int
    count: int

    def encode(self) -> bytes:
        """The body. Raises ValueError when a field does not fit its width."""
        w = Writer("UPDATE_DELIVERY_COUNT")
        return w.i64(self.queue_id, "queue_id").i32(self.count, "count").body()

    @classmethod
    def decode(cls, body: bytes) -> DeliveryCountRecord:
        """Returns the record. Raises ValueError for a bad body."""
        r = Reader(body, "UPDATE_DELIVERY_COUNT")
        record = cls(r.i64("queue_id"), r.i32("count"))
        r.done()
        return record


@dataclass(frozen=True, slots=True)
class ScheduledTimeRecord:
    """The message is held on queue ``queue_id`` until ``time`` (ms, UTC) (type 36)."""

    record_type: ClassVar[int] = SET_SCHEDULED_DELIVERY_TIME
    queue_id: int
    time: int

    def encode(self) -> bytes:
        """The body. Raises ValueError when a field does not fit its width."""
        w = Writer("SET_SCHEDULED_DELIVERY_TIME")
        return w.i64(self.queue_id, "queue_id").i64(self.time, "time").body()

    @classmethod
    def decode(cls, body: bytes) -> ScheduledTimeRecord:
        """Returns the record. Raises ValueError for a bad body."""
        r = Reader(body, "SET_SCHEDULED_DELIVERY_TIME")
        record = cls(r.i64("queue_id"), r.i64("time"))
        r.done()
        return record


@dataclass(frozen=True, slots=True)
class DuplicateIdRecord:
    """``dup_id`` was sent to ``address`` (type 37; its record id is a new id)."""

    record_type: ClassVar[int] = DUPLICATE_ID
    address: str
    dup_id: bytes

    def encode(self) -> bytes:
        """The body. Raises ValueError for an address that is not encodable."""
        w = Writer("DUPLICATE_ID")
        return w.text(self.address, "address").raw(self.dup_id, "dup_id").body()

    @classmethod
    def decode(cls, body: bytes) -> DuplicateIdRecord:
        """Returns the record. Raises ValueError for a bad body."""
        r = Reader(body, "DUPLICATE_ID")
        record = cls(r.text("address"), r.raw("dup_id"))
        r.done()
        return record


def encode_xid(xid: Xid) -> bytes:
    """The extra data of an XA PREPARE record for ``xid``. Raises nothing (an Xid is valid by
    construction)."""
    return (
        Writer("XID")
        .i32(xid.format_id, "format_id")
        .raw(xid.global_transaction_id, "global_transaction_id")
        .raw(xid.branch_qualifier, "branch_qualifier")
        .body()
    )


def decode_xid(data: bytes) -> Xid:
    """The Xid of a PREPARE record's extra data. Raises ValueError for bad data."""
    r = Reader(data, "XID")
    format_id = r.i32("format_id")
    gtid = r.raw("global_transaction_id")
    bq = r.raw("branch_qualifier")
    r.done()
    return Xid(format_id, gtid, bq)
