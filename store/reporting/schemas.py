"""Every explicit schema of the reports (docs/conventions.md#15): what sources produce and what each
job returns. The Parquet datasets a report writes have exactly these columns.

:data:`RECORDS` is the one decoded schema every journal source produces (database table over
JDBC, journal files, a retention history), one row per journal record:

==================  =======  ===============================================================
column              type     meaning
==================  =======  ===============================================================
journal             string   "bindings" or "messages"
seq                 long     order, major: the row's ``seq`` (table) or the file id (files)
pos                 long     order, minor: 0 (table) or the record's offset in its file
kind                int      journal record type, 10..19 (11 add, 12 update, 13 add-tx, ...)
id                  long     record id (-1 on a table's transaction bookkeeping rows)
tx_id               long     transaction id, 0 outside a transaction
user_record_type    int      0..255 (-1 on bookkeeping rows)
size                long     bytes of the record's body
address             string   a message's or duplicate id's address; a queue's address; an
                             address record's name
name                string   a queue record's name (21)
queue_id            long     the queue of a ref, ack, delivery count, schedule, cursor record
timestamp           long     a message's timestamp, ms since the epoch (UTC)
priority            int      a message's priority
body_size           long     a message's body size: inline body, or the large-message body
large               boolean  a message whose body is in the large-message store (type 30)
error               string   why the body did not decode (null when it did)
page                long     the page of a cursor ack (39) or page completion (42)
page_index          int      the index in its page of a cursor ack (39)
page_tx_id          long     the transaction a PAGE_TRANSACTION add (35) makes visible
orig_address        string   a message's ``_AMQ_ORIG_ADDRESS`` when text: a dead-letter or
                             expiry move made it (null otherwise)
expiry_move         boolean  a message's: it has an origin and ``_AMQ_ACTUAL_EXPIRY`` (the
                             move was an expiry's); false for every other message
tx_count            int      a file journal's prepare or commit: the transaction's records
                             in this file as the record says (null on a table)
tx_seen             int      ... and as the file holds them since the id's last end; a
                             prepare or commit where they differ ends a torn transaction
==================  =======  ===============================================================

:data:`PAGED_MESSAGES` is what the page sources produce: one row per paged message record;
:data:`LARGE_BODIES` what the large-message sources produce: one row per body.

Thread-safety: immutable module constants.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "ADDRESS_BYTES",
    "AUDIT",
    "DEAD_RECORDS",
    "LARGE_BODIES",
    "LARGE_BODY_ROWS",
    "LARGE_MESSAGES",
    "MESSAGE_AGES",
    "MESSAGE_AGE_HISTOGRAM",
    "PAGED_MESSAGES",
    "PAGE_STORES",
    "QUEUE_DEPTHS",
    "RECORDS",
    "RECORD_TYPES",
    "empty",
]


def empty(spark: SparkSession, schema: StructType) -> DataFrame:
    """A frame of ``schema`` with no rows, as local data (an empty Arrow table): Spark's
    optimizer then knows it is empty, leaves out the joins and unions it takes part in, and
    a report does not compute and store it as it does its sources
    (``DataFrame.isLocal()``). Raises what Spark raises."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return spark.createDataFrame(to_arrow_schema(schema).empty_table())


def _schema(*fields: tuple[str, object, bool]) -> StructType:
    return StructType([StructField(n, t, nullable) for n, t, nullable in fields])  # type: ignore[arg-type]


_L, _I, _S, _B = LongType(), IntegerType(), StringType(), BooleanType()

RECORDS: Final = _schema(
    ("journal", _S, False),
    ("seq", _L, False),
    ("pos", _L, False),
    ("kind", _I, False),
    ("id", _L, False),
    ("tx_id", _L, False),
    ("user_record_type", _I, False),
    ("size", _L, False),
    ("address", _S, True),
    ("name", _S, True),
    ("queue_id", _L, True),
    ("timestamp", _L, True),
    ("priority", _I, True),
    ("body_size", _L, True),
    ("large", _B, True),
    ("error", _S, True),
    ("page", _L, True),
    ("page_index", _I, True),
    ("page_tx_id", _L, True),
    ("orig_address", _S, True),
    ("expiry_move", _B, True),
    ("tx_count", _I, True),
    ("tx_seen", _I, True),
)

#: ``queue_depths/`` (docs/reporting.md#queue-depths): a row for every queue, empty ones included.
QUEUE_DEPTHS: Final = _schema(("queue", _S, False), ("messages", _L, False), ("bytes", _L, False))

#: ``record_types/`` (docs/reporting.md): live records after replay, by journal and record type.
RECORD_TYPES: Final = _schema(
    ("journal", _S, False),
    ("user_record_type", _I, False),
    ("name", _S, False),
    ("records", _L, False),
    ("bytes", _L, False),
)

#: ``message_ages/``: per queue, the timestamps of its oldest and newest unacknowledged
#: message and the age of the oldest at report time (seconds; null for an empty queue).
MESSAGE_AGES: Final = _schema(
    ("queue", _S, False),
    ("messages", _L, False),
    ("oldest_timestamp", _L, True),
    ("newest_timestamp", _L, True),
    ("oldest_age_seconds", _L, True),
)

