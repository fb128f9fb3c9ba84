"""Decoding journal records and page records for ``store data print``: user record types by
name (Artemis's numbers, reference §3.1) and the decoded body of every record the storage
manager writes (:mod:`store.messaging.records`, :mod:`~store.messaging.message_records`,
:mod:`~store.messaging.page_records`).

A body that does not decode is never an exception here: :func:`decode_user_record` returns a
:class:`Decoded` whose ``error`` says why (the caller shows the raw bytes beside it).

``safe`` (``--safe``) keeps the structure and drops the payloads: no message body, no
property values (their types stay), no duplicate-id bytes (their length stays).

Field values are ``None``, ``bool``, ``int``, ``float``, ``str``, ``bytes``, lists and dicts
of those; bytes are the formatter's business (hex or base64 prefix, see
:mod:`store.cli.data.printing`).

Thread-safety: pure functions over immutable values.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Any, Final

from store.data.describe.model import Decoded
from store.journal.api import RecordType
from store.messaging import message_records as mr
from store.messaging import page_records as pr
from store.messaging import records as rr
from store.messaging.values import Message

__all__ = [
    "USER_RECORD_TYPES",
    "decode_paged_message",
    "decode_user_record",
    "user_type_name",
]

#: Every user record type of Artemis's journals (reference §3.1), by id. The store writes
#: 21, 24, 44 (bindings) and 30, 32-37, 39-43, 45 (messages); the others are named so that a
#: record of them is recognised, and are shown raw.
USER_RECORD_TYPES: Final[dict[int, str]] = {
    20: "GROUP_RECORD",
    21: "QUEUE_BINDING_RECORD",
    22: "QUEUE_STATUS_RECORD",
    24: "ID_COUNTER_RECORD",
    25: "ADDRESS_SETTING_RECORD",
    26: "SECURITY_SETTING_RECORD",
    27: "DIVERT_RECORD",
    28: "BRIDGE_RECORD",
    29: "ADD_LARGE_MESSAGE_PENDING",
    30: "ADD_LARGE_MESSAGE",
    31: "ADD_MESSAGE",
    32: "ADD_REF",
    33: "ACKNOWLEDGE_REF",
    34: "UPDATE_DELIVERY_COUNT",
    35: "PAGE_TRANSACTION",
    36: "SET_SCHEDULED_DELIVERY_TIME",
    37: "DUPLICATE_ID",
    38: "HEURISTIC_COMPLETION",
    39: "ACKNOWLEDGE_CURSOR",
    40: "PAGE_CURSOR_COUNTER_VALUE",
    41: "PAGE_CURSOR_COUNTER_INC",
    42: "PAGE_CURSOR_COMPLETE",
    43: "PAGE_CURSOR_PENDING_COUNTER",
    44: "ADDRESS_BINDING_RECORD",
    45: "ADD_MESSAGE_PROTOCOL",
    46: "ADDRESS_STATUS_RECORD",
    47: "USER_RECORD",
    48: "ROLE_RECORD",
    49: "ADD_MESSAGE_BODY",
    50: "KEY_VALUE_PAIR_RECORD",
    51: "CONNECTOR_RECORD",
    52: "ADDRESS_SETTING_RECORD_JSON",
    53: "ACK_RETRY",
}

# Journal operations that carry no user record (the user type is 0 or -1 there).
_NO_USER_RECORD: Final = frozenset(
    {RecordType.DELETE, RecordType.DELETE_TX, RecordType.COMMIT, RecordType.ROLLBACK}
)
_UPDATES: Final = frozenset({RecordType.UPDATE, RecordType.UPDATE_TX})


def user_type_name(user_type: int) -> str:
    """Artemis's name of ``user_type`` (``USER_TYPE_<n>`` for an unknown one). Raises nothing."""
    return USER_RECORD_TYPES.get(user_type, f"USER_TYPE_{user_type}")


def decode_user_record(
    op: int, user_type: int, body: bytes, record_id: int, *, safe: bool = False
) -> Decoded | None:
    """The decoded body of a journal record of operation ``op`` (a
    :class:`~store.journal.api.RecordType`) and ``user_type``, or None for a record that
    carries no user record (deletes, commits, rollbacks, events). A PREPARE decodes its XID.
    Returns a :class:`Decoded` (with ``error`` set when the body does not decode). Raises
    nothing."""
    if op == RecordType.PREPARE:
        return _guard("XID", lambda: _xid_fields(body))
    if op in _NO_USER_RECORD or op == RecordType.EVENT:
        return None
    name = user_type_name(user_type)
    decoder = _DECODERS.get(user_type)
    if decoder is None:
        return Decoded(name, {}, "no decoder: the store never writes this user record type")
    return _guard(name, lambda: decoder(body, record_id, op in _UPDATES, safe))


def decode_paged_message(payload: bytes, *, safe: bool = False) -> Decoded:
    """The decoded paged message of one page record (``PAGED_MESSAGE``: message id, paging
    transaction, queues, and the message). Returns a :class:`Decoded`; raises nothing."""
    return _guard("PAGED_MESSAGE", lambda: _paged_fields(payload, safe))


def _guard(name: str, work: Any) -> Decoded:
    try:
        return Decoded(name, work())
    except (ValueError, struct.error, UnicodeDecodeError, OverflowError) as exc:
        return Decoded(name, {}, str(exc) or type(exc).__name__)


