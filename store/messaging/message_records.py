"""Codecs of the message records: ADD_MESSAGE_PROTOCOL (45, body inline) and ADD_LARGE_MESSAGE
(30, body in the large-message store). Both are journal ADDs whose record id is the message id.

User record types are Artemis's; the bodies ours (docs/messaging.md), big-endian, strings and
byte strings as :mod:`store.messaging.codec` documents:

===============================  ==========================================================
field                            encoding
===============================  ==========================================================
version                          u8, 1 or 2 (see below)
address                          str
priority                         u8, 0..9
durable                          u8, 0 or 1
timestamp                        i64, ms since the epoch (UTC)
expiration                       i64, ms since the epoch, 0 = never
scheduled_delivery               i64, ms since the epoch, 0 = at once
version 2 only: message_type     u8, Artemis's type byte: 0 default · 2 object · 3 text ·
                                 4 bytes · 5 map · 6 stream
version 2 only: user_id          str? (-1: None)
property count                   i32, >= 0
  x count: name                  str
  x count: tag, value            u8 tag, then: 0 None (nothing) · 1 False (nothing) ·
                                 2 True (nothing) · 3 int i64 · 4 float f64 · 5 str · 6 bytes;
                                 version 2 also: 7 byte i8 · 8 short i16 · 9 integer i32 ·
                                 10 float f32 · 11 simple-string str · 12 typed null, u8 the
                                 index of its type in ``PROPERTY_TYPES``
then, type 45: body              bytes (u32 length + the body)
then, type 30: body_size         i64, the size of the body in the large-message store
===============================  ==========================================================

Version 2 carries Artemis's headers (``message_type``, ``user_id``, ``property_types``: see
:mod:`store.messaging.values`) and is written only for a message that has one of them (one
imported from Artemis's XML); every other message is written as version 1, byte for byte as
before, so the load's compiled fast path (``peek_message``, which takes version 1 bodies
without properties) keeps every message it took, and hands a version 2 body back to Python
(:func:`decode_message`) as it does a body with properties.

A **paged message** (a record of an address's page store, :mod:`store.paging`, not of the
journal) wraps one of those bodies:

===============================  ==========================================================
field                            encoding
===============================  ==========================================================
version                          u8, 1
message_id                       i64
tx_id                            i64, the transaction that paged it, 0 for none
record_type                      u8, 45 or 30: how ``record`` reads
record                           bytes, the body of a 45 or 30 record as above
queue count                      i32, >= 0
  x count: queue_id              i64, the queues it is routed to
===============================  ==========================================================

Decoding checks the version, every tag, every length, and that nothing follows; it raises
``ValueError`` naming the record type otherwise. Versioning: a change bumps the version byte;
readers keep decoding every older version (the message records read 1 and 2; the paged
message wrapper is at 1).

Thread-safety: pure functions.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from store.messaging.codec import VERSION, Reader, Writer
from store.messaging.packed import FIXED, U32, pack_message, unpack_message
from store.messaging.values import (
    DEFAULT_MESSAGE_TYPE,
    MESSAGE_TYPES,
    PROPERTY_TYPES,
    Message,
    PropertyValue,
)
from store.speedups import SPEEDUPS

__all__ = [
    "PagedMessage",
    "decode_large_message",
    "MessageHeader",
    "decode_message",
    "encode_large_message",
    "encode_message",
    "peek_message",
    "python_peek_message",
    "read_message",
    "write_message",
]

_NONE, _FALSE, _TRUE, _INT, _FLOAT, _STR, _BYTES = range(7)
# version 2: the exact Java types of Artemis's properties
_BYTE, _SHORT, _INTEGER, _FLOAT32, _SIMPLE_STRING, _TYPED_NULL = range(7, 13)
#: The message records' layout with Artemis's headers (the module docstring).
VERSION_ARTEMIS = 2
_VERSIONS = (VERSION, VERSION_ARTEMIS)
_TYPE_NAMES = {code: name for name, code in MESSAGE_TYPES.items()}


def _has_artemis_headers(message: Message) -> bool:
    return bool(
        message.property_types
        or message.user_id is not None
        or message.message_type != DEFAULT_MESSAGE_TYPE
    )


def _writer(what: str, message: Message) -> Writer:
    """A writer of the record's version: 2 only for a message with Artemis's headers."""
    return Writer(what, VERSION_ARTEMIS if _has_artemis_headers(message) else VERSION)


def _write_header(w: Writer, message: Message) -> None:
    artemis = _has_artemis_headers(message)
    w.text(message.address, "address")
    w.u8(message.priority, "priority")
    w.u8(1 if message.durable else 0, "durable")
    w.i64(message.timestamp, "timestamp")
    w.i64(message.expiration, "expiration")
    w.i64(message.scheduled_delivery, "scheduled_delivery")
    if artemis:
        code = MESSAGE_TYPES.get(message.message_type)
        if code is None:
            raise ValueError(f"message_type {message.message_type!r} cannot be stored")
        w.u8(code, "message_type")
        w.optional_text(message.user_id, "user_id")
    w.i32(len(message.properties), "property count")
    types = message.property_types
    for name, value in message.properties.items():
        w.text(name, "property name")
        kind = types.get(name) if artemis else None
        if kind is None:
            _write_property(w, name, value)
        else:
            _write_typed_property(w, name, value, kind)


def _write_typed_property(w: Writer, name: str, value: PropertyValue, kind: str) -> None:
    """A property whose Java type is not the one its value implies (version 2)."""
    field = f"property {name!r}"
    if value is None:
        if kind not in PROPERTY_TYPES:
            raise ValueError(f"{field}: type {kind!r} cannot be stored")
        w.u8(_TYPED_NULL, field).u8(PROPERTY_TYPES.index(kind), field)
    elif kind == "byte" and isinstance(value, int):
        w.u8(_BYTE, field).i8(value, field)
    elif kind == "short" and isinstance(value, int):
        w.u8(_SHORT, field).i16(value, field)
    elif kind == "integer" and isinstance(value, int):
        w.u8(_INTEGER, field).i32(value, field)
    elif kind == "float" and isinstance(value, float):
        w.u8(_FLOAT32, field).f32(value, field)
    elif kind == "simple-string" and isinstance(value, str):
        w.u8(_SIMPLE_STRING, field).text(value, field)
    else:
        _write_property(w, name, value)  # the type its value implies


def _write_property(w: Writer, name: str, value: PropertyValue) -> None:
    field = f"property {name!r}"
    if value is None:
        w.u8(_NONE, field)
    elif value is True:
        w.u8(_TRUE, field)
    elif value is False:
        w.u8(_FALSE, field)
    elif isinstance(value, int):
        w.u8(_INT, field).i64(value, field)
    elif isinstance(value, float):
        w.u8(_FLOAT, field).f64(value, field)
    elif isinstance(value, str):
        w.u8(_STR, field).text(value, field)
    elif isinstance(value, bytes):
        w.u8(_BYTES, field).raw(value, field)
    else:
        raise ValueError(f"{field}: {type(value).__name__} cannot be stored")


def _read_typed_property(r: Reader, what: str, name: str, tag: int) -> tuple[PropertyValue, str]:
    """A version 2 property of tag ``tag`` (7..12): its value and its Java type."""
    field = f"property {name!r}"
    if tag == _BYTE:
        return r.i8(field), "byte"
    if tag == _SHORT:
        return r.i16(field), "short"
    if tag == _INTEGER:
        return r.i32(field), "integer"
    if tag == _FLOAT32:
        return r.f32(field), "float"
    if tag == _SIMPLE_STRING:
        return r.text(field), "simple-string"
    index = r.u8(field)
    if index >= len(PROPERTY_TYPES):
        raise ValueError(f"{what}: {field} is a null of unknown type {index}")
    return None, PROPERTY_TYPES[index]


def _read_property(r: Reader, what: str, name: str, tag: int) -> PropertyValue:
    field = f"property {name!r}"
    if tag == _NONE:
        return None
    if tag == _FALSE:
        return False
    if tag == _TRUE:
        return True
    if tag == _INT:
        return r.i64(field)
    if tag == _FLOAT:
        return r.f64(field)
    if tag == _STR:
        return r.text(field)
    if tag == _BYTES:
        return r.raw(field)
    raise ValueError(f"{what}: {field} has unknown type tag {tag}")


def _read_header(r: Reader, what: str) -> dict[str, object]:
    address = r.text("address")
    priority = r.u8("priority")
    durable = r.u8("durable")
    if priority > 9:
        raise ValueError(f"{what}: priority {priority} is not 0..9")
    if durable not in (0, 1):
        raise ValueError(f"{what}: durable flag {durable} is not 0 or 1")
    header: dict[str, object] = {
        "address": address,
        "priority": priority,
        "durable": durable == 1,
        "timestamp": r.i64("timestamp"),
        "expiration": r.i64("expiration"),
        "scheduled_delivery": r.i64("scheduled_delivery"),
    }
    artemis = r.version == VERSION_ARTEMIS
    types: dict[str, str] = {}
    if artemis:
        code = r.u8("message_type")
        if code not in _TYPE_NAMES:
            raise ValueError(f"{what}: message type {code} is not one of Artemis's")
        header["message_type"] = _TYPE_NAMES[code]
        header["user_id"] = r.optional_text("user_id")
        header["property_types"] = types
    count = r.i32("property count")
    if count < 0:
        raise ValueError(f"{what}: property count {count} is negative")
    properties: dict[str, PropertyValue] = {}
    for _ in range(count):
        name = r.text("property name")
        tag = r.u8(f"property {name!r}")
        if artemis and _BYTE <= tag <= _TYPED_NULL:
            properties[name], types[name] = _read_typed_property(r, what, name, tag)
        else:
            properties[name] = _read_property(r, what, name, tag)
    header["properties"] = properties
    return header


def _message(header: dict[str, object], body: bytes, what: str, message_id: int) -> Message:
    try:
        return Message(body=body, message_id=message_id, **header)  # type: ignore[arg-type]
    except ValueError as exc:
        raise ValueError(f"{what}: {exc}") from exc


def encode_message(message: Message, body: bytes) -> bytes:
    """The ADD_MESSAGE_PROTOCOL (45) body of ``message`` with ``body`` inline. Raises
    ValueError when a field does not fit its slot.

    A message without properties, or whose properties are all strings (what a send writes
    most: a STOMP frame's headers are string properties), is packed in one go
    (:mod:`store.messaging.packed`); anything else, and anything that does not fit, goes
    field by field through :func:`write_message`, which names the field. Both give the same
    bytes (tested)."""
    packed = pack_message(message, body)
    return packed if packed is not None else write_message(message, body)


def write_message(message: Message, body: bytes) -> bytes:
    """:func:`encode_message` field by field: the reference of its packed path, and the path
    of messages with properties. Raises ValueError naming the field that does not fit."""
    w = _writer("ADD_MESSAGE_PROTOCOL", message)
    _write_header(w, message)
    return w.raw(body, "body").body()


def decode_message(data: bytes, message_id: int) -> Message:
    """The message of an ADD_MESSAGE_PROTOCOL (45) record whose id is ``message_id``. Raises
    ValueError for a bad body.

    A record of :func:`encode_message`'s packed layout (no properties or string ones: what
    a send writes most, and what a deep queue reads back per delivery) is unpacked in a few
    struct calls (:mod:`store.messaging.packed`); anything else, and anything wrong, goes
    field by field through :func:`read_message`, which names what is wrong. Both give equal
    messages (tested)."""
    if COMPILED_MESSAGE is not None and type(data) is bytes and type(message_id) is int:
        made: Message | None = COMPILED_MESSAGE(
            data, message_id, Message, _ADDRESSES, VERSION, DEFAULT_MESSAGE_TYPE
        )
        if made is not None:
            if len(_ADDRESSES) > _ADDRESSES_KEPT:
                _ADDRESSES.clear()
            return made
    packed = unpack_message(data, message_id)
    return packed if packed is not None else read_message(data, message_id)


#: The compiled path of :func:`decode_message` for a body without properties
#: (``store/_speedups_load.c``'s ``plain_message``: :func:`peek_message`'s checks, then the
#: :class:`Message` made without running its ``__init__``, since they leave nothing for it to
#: check or change), or None. :func:`unpack_message` is its reference (tested equal).
COMPILED_MESSAGE: Callable[..., Any] | None = getattr(SPEEDUPS, "plain_message", None)
#: Decoded address names by their raw bytes, for the compiled path: one str per address, not
#: per message; emptied when it holds more than ``_ADDRESSES_KEPT`` (a store with that many
#: addresses decodes again what it needs).
_ADDRESSES: dict[bytes, str] = {}
_ADDRESSES_KEPT = 4096


def read_message(data: bytes, message_id: int) -> Message:
    """:func:`decode_message` field by field: the reference of its packed path, and the path of
    messages with properties and of Artemis's layout. Raises ValueError naming what is wrong."""
    what = "ADD_MESSAGE_PROTOCOL"
    r = Reader(data, what, _VERSIONS)
    header = _read_header(r, what)
    body = r.raw("body")
    r.done()
    return _message(header, body, what, message_id)


