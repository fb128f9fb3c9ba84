"""Codecs of the message-journal records that tie paged messages to queues (reference §3.5).

A paged message lives in its address's page store (:mod:`store.paging`) and is named by its
:class:`~store.paging.api.PagePosition` (page number, 0-based index in the page). What each
queue has consumed of the pages is kept in the **message journal** with Artemis's user record
types:

====  ==========================  ==========================================================
type  record                      journal use
====  ==========================  ==========================================================
35    PAGE_TRANSACTION            ADD-tx (new id): a transaction that paged messages; later
                                  UPDATE-tx records count depaged messages down; deleted at 0
39    ACKNOWLEDGE_CURSOR          ADD (new id): one paged message acked by one queue
40    PAGE_CURSOR_COUNTER_VALUE   ADD (new id): a queue's paged message count, checkpointed
41    PAGE_CURSOR_COUNTER_INC     ADD / ADD-tx (new id): a change to that count
42    PAGE_CURSOR_COMPLETE        ADD-tx (new id): every message of a page acked by a queue
                                  (its cursor acks of that page are deleted in the same tx)
43    PAGE_CURSOR_PENDING_COUNTER ADD (new id): a page whose counter is still being written
====  ==========================  ==========================================================

Bodies are ours, not Artemis's byte layout (docs/messaging.md: documented, versioned): one version
byte (:data:`VERSION`, 1) and then the fields, big-endian, in this order:

================================  ====  =====================================================
class                             type  fields after the version byte
================================  ====  =====================================================
:class:`PageTransaction`          35    transaction_id i64, message_count i32
:class:`PageTransactionUpdate`    35    page_transaction_id i64, depaged i32 (the UPDATE-tx)
:class:`CursorAck`                39    queue_id i64, page i64, index i32
:class:`PageCounterValue`         40    queue_id i64, value i64, persistent_size i64
:class:`PageCounterIncrement`     41    queue_id i64, delta i32, persistent_size i64
:class:`PageComplete`             42    queue_id i64, page i64, message_count i32
:class:`PageCounterPending`       43    queue_id i64, page i64
================================  ====  =====================================================

``i64``/``i32`` are signed. A PAGE_TRANSACTION add and its update share type 35 (as in
Artemis); they differ by journal operation, so :func:`decode_page_record` takes
``update=True`` for the update form. Decoding checks the version and the exact length and
raises ``ValueError`` naming the record type otherwise; the storage manager adds the record id.

Thread-safety: immutable values and pure functions.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from operator import attrgetter
from typing import ClassVar, Final, TypeAlias

from store.paging.api import PagePosition

__all__ = [
    "ACKNOWLEDGE_CURSOR",
    "PAGE_CURSOR_COMPLETE",
    "PAGE_CURSOR_COUNTER_INC",
    "PAGE_CURSOR_COUNTER_VALUE",
    "PAGE_CURSOR_PENDING_COUNTER",
    "PAGE_TRANSACTION",
    "VERSION",
    "CursorAck",
    "PageComplete",
    "PageCounterIncrement",
    "PageCounterPending",
    "PageCounterValue",
    "PageRecord",
    "PageTransaction",
    "PageTransactionUpdate",
    "decode_page_record",
]

PAGE_TRANSACTION: Final = 35
ACKNOWLEDGE_CURSOR: Final = 39
PAGE_CURSOR_COUNTER_VALUE: Final = 40
PAGE_CURSOR_COUNTER_INC: Final = 41
PAGE_CURSOR_COMPLETE: Final = 42
PAGE_CURSOR_PENDING_COUNTER: Final = 43

#: The body version every record here starts with.
VERSION: Final = 1


class _Codec:
    """The struct layout of one record class; mixed into the dataclasses below."""

    record_type: ClassVar[int]
    layout: ClassVar[struct.Struct]
    __slots__: ClassVar[tuple[str, ...]] = ()  # a slots dataclass's: its fields, in order

    def encode(self) -> bytes:
        """The record's body. Raises ValueError when a field does not fit its width."""
        try:
            # the fields in order (a slots dataclass's ``__slots__``), without astuple's deep
            # copy: a paged message's ack encodes one of these per receive
            return self.layout.pack(VERSION, *attrgetter(*self.__slots__)(self))
        except struct.error as exc:
            raise ValueError(f"{type(self).__name__} {self!r} does not fit: {exc}") from exc


@dataclass(frozen=True, slots=True)
class PageTransaction(_Codec):
    """A transaction that paged ``message_count`` messages (type 35, ADD-tx)."""

    record_type: ClassVar[int] = PAGE_TRANSACTION
    layout: ClassVar[struct.Struct] = struct.Struct(">Bqi")
    transaction_id: int
    message_count: int