def _xid_fields(body: bytes) -> dict[str, Any]:
    xid = rr.decode_xid(body)
    return {
        "format_id": xid.format_id,
        "global_transaction_id": xid.global_transaction_id,
        "branch_qualifier": xid.branch_qualifier,
    }


def message_fields(message: Message, body_size: int, *, safe: bool) -> dict[str, Any]:
    """The fields shown of ``message`` (whose stored body is ``body_size`` bytes): header,
    ``properties`` (name -> value, or name -> type name when ``safe``), ``property_types``
    (name -> ``null``, ``bool``, ``int``, ``float``, ``str`` or ``bytes``; not when ``safe``),
    and the inline body unless ``safe``. Raises nothing."""
    out: dict[str, Any] = {
        "address": message.address,
        "priority": message.priority,
        "durable": message.durable,
        "timestamp": message.timestamp,
        "expiration": message.expiration,
        "scheduled_delivery": message.scheduled_delivery,
    }
    types = {k: _type_of(v) for k, v in message.properties.items()}
    if safe:
        out["properties"] = types
    else:
        out["properties"] = dict(message.properties)
        out["property_types"] = types  # bytes and str both become text in JSON
    out["body_size"] = body_size
    if not safe and isinstance(message.body, bytes) and message.body:
        out["body"] = message.body
    return out


def _type_of(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _message(body: bytes, record_id: int, _update: bool, safe: bool) -> dict[str, Any]:
    m = mr.decode_message(body, record_id)
    assert isinstance(m.body, bytes)
    return message_fields(m, len(m.body), safe=safe)


def _large_message(body: bytes, record_id: int, _update: bool, safe: bool) -> dict[str, Any]:
    m, size = mr.decode_large_message(body, record_id)
    fields = message_fields(m, size, safe=safe)
    fields["large"] = True
    return fields


def _address(body: bytes, _id: int, _update: bool, _safe: bool) -> dict[str, Any]:
    a = rr.AddressRecord.decode(body)
    return {"name": a.name, "routing_types": list(a.routing_types)}


def _queue(body: bytes, _id: int, _update: bool, _safe: bool) -> dict[str, Any]:
    q = rr.QueueRecord.decode(body)
    return {
        "name": q.name,
        "address": q.address,
        "routing_type": q.routing_type,
        "filter": q.filter,
    }


def _id_counter(body: bytes, _id: int, _update: bool, _safe: bool) -> dict[str, Any]:
    return {"next_id": rr.IdCounterRecord.decode(body).next_id}


def _ref(body: bytes, _id: int, _update: bool, _safe: bool) -> dict[str, Any]:
    return {"queue_id": rr.RefRecord.decode(body).queue_id}


def _ack(body: bytes, _id: int, _update: bool, _safe: bool) -> dict[str, Any]:
    return {"queue_id": rr.AckRecord.decode(body).queue_id}


def _delivery_count(body: bytes, _id: int, _update: bool, _safe: bool) -> dict[str, Any]:
    r = rr.DeliveryCountRecord.decode(body)
    return {"queue_id": r.queue_id, "count": r.count}


def _scheduled(body: bytes, _id: int, _update: bool, _safe: bool) -> dict[str, Any]:
    r = rr.ScheduledTimeRecord.decode(body)
    return {"queue_id": r.queue_id, "time": r.time}


def _duplicate(body: bytes, _id: int, _update: bool, safe: bool) -> dict[str, Any]:
    r = rr.DuplicateIdRecord.decode(body)
    out: dict[str, Any] = {"address": r.address, "dup_id_size": len(r.dup_id)}
    if not safe:
        out["dup_id"] = r.dup_id
    return out


def _page_record(user_type: int) -> Any:
    def decode(body: bytes, _id: int, update: bool, _safe: bool) -> dict[str, Any]:
        record = pr.decode_page_record(user_type, body, update=update)
        fields: dict[str, Any] = {"record": type(record).__name__}
        for f in dataclasses.fields(record):
            fields[f.name] = getattr(record, f.name)
        return fields

    return decode


def _paged_fields(payload: bytes, safe: bool) -> dict[str, Any]:
    paged = mr.PagedMessage.decode(payload)
    if paged.record_type == rr.ADD_MESSAGE_PROTOCOL:
        fields = _message(paged.record, paged.message_id, False, safe)
    else:
        fields = _large_message(paged.record, paged.message_id, False, safe)
    return {
        "message_id": paged.message_id,
        "tx_id": paged.tx_id,
        "record_type": user_type_name(paged.record_type),
        "queue_ids": list(paged.queue_ids),
        **fields,
    }


_DECODERS: Final[dict[int, Any]] = {
    rr.ADDRESS_BINDING_RECORD: _address,
    rr.QUEUE_BINDING_RECORD: _queue,
    rr.ID_COUNTER_RECORD: _id_counter,
    rr.ADD_MESSAGE_PROTOCOL: _message,
    rr.ADD_LARGE_MESSAGE: _large_message,
    rr.ADD_REF: _ref,
    rr.ACKNOWLEDGE_REF: _ack,
    rr.UPDATE_DELIVERY_COUNT: _delivery_count,
    rr.SET_SCHEDULED_DELIVERY_TIME: _scheduled,
    rr.DUPLICATE_ID: _duplicate,
    **{t: _page_record(t) for t in (35, 39, 40, 41, 42, 43)},
}