class MessageHeader(NamedTuple):
    """What a load needs of an ADD_MESSAGE_PROTOCOL record before its message is decoded."""

    address: str
    priority: int
    durable: bool
    scheduled_delivery: int


#: The compiled :func:`peek_message` (``store/_speedups_load.c``), or None.
COMPILED_PEEK: Callable[..., Any] | None = getattr(SPEEDUPS, "peek_message", None)


def peek_message(data: bytes, addresses: dict[bytes, str]) -> MessageHeader | None:
    """The header of an ADD_MESSAGE_PROTOCOL (45) body that has no properties, once checked
    that :func:`decode_message` decodes the whole body into a valid :class:`Message` (so it
    can be decoded later, when the message is first used, without an error). ``addresses``
    caches decoded address names (one str per address, not per message). Returns None for a
    body with properties or with anything :func:`decode_message` would refuse: then it
    decides, and names the fault. Raises nothing.

    A load peeks at every message record: where the compiled module is built
    (:data:`~store.speedups.SPEEDUPS`) a ``bytes`` body is peeked at by its ``peek_message``,
    the same checks in C; :func:`python_peek_message` is the reference."""
    if COMPILED_PEEK is not None and type(data) is bytes:
        header: MessageHeader | None = COMPILED_PEEK(data, addresses, MessageHeader, VERSION)
        return header
    return python_peek_message(data, addresses)


