"""The packed paths of the ADD_MESSAGE_PROTOCOL (45) record: one ``struct`` call per part
instead of one :class:`~store.messaging.codec.Writer` / ``Reader`` call per field.

A send writes a message without properties, or whose properties are all strings (a STOMP
frame's headers), most of the time, and a deep queue reads every such record back once per
delivery; :func:`pack_message` and :func:`unpack_message` do exactly those, in the layout of
:mod:`store.messaging.message_records` (version 1)::

    u8 version, u32 address length, address, u8 priority, u8 durable, i64 timestamp,
    i64 expiration, i64 scheduled_delivery, i32 property count,
    per property: u32 name length, name, u8 tag 5 (a string), u32 value length, value,
    u32 body length, body                                          (big-endian)

Either answers None for anything else (another property type, Artemis's headers, a value
that does not fit, a bad record), and the field-by-field path of ``message_records`` then
does the work and names what is wrong; tests/messaging/test_records.py checks both give the
same bytes, messages and errors.

Thread-safety: pure functions.
"""

from __future__ import annotations

import struct
from typing import Final

from store.messaging.codec import VERSION
from store.messaging.values import DEFAULT_MESSAGE_TYPE, Message, PropertyValue

__all__ = ["FIXED", "HEAD", "STRING_TAG", "U32", "pack_message", "unpack_message"]

#: The property tag of a string (``message_records``' ``_STR``).
STRING_TAG: Final = 5
_STRING = bytes([STRING_TAG])
U32 = struct.Struct(">I")
#: version u8, address length u32
HEAD = struct.Struct(">BI")
#: priority u8, durable u8, timestamp, expiration, scheduled_delivery i64, property count i32
FIXED = struct.Struct(">BBqqqi")


def pack_message(message: Message, body: bytes) -> bytes | None:
    """The record of ``message`` with ``body`` inline, or None when it is not one this path
    packs (module docstring). Raises nothing."""
    if (
        type(body) is not bytes
        or message.property_types
        or message.user_id is not None
        or message.message_type != DEFAULT_MESSAGE_TYPE
    ):
        return None
    try:
        address = message.address.encode("utf-8")
        properties = message.properties
        fixed = FIXED.pack(
            message.priority,
            1 if message.durable else 0,
            message.timestamp,
            message.expiration,
            message.scheduled_delivery,
            len(properties),
        )
        parts = [HEAD.pack(VERSION, len(address)), address, fixed]
        for name, value in properties.items():
            if type(value) is not str:
                return None
            key, text = name.encode("utf-8"), value.encode("utf-8")
            parts += (U32.pack(len(key)), key, _STRING, U32.pack(len(text)), text)
        parts += (U32.pack(len(body)), body)
        return b"".join(parts)
    except (UnicodeEncodeError, struct.error):
        return None


def unpack_message(data: bytes, message_id: int) -> Message | None:
    """The message of a record in the packed layout, or None for any other record (or a bad
    one). Raises nothing."""
    try:
        version, length = HEAD.unpack_from(data)
        at = HEAD.size + length
        priority, durable, timestamp, expiration, scheduled, count = FIXED.unpack_from(data, at)
        at += FIXED.size
        if version != VERSION or durable > 1 or count < 0:
            return None
        properties: dict[str, PropertyValue] = {}
        for _ in range(count):
            (size,) = U32.unpack_from(data, at)
            end = at + U32.size + size
            if data[end : end + 1] != _STRING:
                return None
            (value_size,) = U32.unpack_from(data, end + 1)
            name = bytes(data[at + U32.size : end]).decode("utf-8")
            at = end + 1 + U32.size + value_size
            if at > len(data) or name in properties:
                return None
            properties[name] = bytes(data[end + 1 + U32.size : at]).decode("utf-8")
        (size,) = U32.unpack_from(data, at)
        at += U32.size
        if at + size != len(data):
            return None
        return Message(
            address=bytes(data[HEAD.size : HEAD.size + length]).decode("utf-8"),
            body=bytes(data[at:]),
            message_id=message_id,
            priority=priority,
            durable=durable == 1,
            timestamp=timestamp,
            expiration=expiration,
            scheduled_delivery=scheduled,
            properties=properties,
        )
    except (struct.error, UnicodeDecodeError, ValueError):
        return None