@dataclass(frozen=True, slots=True)
class PageTransactionUpdate(_Codec):
    """``depaged`` more messages of a page transaction were consumed (type 35, UPDATE-tx)."""

    record_type: ClassVar[int] = PAGE_TRANSACTION
    layout: ClassVar[struct.Struct] = struct.Struct(">Bqi")
    page_transaction_id: int
    depaged: int


@dataclass(frozen=True, slots=True)
class CursorAck(_Codec):
    """Queue ``queue_id`` acknowledged the paged message at (``page``, ``index``) (type 39)."""

    record_type: ClassVar[int] = ACKNOWLEDGE_CURSOR
    layout: ClassVar[struct.Struct] = struct.Struct(">Bqqi")
    queue_id: int
    page: int
    index: int

    @property
    def position(self) -> PagePosition:
        """The acknowledged message's position."""
        return PagePosition(self.page, self.index)

    @classmethod
    def at(cls, queue_id: int, position: PagePosition) -> CursorAck:
        """The ack of ``position`` by ``queue_id``. Raises nothing."""
        return cls(queue_id, position.page, position.index)

    @classmethod
    def body_of(cls, queue_id: int, position: PagePosition) -> bytes:
        """``CursorAck.at(queue_id, position).encode()`` without the object (a paged message's
        every ack writes one). Raises ValueError when a field does not fit its width."""
        try:
            return cls.layout.pack(VERSION, queue_id, position.page, position.index)
        except struct.error:
            return cls.at(queue_id, position).encode()  # raises, naming the record


@dataclass(frozen=True, slots=True)
class PageCounterValue(_Codec):
    """A checkpoint of a queue's paged message count and bytes (type 40)."""

    record_type: ClassVar[int] = PAGE_CURSOR_COUNTER_VALUE
    layout: ClassVar[struct.Struct] = struct.Struct(">Bqqq")
    queue_id: int
    value: int
    persistent_size: int


@dataclass(frozen=True, slots=True)
class PageCounterIncrement(_Codec):
    """A change of a queue's paged message count and bytes (type 41)."""

    record_type: ClassVar[int] = PAGE_CURSOR_COUNTER_INC
    layout: ClassVar[struct.Struct] = struct.Struct(">Bqiq")
    queue_id: int
    delta: int
    persistent_size: int


@dataclass(frozen=True, slots=True)
class PageComplete(_Codec):
    """Queue ``queue_id`` acknowledged all ``message_count`` messages of ``page`` (type 42)."""

    record_type: ClassVar[int] = PAGE_CURSOR_COMPLETE
    layout: ClassVar[struct.Struct] = struct.Struct(">Bqqi")
    queue_id: int
    page: int
    message_count: int


@dataclass(frozen=True, slots=True)
class PageCounterPending(_Codec):
    """``page``'s counter for ``queue_id`` is still being written (type 43)."""

    record_type: ClassVar[int] = PAGE_CURSOR_PENDING_COUNTER
    layout: ClassVar[struct.Struct] = struct.Struct(">Bqq")
    queue_id: int
    page: int


PageRecord: TypeAlias = (
    PageTransaction
    | PageTransactionUpdate
    | CursorAck
    | PageCounterValue
    | PageCounterIncrement
    | PageComplete
    | PageCounterPending
)

_BY_TYPE: Final[dict[int, type[_Codec]]] = {
    PAGE_TRANSACTION: PageTransaction,
    ACKNOWLEDGE_CURSOR: CursorAck,
    PAGE_CURSOR_COUNTER_VALUE: PageCounterValue,
    PAGE_CURSOR_COUNTER_INC: PageCounterIncrement,
    PAGE_CURSOR_COMPLETE: PageComplete,
    PAGE_CURSOR_PENDING_COUNTER: PageCounterPending,
}


def decode_page_record(record_type: int, body: bytes, *, update: bool = False) -> PageRecord:
    """Decode the body of a message-journal record of ``record_type`` (35, 39..43).

    ``update=True`` reads a type-35 body as :class:`PageTransactionUpdate` (the UPDATE-tx of a
    page transaction). Returns the record. Raises ValueError for another type, a wrong version
    or a wrong length.
    """
    cls: type[_Codec] | None = _BY_TYPE.get(record_type)
    if update and record_type == PAGE_TRANSACTION:
        cls = PageTransactionUpdate
    if cls is None:
        raise ValueError(f"user record type {record_type} is not a page record (35, 39..43)")
    name = cls.__name__
    if len(body) != cls.layout.size:
        raise ValueError(
            f"{name} (type {record_type}) body is {len(body)} bytes, expected {cls.layout.size}"
        )
    version, *fields = cls.layout.unpack(body)
    if version != VERSION:
        raise ValueError(f"{name} (type {record_type}) body has version {version}, not {VERSION}")
    record: PageRecord = cls(*fields)  # type: ignore[assignment]
    return record