def python_peek_message(data: bytes, addresses: dict[bytes, str]) -> MessageHeader | None:
    """:func:`peek_message` in Python: the reference the compiled one is tested against, and
    the fallback. Same arguments and result."""
    n = len(data)
    if n < 5 or data[0] != VERSION:
        return None
    end = 5 + U32.unpack_from(data, 1)[0]
    if end + FIXED.size + 4 > n:
        return None
    raw_address = data[5:end]
    address = addresses.get(raw_address)
    if address is None:
        try:
            address = raw_address.decode("utf-8")
        except UnicodeDecodeError:
            return None
        if not address:
            return None
        addresses[raw_address] = address
    priority, durable, timestamp, expiration, scheduled, count = FIXED.unpack_from(data, end)
    body_at = end + FIXED.size
    if (
        priority > 9
        or durable > 1
        or count != 0
        or timestamp < 0
        or expiration < 0
        or scheduled < 0
        or body_at + 4 + U32.unpack_from(data, body_at)[0] != n
    ):
        return None
    return MessageHeader(address, priority, durable == 1, scheduled)


def encode_large_message(message: Message, body_size: int) -> bytes:
    """The ADD_LARGE_MESSAGE (30) body of ``message`` whose body (``body_size`` bytes) is in
    the large-message store. Raises ValueError when a field does not fit its slot."""
    w = _writer("ADD_LARGE_MESSAGE", message)
    _write_header(w, message)
    return w.i64(body_size, "body_size").body()


