"""Decoding journal records into rows of :data:`store.reporting.schemas.RECORDS`, with the
project's own readers and codecs (never a copy): :mod:`store.file.reader` for journal files,
:mod:`store.messaging.records`, :mod:`store.messaging.message_records` and
:mod:`store.messaging.page_records` for the bodies.

These functions run inside Spark's Python workers (``mapInArrow``): they take and give
``pyarrow`` record batches and import nothing of Spark. A body that does not decode is kept,
with the reason in ``error``: a report shows damage, it does not stop at it.

Thread-safety: pure functions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final, Protocol

import pyarrow as pa

from store.file import format as fmt
from store.file.reader import Cursor, marker_of, scan
from store.journal.api import ADD, ADD_TX, UPDATE, UPDATE_TX
from store.messaging import records as r
from store.messaging.message_records import decode_large_message, decode_message
from store.messaging.page_records import (
    ACKNOWLEDGE_CURSOR,
    PAGE_CURSOR_COMPLETE,
    decode_page_record,
)

__all__ = [
    "ARROW_RECORDS",
    "decode_body",
    "decode_file_batches",
    "decode_table_batches",
    "file_records",
]

ARROW_RECORDS: Final = pa.schema(
    [
        ("journal", pa.string()),
        ("seq", pa.int64()),
        ("pos", pa.int64()),
        ("kind", pa.int32()),
        ("id", pa.int64()),
        ("tx_id", pa.int64()),
        ("user_record_type", pa.int32()),
        ("size", pa.int64()),
        ("address", pa.string()),
        ("name", pa.string()),
        ("queue_id", pa.int64()),
        ("timestamp", pa.int64()),
        ("priority", pa.int32()),
        ("body_size", pa.int64()),
        ("large", pa.bool_()),
        ("error", pa.string()),
    ]
)


class _HasQueueId(Protocol):
    @property
    def queue_id(self) -> int: ...


_WITH_BODY: Final = frozenset({ADD, UPDATE, ADD_TX, UPDATE_TX})
_QUEUE_ID_RECORDS: Final[dict[int, Callable[[bytes], _HasQueueId]]] = {
    r.ADD_REF: r.RefRecord.decode,
    r.ACKNOWLEDGE_REF: r.AckRecord.decode,
    r.UPDATE_DELIVERY_COUNT: r.DeliveryCountRecord.decode,
    r.SET_SCHEDULED_DELIVERY_TIME: r.ScheduledTimeRecord.decode,
}


def _messages_body(urt: int, rid: int, data: bytes) -> dict[str, Any]:
    if urt == r.ADD_MESSAGE_PROTOCOL:
        m = decode_message(data, rid)
        body = m.body
        return {
            "address": m.address, "timestamp": m.timestamp, "priority": m.priority,
            "body_size": len(body) if isinstance(body, bytes) else None, "large": False,
        }  # fmt: skip
    if urt == r.ADD_LARGE_MESSAGE:
        m, size = decode_large_message(data, rid)
        return {
            "address": m.address, "timestamp": m.timestamp, "priority": m.priority,
            "body_size": size, "large": True,
        }  # fmt: skip
    decode = _QUEUE_ID_RECORDS.get(urt)
    if decode is not None:
        return {"queue_id": decode(data).queue_id}
    if urt == r.DUPLICATE_ID:
        return {"address": r.DuplicateIdRecord.decode(data).address}
    if urt in (ACKNOWLEDGE_CURSOR, PAGE_CURSOR_COMPLETE):
        return {"queue_id": getattr(decode_page_record(urt, data), "queue_id", None)}
    return {}


def decode_body(journal: str, kind: int, urt: int, rid: int, data: bytes) -> dict[str, Any]:
    """The decoded columns of one record (address, name, queue_id, timestamp, priority,
    body_size, large, error; absent ones are left out). Returns ``{}`` for a record without a
    body or of a type nothing is read from. Raises nothing: a bad body gives ``error``."""
    if kind not in _WITH_BODY:
        return {}
    try:
        if journal == "bindings":
            if urt == r.QUEUE_BINDING_RECORD:
                q = r.QueueRecord.decode(data)
                return {"name": q.name, "address": q.address}
            if urt == r.ADDRESS_BINDING_RECORD:
                return {"address": r.AddressRecord.decode(data).name}
            return {}
        return _messages_body(urt, rid, data)
    except (ValueError, AttributeError) as exc:
        return {"error": f"record {rid} (type {urt}): {exc}"}


def _row(
    journal: str, seq: int, pos: int, kind: int, rid: int, tx_id: int, urt: int, data: bytes
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "journal": journal, "seq": seq, "pos": pos, "kind": kind, "id": rid, "tx_id": tx_id,
        "user_record_type": urt, "size": len(data),
    }  # fmt: skip
    row.update(decode_body(journal, kind, urt, rid, data))
    return row


def file_records(journal: str, path: str, data: bytes) -> list[dict[str, Any]]:
    """The records of one journal file in sequence (file-list markers left out), as RECORDS
    rows ordered by (file id, offset). Returns ``[]`` for a file whose header is zeros (never
    finished). Raises CorruptionError for a damaged header."""
    header = fmt.decode_header(data[: fmt.HEADER_SIZE], path)
    if header is None:
        return []
    rows = []
    for raw in scan(data, header.file_id, Cursor()):
        if marker_of(data, raw) is not None:
            continue
        offset, _length, rtype, urt, _cc, _lsn, rid, tx_id, _txc, body = raw
        rows.append(_row(journal, header.file_id, offset, rtype, rid, tx_id, urt, body))
    return rows


def _batches(rows: Iterable[dict[str, Any]], size: int = 8192) -> Iterator[pa.RecordBatch]:
    chunk: list[dict[str, Any]] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) >= size:
            yield pa.RecordBatch.from_pylist(chunk, schema=ARROW_RECORDS)
            chunk = []
    if chunk:
        yield pa.RecordBatch.from_pylist(chunk, schema=ARROW_RECORDS)


def decode_file_batches(journal: str) -> Any:
    """A ``mapInArrow`` function over Spark's ``binaryFile`` rows (path, content) of
    ``journal``'s files; returns it. What it yields raises CorruptionError for a damaged
    header."""

    def decode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            paths = batch.column("path").to_pylist()
            contents = batch.column("content").to_pylist()
            for path, content in zip(paths, contents, strict=True):
                yield from _batches(file_records(journal, path, content))

    return decode


def decode_table_batches(journal: str) -> Any:
    """A ``mapInArrow`` function over a journal table's rows (id, recordtype, txid,
    userrecordtype, record, seq) of ``journal``; returns it. Raises nothing."""

    def decode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            cols = [
                batch.column(n).to_pylist()
                for n in ("id", "recordtype", "txid", "userrecordtype", "record", "seq")
            ]
            rows = (
                _row(journal, seq, 0, rt, rid, tx, urt, data or b"")
                for rid, rt, tx, urt, data, seq in zip(*cols, strict=True)
            )
            yield from _batches(rows)

    return decode
