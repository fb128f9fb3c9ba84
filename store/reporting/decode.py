"""Decoding journal records into rows of :data:`store.reporting.schemas.RECORDS`, with the
project's own readers and codecs (never a copy): :mod:`store.file.reader` for journal files,
:mod:`store.messaging.records`, :mod:`store.messaging.message_records` and
:mod:`store.messaging.page_records` for the bodies.

These functions run inside Spark's Python workers (``mapInArrow``): they take and give
``pyarrow`` record batches and import nothing of Spark. A body that does not decode is kept,
with the reason in ``error``: a report shows damage, it does not stop at it.

Cost: the columns every row has (ids, types, sizes) are handled as whole Arrow arrays; Python
runs only for the bodies something is read from (messages, refs, acks, bindings, page
records), and fills plain column lists (no per-row dict).

Thread-safety: pure functions.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from typing import Any, Final, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from store.file import format as fmt
from store.file.reader import Cursor, marker_of, scan
from store.journal.api import (
    ADD,
    ADD_TX,
    COMMIT,
    DELETE_TX,
    PREPARE,
    ROLLBACK,
    UPDATE,
    UPDATE_TX,
)
from store.messaging import records as r
from store.messaging.message_facts import message_facts
from store.messaging.message_records import PagedMessage
from store.messaging.page_records import (
    ACKNOWLEDGE_CURSOR,
    PAGE_CURSOR_COMPLETE,
    PAGE_TRANSACTION,
    CursorAck,
    PageComplete,
    PageTransaction,
    decode_page_record,
)
from store.paging.format import encoded_size

__all__ = [
    "ARROW_PAGED",
    "ARROW_RECORDS",
    "JVM_ERROR",
    "decode_body",
    "decode_file_batches",
    "decode_table_batches",
    "exact_error",
    "file_records",
    "page_error",
    "paged_records",
    "table_batch",
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
        ("page", pa.int64()),
        ("page_index", pa.int32()),
        ("page_tx_id", pa.int64()),
        ("orig_address", pa.string()),
        ("expiry_move", pa.bool_()),
        ("tx_count", pa.int32()),
        ("tx_seen", pa.int32()),
    ]
)

#: The decoded columns (filled from bodies), in ARROW_RECORDS order.
_DECODED: Final = (
    "address", "name", "queue_id", "timestamp", "priority", "body_size", "large", "error",
    "page", "page_index", "page_tx_id", "orig_address", "expiry_move",
)  # fmt: skip

ARROW_PAGED: Final = pa.schema(
    [
        ("address", pa.string()),
        ("page", pa.int64()),
        ("page_index", pa.int32()),
        ("message_id", pa.int64()),
        ("tx_id", pa.int64()),
        ("queue_ids", pa.list_(pa.field("element", pa.int64(), nullable=False))),
        ("bytes", pa.int64()),
        ("record_bytes", pa.int64()),
        ("large", pa.bool_()),
        ("timestamp", pa.int64()),
        ("orig_address", pa.string()),
        ("expiry_move", pa.bool_()),
        ("page_bytes", pa.int64()),
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
#: User record types of the message journal something is read from.
_MESSAGE_TYPES: Final = frozenset(
    {
        r.ADD_MESSAGE_PROTOCOL, r.ADD_LARGE_MESSAGE, r.DUPLICATE_ID, PAGE_TRANSACTION,
        ACKNOWLEDGE_CURSOR, PAGE_CURSOR_COMPLETE, *_QUEUE_ID_RECORDS,
    }
)  # fmt: skip
_BINDING_TYPES: Final = frozenset({r.QUEUE_BINDING_RECORD, r.ADDRESS_BINDING_RECORD})


def _messages_body(kind: int, urt: int, rid: int, data: bytes) -> dict[str, Any]:
    if urt == r.ADD_MESSAGE_PROTOCOL or urt == r.ADD_LARGE_MESSAGE:
        address, timestamp, priority, size, origin, expiry = message_facts(data, urt, rid)
        return {
            "address": address, "timestamp": timestamp, "priority": priority,
            "body_size": size, "large": urt == r.ADD_LARGE_MESSAGE, "orig_address": origin,
            "expiry_move": expiry,
        }  # fmt: skip
    decode = _QUEUE_ID_RECORDS.get(urt)
    if decode is not None:
        return {"queue_id": decode(data).queue_id}
    if urt == r.DUPLICATE_ID:
        return {"address": r.DuplicateIdRecord.decode(data).address}
    if urt == ACKNOWLEDGE_CURSOR:
        ack = decode_page_record(urt, data)
        assert isinstance(ack, CursorAck)
        return {"queue_id": ack.queue_id, "page": ack.page, "page_index": ack.index}
    if urt == PAGE_CURSOR_COMPLETE:
        done = decode_page_record(urt, data)
        assert isinstance(done, PageComplete)
        return {"queue_id": done.queue_id, "page": done.page}
    if urt == PAGE_TRANSACTION and kind in (ADD, ADD_TX):  # the update form names no tx
        tx = decode_page_record(urt, data)
        assert isinstance(tx, PageTransaction)
        return {"page_tx_id": tx.transaction_id}
    return {}


def decode_body(journal: str, kind: int, urt: int, rid: int, data: bytes) -> dict[str, Any]:
    """The decoded columns of one record (address, name, queue_id, timestamp, priority,
    body_size, large, error, page, page_index, page_tx_id, orig_address, expiry_move; absent
    ones are left out). Returns
    ``{}`` for a record without a body or of a type nothing is read from. Raises nothing: a
    bad body gives ``error``."""
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
        return _messages_body(kind, urt, rid, data)
    except (ValueError, AttributeError) as exc:
        return {"error": f"record {rid} (type {urt}): {exc}"}


#: How the JVM decoder (:mod:`store.reporting.jvm`) starts the ``error`` of a body that does
#: not decode; the body follows, base64-encoded (:func:`exact_error`).
JVM_ERROR: Final = "\x00jvm:"


def exact_error(journal: str, kind: int, urt: int, rid: int, error: str) -> str:
    """``error`` of a RECORDS row in the Python decode's words: an error from the JVM decoder
    (:data:`JVM_ERROR` + the body) is decoded again here, so whichever decoder read a damaged
    record, a report names it as ``store data verify`` does; any other is returned as is.
    Raises nothing."""
    if not error.startswith(JVM_ERROR):
        return error
    try:
        body = base64.b64decode(error[len(JVM_ERROR) :], validate=True)
    except ValueError:
        return f"record {rid} (type {urt}): undecodable (the JVM decoder's error is damaged)"
    again = decode_body(journal, kind, urt, rid, body).get("error")
    # Never None while the two decoders agree (tests/reporting/test_jvm_decode.py); if they
    # ever do not, the record is still reported, in words that say which one refused it.
    return again or f"record {rid} (type {urt}): the JVM decoder refused it, Python's did not"


def _decoded_columns(
    journal: str, kinds: list[int], urts: list[int], ids: list[int], bodies: list[Any]
) -> dict[str, list[Any]]:
    """The decoded columns of rows given as lists (``bodies``: bytes, or None for none); only
    the rows of a type something is read from go through :func:`decode_body`."""
    n = len(kinds)
    cols: dict[str, list[Any]] = {c: [None] * n for c in _DECODED}
    wanted = _BINDING_TYPES if journal == "bindings" else _MESSAGE_TYPES
    messages = journal == "messages"
    address, timestamp, priority = cols["address"], cols["timestamp"], cols["priority"]
    body_size, large, error = cols["body_size"], cols["large"], cols["error"]
    origin, expiry = cols["orig_address"], cols["expiry_move"]
    for i in range(n):
        urt = urts[i]
        if urt not in wanted or kinds[i] not in _WITH_BODY:
            continue
        if messages and (urt == r.ADD_MESSAGE_PROTOCOL or urt == r.ADD_LARGE_MESSAGE):
            # most rows of a journal: the columns filled here, no dict per row
            try:
                facts = message_facts(bodies[i] or b"", urt, ids[i])
            except ValueError as exc:
                error[i] = f"record {ids[i]} (type {urt}): {exc}"
                continue
            address[i], timestamp[i], priority[i], body_size[i], origin[i], expiry[i] = facts
            large[i] = urt == r.ADD_LARGE_MESSAGE
            continue
        for column, value in decode_body(journal, kinds[i], urt, ids[i], bodies[i] or b"").items():
            cols[column][i] = value
    return cols


def _batch(fixed: dict[str, Any], decoded: dict[str, list[Any]], n: int) -> pa.RecordBatch:
    arrays = []
    for f in ARROW_RECORDS:
        value = fixed.get(f.name, decoded.get(f.name))
        if value is None:
            arrays.append(pa.nulls(n, f.type))
        elif isinstance(value, (pa.Array, pa.ChunkedArray)):
            arrays.append(value.cast(f.type))
        else:
            arrays.append(pa.array(value, f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_RECORDS)


def file_records(journal: str, path: str, data: bytes) -> pa.RecordBatch | None:
    """The records of one journal file in sequence (file-list markers left out), as one
    batch of ARROW_RECORDS rows ordered by (file id, offset). A prepare or commit carries the
    transaction's record count it states (``tx_count``) and the count this file holds since
    the id's last end (``tx_seen``), as :func:`store.file.reader.replay_file` compares them.
    Returns None for a file whose header is zeros (never finished). Raises CorruptionError
    for a damaged header."""
    header = fmt.decode_header(data[: fmt.HEADER_SIZE], path)
    if header is None:
        return None
    pos: list[int] = []
    kinds: list[int] = []
    ids: list[int] = []
    txs: list[int] = []
    urts: list[int] = []
    bodies: list[bytes] = []
    tx_count: list[int | None] = []
    tx_seen: list[int | None] = []
    in_file: dict[int, int] = {}  # tx id -> its records in this file since it last ended
    for raw in scan(data, header.file_id, Cursor()):
        if marker_of(data, raw) is not None:
            continue
        offset, _length, rtype, urt, _cc, _lsn, rid, tx_id, txc, body = raw
        count: int | None = None
        seen: int | None = None
        if rtype in (ADD_TX, UPDATE_TX, DELETE_TX):
            in_file[tx_id] = in_file.get(tx_id, 0) + 1
        elif rtype == PREPARE:
            count, seen = txc, in_file.get(tx_id, 0)
            if seen != count:
                in_file.pop(tx_id, None)  # a torn prepare ends this use of the id
        elif rtype == COMMIT:
            count, seen = txc, in_file.pop(tx_id, 0)
        elif rtype == ROLLBACK:
            in_file.pop(tx_id, None)
        pos.append(offset)
        kinds.append(rtype)
        ids.append(rid)
        txs.append(tx_id)
        urts.append(urt)
        bodies.append(body)
        tx_count.append(count)
        tx_seen.append(seen)
    n = len(kinds)
    fixed = {
        "journal": pa.repeat(pa.scalar(journal, pa.string()), n), "seq": [header.file_id] * n,
        "pos": pos, "kind": kinds, "id": ids, "tx_id": txs, "user_record_type": urts,
        "size": [len(b) for b in bodies], "tx_count": tx_count, "tx_seen": tx_seen,
    }  # fmt: skip
    return _batch(fixed, _decoded_columns(journal, kinds, urts, ids, bodies), n)


def decode_file_batches(journal: str) -> Any:
    """A ``mapInArrow`` function over Spark's ``binaryFile`` rows (path, content) of
    ``journal``'s files; returns it. What it yields raises CorruptionError for a damaged
    header."""

    def decode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            paths = batch.column("path").to_pylist()
            contents = batch.column("content").to_pylist()
            for path, content in zip(paths, contents, strict=True):
                out = file_records(journal, path, content)
                if out is not None and out.num_rows:
                    yield out

    return decode


def table_batch(journal: str, batch: pa.RecordBatch) -> pa.RecordBatch:
    """ARROW_RECORDS rows of a batch of a journal table's rows (id, recordtype, txid,
    userrecordtype, record, seq). Returns the batch. Raises nothing."""
    n = batch.num_rows
    record = batch.column("record")
    urt = batch.column("userrecordtype").fill_null(-1)
    kind = batch.column("recordtype")
    # Only rows with a body something is read from reach Python.
    wanted = _BINDING_TYPES if journal == "bindings" else _MESSAGE_TYPES
    mask = pc.and_(
        pc.is_in(urt, pa.array(sorted(wanted), urt.type)),
        pc.is_in(kind, pa.array(sorted(_WITH_BODY), kind.type)),
    )
    rows = pc.indices_nonzero(mask)
    decoded: dict[str, list[Any]] = {c: [None] * n for c in _DECODED}
    if len(rows):
        picked = pc.take(batch, rows)
        sub = _decoded_columns(
            journal,
            picked.column("recordtype").to_pylist(),
            picked.column("userrecordtype").to_pylist(),
            picked.column("id").to_pylist(),
            picked.column("record").to_pylist(),
        )
        for i, row in enumerate(rows.to_pylist()):
            for column, values in sub.items():
                value = values[i]
                if value is not None:
                    decoded[column][row] = value
    fixed = {
        "journal": pa.repeat(pa.scalar(journal, pa.string()), n),
        "seq": batch.column("seq"), "pos": pa.repeat(pa.scalar(0, pa.int64()), n),
        "kind": kind, "id": batch.column("id"), "tx_id": batch.column("txid"),
        "user_record_type": urt, "size": pc.fill_null(pc.binary_length(record), 0),
    }  # fmt: skip
    return _batch(fixed, decoded, n)


def decode_table_batches(journal: str) -> Any:
    """A ``mapInArrow`` function over a journal table's rows (id, recordtype, txid,
    userrecordtype, record, seq) of ``journal``; returns it. Raises nothing."""

    def decode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield table_batch(journal, batch)

    return decode


def paged_records(address: str, page: int, records: list[bytes]) -> pa.RecordBatch:
    """ARROW_PAGED rows of the records of one page of ``address`` (payloads in page order,
    as :func:`store.paging.format.decode_page` gives them), decoded with
    :meth:`~store.messaging.message_records.PagedMessage.decode`. Returns the batch. Raises
    nothing: a record that does not decode gives ``error``."""
    cols: dict[str, list[Any]] = {f.name: [] for f in ARROW_PAGED}
    for index, raw in enumerate(records):
        values: dict[str, Any] = {"address": address, "page": page, "page_index": index,
                                  "page_bytes": encoded_size(len(raw))}  # fmt: skip
        try:
            paged = PagedMessage.decode(raw)
            stored = len(paged.record)
            large = paged.record_type == r.ADD_LARGE_MESSAGE
            _address, timestamp, _priority, body_size, origin, expiry = message_facts(
                paged.record, paged.record_type, paged.message_id
            )
            if large:
                stored += body_size
            values.update(
                message_id=paged.message_id, tx_id=paged.tx_id, queue_ids=list(paged.queue_ids),
                bytes=stored, record_bytes=len(paged.record), large=large, timestamp=timestamp,
                orig_address=origin, expiry_move=expiry,
            )  # fmt: skip
        except ValueError as exc:
            values["error"] = f"page {page} record {index}: {exc}"
        for name, column in cols.items():
            column.append(values.get(name))
    return pa.RecordBatch.from_pydict(cols, schema=ARROW_PAGED)


def page_error(address: str, page: int, exc: Exception) -> pa.RecordBatch:
    """One ARROW_PAGED row saying page ``page`` of ``address`` did not decode at all
    (``page_index`` -1, no bytes, ``error`` the reason): the report's damage check finds it
    there instead of in a failed Spark task. Returns the batch. Raises nothing."""
    cols: dict[str, list[Any]] = {f.name: [None] for f in ARROW_PAGED}
    cols.update(address=[address], page=[page], page_index=[-1], page_bytes=[0],
                error=[f"page {page}: {exc}"])  # fmt: skip
    return pa.RecordBatch.from_pydict(cols, schema=ARROW_PAGED)