def decode_large_message(data: bytes, message_id: int) -> tuple[Message, int]:
    """The message (with an empty inline body) and the stored body size of an
    ADD_LARGE_MESSAGE (30) record whose id is ``message_id``. Raises ValueError for a bad
    body."""
    what = "ADD_LARGE_MESSAGE"
    r = Reader(data, what, _VERSIONS)
    header = _read_header(r, what)
    size = r.i64("body_size")
    r.done()
    if size < 0:
        raise ValueError(f"{what}: body size {size} is negative")
    return _message(header, b"", what, message_id), size


#: A page record's fixed head: version, message id, transaction id, record type, record length;
#: then the record, the queue count (``_PAGED_COUNT``) and the queue ids.
_PAGED_HEAD = struct.Struct(">BqqBI")
_PAGED_COUNT = struct.Struct(">i")
#: The compiled packed path of :meth:`PagedMessage.decode` (``store/_speedups_pages.c``'s
#: ``paged_message``, the same checks; None for a record it leaves to the Python path), or
#: None. The Python path is its reference (tested equal).
COMPILED_PAGED: Callable[..., Any] | None = getattr(SPEEDUPS, "paged_message", None)
#: The compiled packed path of :meth:`PagedMessage.encode` (every paged send), or None.
COMPILED_PAGED_RECORD: Callable[..., bytes | None] | None = getattr(SPEEDUPS, "paged_record", None)

#: :func:`new_paged` compiled (its slots written without the frozen ``__init__``), or None.
COMPILED_NEW_PAGED: Callable[..., Any] | None = getattr(SPEEDUPS, "new_paged", None)


