"""What a report reads of every message record: :func:`message_summary` (address, timestamp,
priority, body size) and :func:`message_facts` (that, and how a delivery-policy move left the
message), without building the :class:`~store.messaging.values.Message` of a record that has
no properties (one struct unpack); any other record goes through the codecs of
:mod:`store.messaging.message_records`, so results and errors are theirs.

Thread-safety: pure functions.
"""

from __future__ import annotations

import struct
from typing import Final

from store.messaging.codec import VERSION
from store.messaging.message_records import decode_large_message, decode_message
from store.messaging.packed import FIXED, HEAD, U32

__all__ = ["ACTUAL_EXPIRY", "ORIG_ADDRESS", "message_facts", "message_summary"]

#: A large message record's body size, after the fixed part (``packed.FIXED``).
_I64 = struct.Struct(">q")


def _fast_summary(data: bytes, record_type: int) -> tuple[str, int, int, int] | None:
    """:func:`message_summary` of a record without properties whose fields are all valid, in
    one struct unpack; None for any other record (the full decode then reads it)."""
    try:
        version, length = HEAD.unpack_from(data, 0)
        start = HEAD.size + length
        priority, durable, timestamp, expiration, scheduled, count = FIXED.unpack_from(data, start)
        end = start + FIXED.size
        if (
            version == VERSION and length and count == 0 and priority <= 9 and durable <= 1
            and timestamp >= 0 and expiration >= 0 and scheduled >= 0
        ):  # fmt: skip
            address = data[HEAD.size : start].decode("utf-8")
            if record_type == 45:
                (size,) = U32.unpack_from(data, end)
                if end + U32.size + size == len(data):
                    return address, timestamp, priority, size
            elif record_type == 30:
                (size,) = _I64.unpack_from(data, end)
                if end + _I64.size == len(data) and size >= 0:
                    return address, timestamp, priority, size
    except (struct.error, UnicodeDecodeError):
        return None  # the full decode names the problem
    return None


#: Artemis's properties a delivery-policy move gives the message it moves
#: (:mod:`store.messaging.policies`): the address it was sent to, and on an expiry move the
#: time it expired.
ORIG_ADDRESS: Final = "_AMQ_ORIG_ADDRESS"
ACTUAL_EXPIRY: Final = "_AMQ_ACTUAL_EXPIRY"


def message_facts(
    data: bytes, record_type: int, message_id: int
) -> tuple[str, int, int, int, str | None, bool]:
    """:func:`message_summary` and how a delivery-policy move left the message: (address,
    timestamp, priority, body size, origin, expiry move). ``origin`` is its
    ``_AMQ_ORIG_ADDRESS`` when that is text (what a dead-letter or expiry move writes), None
    otherwise; ``expiry move`` is True when it has an origin and ``_AMQ_ACTUAL_EXPIRY`` too
    (the move was an expiry's). What a report reads of every message. Raises ValueError as
    :func:`message_summary`."""
    summary = _fast_summary(data, record_type)
    if summary is not None:  # no properties: never moved
        return summary[0], summary[1], summary[2], summary[3], None, False
    if record_type == 45:
        m = decode_message(data, message_id)
        assert isinstance(m.body, bytes)
        size = len(m.body)
    elif record_type == 30:
        m, size = decode_large_message(data, message_id)
    else:
        raise ValueError(f"user record type {record_type} is not a message record (45 or 30)")
    origin = m.properties.get(ORIG_ADDRESS)
    if not isinstance(origin, str):
        return m.address, m.timestamp, m.priority, size, None, False
    return m.address, m.timestamp, m.priority, size, origin, ACTUAL_EXPIRY in m.properties


def message_summary(data: bytes, record_type: int, message_id: int) -> tuple[str, int, int, int]:
    """(address, timestamp, priority, body size) of an ADD_MESSAGE_PROTOCOL (45) or
    ADD_LARGE_MESSAGE (30) record whose id is ``message_id``, without building the
    :class:`Message` for a record without properties whose fields are valid (read with one
    struct unpack); any other goes through :func:`decode_message` /
    :func:`decode_large_message`, so the result and the errors are theirs. Returns the tuple.
    Raises ValueError for a bad body or another record type."""
    summary = _fast_summary(data, record_type)
    if summary is not None:
        return summary
    address, timestamp, priority, size, _origin, _expiry = message_facts(
        data, record_type, message_id
    )
    return address, timestamp, priority, size