#: ``message_age_histogram/``: per queue, its unacknowledged messages by age at report time,
#: one row per queue and bucket (``bucket_index`` 0..3: "< 1 min", "< 1 h", "< 1 day",
#: "older"; empty buckets and empty queues included, with 0).
MESSAGE_AGE_HISTOGRAM: Final = _schema(
    ("queue", _S, False),
    ("bucket_index", _I, False),
    ("bucket", _S, False),
    ("messages", _L, False),
)

#: ``address_bytes/`` (docs/reporting.md#addresses): per address, the messages some queue
#: still holds there and their stored bytes; and of the messages waiting anywhere, those a
#: delivery policy moved away from it: to a dead-letter address (``dead_lettered``) or an
#: expiry address (``expired``), counted by their ``_AMQ_ORIG_ADDRESS``. An address only
#: moved from has 0 messages and bytes.
ADDRESS_BYTES: Final = _schema(
    ("address", _S, False),
    ("messages", _L, False),
    ("bytes", _L, False),
    ("dead_lettered", _L, False),
    ("expired", _L, False),
)

#: ``dead_records/``: per journal, what a replay keeps and what awaits cleanup or compaction.
DEAD_RECORDS: Final = _schema(
    ("journal", _S, False),
    ("records", _L, False),
    ("live_records", _L, False),
    ("dead_records", _L, False),
    ("bytes", _L, False),
    ("live_bytes", _L, False),
    ("dead_bytes", _L, False),
)

#: ``large_messages/`` (docs/reporting.md#large-messages): every large message the load keeps
#: (some existing queue holds it, in the journal or paged, or a prepared transaction sends it)
#: with the body size its record claims (``body_size``) beside what the large-message store
#: holds for it (``stored_bytes``, ``chunks``: 0 when there is no body), and every body there
#: that no such message refers to (an orphan: ``address``, ``body_size`` and ``record_bytes``
#: null). ``status``: ``ok``, ``size differs`` (a complete body of another size),
#: ``missing`` (no body), ``damaged`` (a body that does not read back, or an incomplete one),
#: ``orphan`` (what the store's load sweeps); ``error``: why a body does not read back.
LARGE_MESSAGES: Final = _schema(
    ("message_id", _L, False),
    ("address", _S, True),
    ("body_size", _L, True),
    ("stored_bytes", _L, False),
    ("chunks", _L, False),
    ("record_bytes", _L, True),
    ("status", _S, False),
    ("error", _S, True),
)

#: What the large-message sources give (:mod:`store.reporting.large`): one row per body in
#: the large-message store, its size as its header or descriptor says (null: no valid one),
#: the chunk payload bytes and whole chunks really there, whether it reads back
#: (``complete``) and why not (``error``).
LARGE_BODIES: Final = _schema(
    ("message_id", _L, False),
    ("size", _L, True),
    ("stored_bytes", _L, False),
    ("chunks", _L, False),
    ("complete", _B, False),
    ("error", _S, True),
)

#: One row of a large-message table decoded on its own, before a body's rows are put
#: together (:data:`store.reporting.large.ARROW_BODY_ROWS` says what each column is).
LARGE_BODY_ROWS: Final = _schema(
    ("message_id", _L, True),
    ("chunk", _L, True),
    ("payload", _L, True),
    ("crc_v1", _B, True),
    ("crc_v2", _B, True),
    ("chunk_size", _L, True),
    ("body_size", _L, True),
    ("chunk_count", _L, True),
    ("version", _I, True),
    ("error", _S, True),
)

#: What the page sources give: one row per paged message record, in its page at
#: ``page_index``: its message, page transaction (0: none), queues, stored ``bytes`` (its 45 or
#: 30 record plus, for a large message, the body), ``record_bytes`` (the 45 or 30 record
#: alone), and ``page_bytes`` (the record's size in
#: the page, framing included). ``orig_address`` and ``expiry_move`` as in RECORDS.
#: ``error``: why the record did not decode (other columns null).
PAGED_MESSAGES: Final = _schema(
    ("address", _S, False),
    ("page", _L, False),
    ("page_index", _I, False),
    ("message_id", _L, True),
    ("tx_id", _L, True),
    ("queue_ids", ArrayType(_L, False), True),
    ("bytes", _L, True),
    ("record_bytes", _L, True),
    ("large", _B, True),
    ("timestamp", _L, True),
    ("orig_address", _S, True),
    ("expiry_move", _B, True),
    ("page_bytes", _L, False),
    ("error", _S, True),
)

#: ``page_stores/``: per paging address, its pages, paged records and bytes.
PAGE_STORES: Final = _schema(
    ("address", _S, False),
    ("pages", _L, False),
    ("records", _L, False),
    ("bytes", _L, False),
)

#: ``audit/``: every message that passed through an address in a time window (history).
AUDIT: Final = _schema(
    ("message_id", _L, False),
    ("address", _S, False),
    ("timestamp", _L, False),
    ("priority", _I, True),
    ("body_size", _L, True),
    ("large", _B, True),
)