@dataclass(frozen=True, slots=True)
class PagedMessage:
    """A message as a page record: its id, paging transaction (0: none), the type (45 or 30)
    and body of its message record, and the queues it is routed to."""

    message_id: int
    tx_id: int
    record_type: int
    record: bytes
    queue_ids: tuple[int, ...]

    def encode(self) -> bytes:
        """The page record. Raises ValueError when a field does not fit its slot."""
        if self.record_type not in (30, 45):
            raise ValueError(f"a paged message wraps a 45 or 30 record, not {self.record_type}")
        if COMPILED_PAGED_RECORD is not None:  # the packed path below, compiled (tested equal)
            encoded = COMPILED_PAGED_RECORD(
                VERSION, self.message_id, self.tx_id, self.record_type, self.record, self.queue_ids
            )
            if encoded is not None:
                return encoded
        return self.write_packed()

    def write_packed(self) -> bytes:
        """:meth:`encode`'s packed path in Python (the reference of the compiled one); a
        field that does not fit goes through :meth:`write_fields`. Raises ValueError when a
        field does not fit its slot."""
        try:  # packed in one go; a field that does not fit: below
            head = _PAGED_HEAD.pack(
                VERSION, self.message_id, self.tx_id, self.record_type, len(self.record)
            )
            count = len(self.queue_ids)
            tail = _PAGED_COUNT.pack(count) + struct.pack(f">{count}q", *self.queue_ids)
            return b"".join((head, self.record, tail))
        except struct.error:
            return self.write_fields()

    def write_fields(self) -> bytes:
        """:meth:`encode` field by field: the reference of its packed path (tested), and the
        path of a value that does not fit, whose error names the field."""
        w = Writer("PAGED_MESSAGE").i64(self.message_id, "message_id").i64(self.tx_id, "tx_id")
        w.u8(self.record_type, "record_type").raw(self.record, "record")
        w.i32(len(self.queue_ids), "queue count")
        for qid in self.queue_ids:
            w.i64(qid, "queue_id")
        return w.body()

    @classmethod
    def decode(cls, data: bytes, start: int = 0, stop: int | None = None) -> PagedMessage:
        """The paged message of a page record: ``data``, or ``data[start:stop]`` (a record
        read in place from a whole page's bytes, without a copy of it). Raises ValueError
        for a bad record.

        A load reads every paged message once (issue 27: with the global limit, most of a
        deep queue is paged), so a well-formed record is unpacked in two struct calls; any
        other goes through the field-by-field reader, which names what is wrong."""
        if stop is None:
            stop = len(data)
        if COMPILED_PAGED is not None:
            paged: PagedMessage | None = COMPILED_PAGED(data, start, stop, VERSION, cls)
            if paged is not None:
                return paged
        try:
            version, mid, tx_id, kind, length = _PAGED_HEAD.unpack_from(data, start)
            end = start + _PAGED_HEAD.size + length
            (count,) = _PAGED_COUNT.unpack_from(data, end)
        except struct.error:
            return cls._decode_fields(bytes(data[start:stop]))
        if (
            version == VERSION
            and kind in (30, 45)
            and count >= 0
            and stop == end + 4 + 8 * count  # so every read above was within the record
        ):
            queue_ids = struct.unpack_from(f">{count}q", data, end + 4)
            return cls(mid, tx_id, kind, bytes(data[start + _PAGED_HEAD.size : end]), queue_ids)
        return cls._decode_fields(bytes(data[start:stop]))

    @classmethod
    def _decode_fields(cls, data: bytes) -> PagedMessage:
        r = Reader(data, "PAGED_MESSAGE")
        mid, tx_id, kind = r.i64("message_id"), r.i64("tx_id"), r.u8("record_type")
        if kind not in (30, 45):
            raise ValueError(f"PAGED_MESSAGE: record type {kind} is not 45 or 30")
        record = r.raw("record")
        count = r.i32("queue count")
        if count < 0:
            raise ValueError(f"PAGED_MESSAGE: queue count {count} is negative")
        queue_ids = tuple(r.i64("queue_id") for _ in range(count))
        r.done()
        return cls(mid, tx_id, kind, record, queue_ids)

    def message(self) -> Message:
        """The wrapped message (an empty body for a 30 record). Raises ValueError for a bad
        body."""
        if self.record_type == 45:
            return decode_message(self.record, self.message_id)
        return decode_large_message(self.record, self.message_id)[0]


def python_new_paged(
    cls: type[PagedMessage], mid: int, tx_id: int, kind: int, record: bytes, qids: tuple[int, ...]
) -> PagedMessage:
    """``cls(mid, tx_id, kind, record, qids)``: the reference of the compiled
    :func:`new_paged`. Raises nothing."""
    return cls(mid, tx_id, kind, record, qids)


#: The paged message of a send, ``new_paged(PagedMessage, message_id, tx_id, record_type,
#: record, queue_ids)``: the class's own call (``__init__`` sets each frozen field through
#: ``object.__setattr__``: 400 ns a paged send) in one compiled step (tested equal).
new_paged: Callable[[type[PagedMessage], int, int, int, bytes, tuple[int, ...]], PagedMessage] = (
    COMPILED_NEW_PAGED or python_new_paged
)
