"""The large-message store as a report reads it (issue 28): every body it holds, with the
bytes really stored, decoded with the store's own formats (:mod:`store.large.files`,
:mod:`store.large.database`, :mod:`store.large.chunks`), as
:data:`~store.reporting.schemas.LARGE_BODIES` rows, one per body:

- ``message_id``; ``size``: the body size its header (file) or descriptor row (table) says,
  null when there is no valid one; ``stored_bytes``: the chunk payload bytes really there
  (a truncated file's partial last chunk counted as far as it goes; a ``.tmp`` file's, whose
  header is not written yet, counted in chunks of the default size); ``chunks``: the chunk
  frames or rows there in whole;
- ``complete``: the body reads back as the store reads it (``LargeMessageStore.open`` and a
  read to the end: header or descriptor valid, every chunk there, of its length, passing its
  checksum); ``error``: why not, naming the file or ``<table>/<id>.msg`` as the store does.

A damaged or incomplete body is a row saying so, never a failed report: the report shows it
beside the record that names it (``large_messages/``, :func:`store.reporting.jobs
.large_messages`). Incomplete bodies are listed too (a ``<id>.tmp`` file, chunk rows without
a descriptor): what the store's open deletes, the writer having died.

Files: each ``<id>.msg`` / ``<id>.tmp`` file of the folder is one row, decoded in one task
(:func:`file_body`, ``mapInArrow`` over Spark's ``binaryFile``). Tables: each row is decoded
on its own (:func:`table_body_rows`: its name, payload length and checksums), and the rows of
a body are put together by Spark (:func:`bodies_of_rows`), so no task holds a body. A row
whose name says no body (NULL, not ours) is left out: the store's open refuses the table
(``store data verify`` names it).

Thread-safety: pure functions; the decoders run in Spark's Python workers.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final

import pyarrow as pa

from store.errors import CorruptionError
from store.large.chunks import (
    CHUNK_SIZE,
    CRC,
    ChunkedBody,
    chunk_count,
    chunk_length,
    frame_seed,
    open_body,
)
from store.large.database import (
    CHUNK_EXTENSION,
    decode_descriptor,
    msg_name,
    parse_row_name,
)
from store.large.files import HEADER, HEADER_SIZE, MSG, TMP, check_header, frame_offset
from store.speedups import crc32

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = [
    "ARROW_BODIES",
    "ARROW_BODY_ROWS",
    "bodies_of_rows",
    "decode_file_bodies",
    "file_body",
    "table_body_rows",
]

ARROW_BODIES: Final = pa.schema(
    [
        ("message_id", pa.int64()),
        ("size", pa.int64()),
        ("stored_bytes", pa.int64()),
        ("chunks", pa.int64()),
        ("complete", pa.bool_()),
        ("error", pa.string()),
    ]
)

#: One row of a large-message table, decoded on its own: whose (``message_id``, null for a
#: row whose name says no body), which chunk (-1: the descriptor), its payload length, whether
#: its checksum holds as version 1 / version 2 wrote it, a descriptor's fields, and ``error``
#: (a descriptor that does not decode, a ``data`` that is not bytes).
ARROW_BODY_ROWS: Final = pa.schema(
    [
        ("message_id", pa.int64()),
        ("chunk", pa.int64()),
        ("payload", pa.int64()),
        ("crc_v1", pa.bool_()),
        ("crc_v2", pa.bool_()),
        ("chunk_size", pa.int64()),
        ("body_size", pa.int64()),
        ("chunk_count", pa.int64()),
        ("version", pa.int32()),
        ("error", pa.string()),
    ]
)

_READ: Final = 1 << 20


def _present(file_size: int, chunk_size: int, body_size: int | None) -> tuple[int, int]:
    """(payload bytes, whole frames) a file of ``file_size`` holds; ``body_size`` None: as
    many chunks as the file has bytes for (a ``.tmp`` file's header is not written yet)."""
    stored = whole = 0
    k = 0
    while True:
        start = frame_offset(k, chunk_size) + CRC.size
        if start > file_size or (body_size is not None and k * chunk_size >= body_size):
            return stored, whole
        limit = chunk_size if body_size is None else chunk_length(k, body_size, chunk_size)
        got = min(limit, file_size - start)
        if body_size is None and got <= 0:
            return stored, whole
        stored += got
        whole += got == limit
        k += 1


def file_body(path: str, content: bytes) -> dict[str, Any] | None:
    """The LARGE_BODIES row of the file at ``path`` (``content``: its bytes), or None for a
    file that is not a body (its name is not ``<id>.msg`` or ``<id>.tmp``). Raises nothing."""
    name = os.path.basename(path)
    stem, ext = os.path.splitext(name)
    if ext not in (MSG, TMP):
        return None
    try:
        message_id = int(stem)
    except ValueError:
        return None
    raw = HEADER.unpack_from(content) if len(content) >= HEADER.size else None
    chunk_size = raw[3] if raw is not None and raw[3] >= 1 else CHUNK_SIZE
    if ext == TMP:
        stored, whole = _present(len(content), chunk_size, None)
        reason = "an incomplete body: its writer never completed (the store's open deletes it)"
        return _body(message_id, None, stored, whole, f"{path}: {reason}")
    body_size = raw[4] if raw is not None else 0
    stored, whole = _present(len(content), chunk_size, body_size)
    try:
        header = check_header(path, message_id, content[:HEADER_SIZE], len(content))
    except CorruptionError as exc:
        return _body(message_id, _header_size(path, message_id, content), stored, whole, str(exc))
    view = memoryview(content)

    def fetch(index: int) -> memoryview:
        offset = frame_offset(index, header.chunk_size)
        return view[offset : offset + CRC.size + chunk_length(index, body_size, chunk_size)]

    raw_body = ChunkedBody(path=path, size=header.body_size, chunk_size=header.chunk_size,
                           fetch=fetch, message_id=header.frame_key)  # fmt: skip
    try:
        with open_body(raw_body) as body:
            while body.read(_READ):
                pass
    except CorruptionError as exc:
        return _body(message_id, header.body_size, stored, whole, str(exc))
    return _body(message_id, header.body_size, stored, whole, None)


def _header_size(path: str, message_id: int, content: bytes) -> int | None:
    """The body size a file's header says when the header itself is valid (the file may be
    truncated), else None."""
    if len(content) < HEADER_SIZE:
        return None
    _magic, _version, _reserved, chunk_size, body_size, _id = HEADER.unpack_from(content)
    whole = HEADER_SIZE + CRC.size * chunk_count(body_size, max(chunk_size, 1)) + body_size
    try:
        return check_header(path, message_id, content[:HEADER_SIZE], whole).body_size
    except CorruptionError:
        return None


def _body(
    message_id: int, size: int | None, stored: int, chunks: int, error: str | None
) -> dict[str, Any]:
    return {"message_id": message_id, "size": size, "stored_bytes": stored, "chunks": chunks,
            "complete": error is None, "error": error}  # fmt: skip


def decode_file_bodies(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` function: binaryFile rows (``path``, ``content``) to ARROW_BODIES rows
    (:func:`file_body`), one file at a time. Raises nothing."""
    for batch in batches:
        paths, contents = batch.column("path"), batch.column("content")
        rows = []
        for i in range(batch.num_rows):
            local = str(paths[i].as_py()).removeprefix("file:")
            row = file_body(local, contents[i].as_py() or b"")
            if row is not None:
                rows.append(row)
        if rows:
            yield pa.RecordBatch.from_pylist(rows, schema=ARROW_BODIES)


def _table_row(table: str, rid: Any, filename: Any, extension: Any, data: Any) -> dict[str, Any]:
    try:
        name = parse_row_name(table, rid, filename, extension)
    except CorruptionError as exc:
        return {"message_id": None, "error": str(exc)}
    mid = name.message_id
    row: dict[str, Any] = {"message_id": mid, "chunk": name.chunk}
    path = f"{table}/{msg_name(mid)}"
    if name.extension != CHUNK_EXTENSION:
        try:
            d = decode_descriptor(path, mid, data)
        except CorruptionError as exc:
            return {**row, "error": f"{path}: row id {rid}: {exc.reason}"}
        return {**row, "chunk_size": d.chunk_size, "body_size": d.body_size,
                "chunk_count": d.chunk_count, "version": d.version}  # fmt: skip
    if not isinstance(data, bytes | bytearray | memoryview) or len(data) < CRC.size:
        return {**row, "payload": 0, "crc_v1": False, "crc_v2": False}
    payload = memoryview(data)[CRC.size :]
    (stored,) = CRC.unpack_from(data)
    v2 = crc32(payload, frame_seed(mid, name.chunk)) == stored
    return {**row, "payload": len(payload), "crc_v2": v2, "crc_v1": crc32(payload) == stored}


def table_body_rows(table: str) -> Any:
    """``mapInArrow`` function: rows of large-message table ``table`` (``id``, ``filename``,
    ``extension``, ``data``, lower-case names) to ARROW_BODY_ROWS, each on its own. Raises
    nothing."""

    def decode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            cols = [batch.column(n) for n in ("id", "filename", "extension", "data")]
            rows = [_table_row(table, *(c[i].as_py() for c in cols)) for i in range(len(batch))]
            if rows:
                yield pa.RecordBatch.from_pylist(rows, schema=ARROW_BODY_ROWS)

    return decode


def bodies_of_rows(rows: DataFrame, table: str) -> DataFrame:
    """LARGE_BODIES of ARROW_BODY_ROWS ``rows`` (:func:`table_body_rows`): the rows of each
    body put together, checked as ``DatabaseLargeMessages.open`` and a read check them (one
    valid descriptor; chunks 0..n-1 each once, of its length, with its checksum). Returns a
    lazy DataFrame. Raises nothing until an action runs."""
    from pyspark.sql import functions as F

    from store.reporting import schemas

    owned = rows.filter(F.col("message_id").isNotNull())
    desc = (
        owned.filter(F.col("chunk") == -1)
        .groupBy("message_id")
        .agg(
            F.count("*").alias("descriptors"),
            *(F.first(c).alias(c) for c in ("chunk_size", "body_size", "chunk_count", "version")),
            F.first("error", ignorenulls=True).alias("desc_error"),
        )
    )
    c = F.col
    expected = F.greatest(
        F.least(c("chunk_size"), c("body_size") - c("chunk") * c("chunk_size")), F.lit(0)
    )
    sound = (
        (c("chunk") < c("chunk_count"))
        & (c("payload") == expected)
        & F.when(c("version") == 1, c("crc_v1")).otherwise(c("crc_v2"))
    )
    chunks = (
        owned.filter(c("chunk") >= 0)
        .select("message_id", "chunk", "payload", "crc_v1", "crc_v2")
        .join(
            desc.select("message_id", "chunk_size", "body_size", "chunk_count", "version"),
            "message_id",
            "left",
        )
        .groupBy("message_id")
        .agg(
            F.count("*").alias("chunks"),
            F.countDistinct("chunk").alias("distinct"),
            F.sum("payload").alias("stored_bytes"),
            F.min(F.when(~F.coalesce(sound, F.lit(False)), c("chunk"))).alias("bad"),
        )
    )
    both = desc.join(chunks, "message_id", "full")
    path = F.concat(F.lit(f"{table}/"), c("message_id").cast("string"), F.lit(".msg: "))
    error = (
        F.when(c("descriptors").isNull(), F.lit(
            "no descriptor row: an incomplete body, its writer never completed (the store's "
            "open deletes its rows)"))
        .when(c("descriptors") > 1, F.concat(c("descriptors").cast("string"),
                                             F.lit(" descriptor rows")))
        .when(c("desc_error").isNotNull(), c("desc_error"))
        .when(c("bad").isNotNull(), F.concat(F.lit("chunk "), c("bad").cast("string"),
              F.lit(" has the wrong length or fails its checksum: damaged, or a chunk of "
                    "another place or body")))
        .when(F.coalesce(c("chunks"), F.lit(0)) != c("chunk_count"), F.concat(
            F.lit("holds "), F.coalesce(c("chunks"), F.lit(0)).cast("string"), F.lit(" of "),
            c("chunk_count").cast("string"), F.lit(" chunks")))
        .when(c("distinct") != c("chunks"), F.lit("a chunk has several rows"))
    )  # fmt: skip
    valid = c("descriptors").isNotNull() & (c("descriptors") == 1) & c("desc_error").isNull()
    return both.select(
        "message_id",
        F.when(valid, c("body_size")).cast("long").alias("size"),
        F.coalesce(c("stored_bytes"), F.lit(0)).cast("long").alias("stored_bytes"),
        F.coalesce(c("chunks"), F.lit(0)).cast("long").alias("chunks"),
        error.isNull().alias("complete"),
        F.when(
            error.isNotNull(),
            F.when(c("desc_error").isNotNull() & (c("descriptors") == 1), error).otherwise(
                F.concat(path, error)
            ),
        ).alias("error"),
    ).select(*(F.col(f.name) for f in schemas.LARGE_BODIES.fields))
