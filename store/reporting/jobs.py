"""The report's jobs: pure ``DataFrame -> DataFrame`` functions (docs/conventions.md#15), each over
:data:`~store.reporting.schemas.RECORDS` rows from any source, returning the schema of the same
name in :mod:`store.reporting.schemas`.

:func:`replay` is the journal's load rules (docs/journal.md, :mod:`store.journal.replay`) in Spark:

1. a transaction's records take effect at the position of the transaction's next commit
   (its records at ``(commit position, own position)``, so they keep their written order);
   a transaction whose next end is a rollback, or that has no end (failed, or only prepared),
   contributes nothing;
2. an add or update (plain or of a committed transaction) is live unless a delete of its id
   (plain, or of a committed transaction) comes after it.

3. a file journal's prepare or commit whose stated record count (``tx_count``) differs from
   the transaction's records in its file since the id's last end (``tx_seen``, counted by the
   decode step as :func:`store.file.reader.replay_file` counts them) ends a transaction torn
   by a crash: like a rollback, it contributes nothing (a table's rows have no count).

That is what a load returns: the committed entries, deletes applied. The result keeps
RECORDS' columns plus ``ord``, the entry's effective position (a struct that orders as the
journal does).

The messaging jobs follow the storage manager's recovery (:mod:`store.messaging.recovery`):
a message (45, or 30 with its body in the large-message store) is on a queue while its last
ADD_REF (32) / ACKNOWLEDGE_REF (33) for that queue is a ref; queues are the bindings
journal's queue records (21). A message's stored bytes are its record (header, properties,
inline body) plus, for a large message, its body.

Paged messages (PAGED_MESSAGES rows from the page stores) follow the pager's load
(:meth:`store.messaging.pager.Pager.load`): a paged message counts for each existing queue it
is routed to when it is visible (no page transaction, or one whose PAGE_TRANSACTION add (35) is
live: committed), the queue has not completed its page (42) and has no live cursor ack (39) of
its position. :func:`queue_depths` counts them; the other per-message jobs read the journal
only.

Large messages (:func:`large_messages`, issue 28) follow the load's sweep of bodies
(:func:`store.messaging.loader._large_bodies`): a body is kept while a message the load keeps
names it (held by an existing queue, in the journal or paged, or sent in a prepared
transaction); every other body of the large-message store is an orphan the load deletes. Each
kept message's claimed body size (its record's) is set beside what the store really holds
(LARGE_BODIES rows from :mod:`store.reporting.large`).

Thread-safety: pure functions; Spark DataFrames are immutable.
"""

from __future__ import annotations

from typing import Final

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from store.journal.api import (
    ADD,
    ADD_TX,
    COMMIT,
    DELETE,
    DELETE_TX,
    PREPARE,
    ROLLBACK,
    UPDATE,
    UPDATE_TX,
)
from store.messaging import page_records as p
from store.messaging import records as r

__all__ = [
    "RECORD_TYPE_NAMES",
    "address_bytes",
    "audit",
    "dead_records",
    "AGE_BUCKETS",
    "held_messages",
    "large_messages",
    "message_age_histogram",
    "message_ages",
    "page_stores",
    "queue_depths",
    "record_types",
    "replay",
]

#: (journal, user record type) -> the name a report shows (Artemis's names, reference §3.1).
RECORD_TYPE_NAMES: Final = {
    ("bindings", r.QUEUE_BINDING_RECORD): "QUEUE_BINDING_RECORD",
    ("bindings", r.ID_COUNTER_RECORD): "ID_COUNTER_RECORD",
    ("bindings", r.ADDRESS_BINDING_RECORD): "ADDRESS_BINDING_RECORD",
    ("messages", r.ADD_LARGE_MESSAGE): "ADD_LARGE_MESSAGE",
    ("messages", r.ADD_REF): "ADD_REF",
    ("messages", r.ACKNOWLEDGE_REF): "ACKNOWLEDGE_REF",
    ("messages", r.UPDATE_DELIVERY_COUNT): "UPDATE_DELIVERY_COUNT",
    ("messages", r.SET_SCHEDULED_DELIVERY_TIME): "SET_SCHEDULED_DELIVERY_TIME",
    ("messages", r.DUPLICATE_ID): "DUPLICATE_ID",
    ("messages", r.ADD_MESSAGE_PROTOCOL): "ADD_MESSAGE_PROTOCOL",
    ("messages", p.PAGE_TRANSACTION): "PAGE_TRANSACTION",
    ("messages", p.ACKNOWLEDGE_CURSOR): "ACKNOWLEDGE_CURSOR",
    ("messages", p.PAGE_CURSOR_COUNTER_VALUE): "PAGE_CURSOR_COUNTER_VALUE",
    ("messages", p.PAGE_CURSOR_COUNTER_INC): "PAGE_CURSOR_COUNTER_INC",
    ("messages", p.PAGE_CURSOR_COMPLETE): "PAGE_CURSOR_COMPLETE",
    ("messages", p.PAGE_CURSOR_PENDING_COUNTER): "PAGE_CURSOR_PENDING_COUNTER",
}

_TX_RECORDS = (ADD_TX, UPDATE_TX, DELETE_TX)
_MESSAGE_TYPES = (r.ADD_MESSAGE_PROTOCOL, r.ADD_LARGE_MESSAGE)


#: The columns of :func:`held_messages`.
_HELD: Final = (
    "queue_id", "message_id", "address", "timestamp", "bytes", "large", "record_bytes",
    "orig_address", "expiry_move",
)  # fmt: skip


def _position(seq: Column, pos: Column) -> Column:
    return F.struct(seq.alias("seq"), pos.alias("pos"))


def replay(records: DataFrame) -> DataFrame:
    """The live entries of ``records`` after the load rules (module docstring): RECORDS'
    columns plus ``ord``. Returns a lazy DataFrame. Raises nothing until an action runs."""
    own = _position(F.col("seq"), F.col("pos"))
    plain = records.filter(F.col("kind").isin(ADD, UPDATE, DELETE)).withColumn(
        "ord", F.struct(own.alias("major"), own.alias("minor"))
    )
    window = (
        Window.partitionBy("journal", "tx_id")
        .orderBy("seq", "pos")
        .rowsBetween(Window.currentRow, Window.unboundedFollowing)
    )
    # A torn prepare or commit (file journals only) ends its transaction as a rollback does.
    torn = F.col("tx_count").isNotNull() & (F.col("tx_count") != F.col("tx_seen"))
    ends = F.when(
        F.col("kind").isin(COMMIT, ROLLBACK) | ((F.col("kind") == PREPARE) & torn),
        F.struct(
            F.when(torn, F.lit(ROLLBACK)).otherwise(F.col("kind")).alias("kind"),
            F.col("seq").alias("seq"),
            F.col("pos").alias("pos"),
        ),
    )
    in_tx = (
        records.filter(F.col("kind").isin(*_TX_RECORDS, PREPARE, COMMIT, ROLLBACK))
        .withColumn("end", F.first(ends, ignorenulls=True).over(window))
        .filter(F.col("kind").isin(*_TX_RECORDS) & (F.col("end.kind") == COMMIT))
        .withColumn(
            "ord",
            F.struct(
                _position(F.col("end.seq"), F.col("end.pos")).alias("major"), own.alias("minor")
            ),
        )
        .drop("end")
    )
    effective = plain.unionByName(in_tx)
    deletes = (
        effective.filter(F.col("kind").isin(DELETE, DELETE_TX))
        .groupBy("journal", "id")
        .agg(F.max("ord").alias("deleted_at"))
    )
    entries = effective.filter(F.col("kind").isin(ADD, UPDATE, ADD_TX, UPDATE_TX))
    return (
        entries.join(deletes, ["journal", "id"], "left")
        .filter(F.col("deleted_at").isNull() | (F.col("ord") > F.col("deleted_at")))
        .drop("deleted_at")
    )


def _messages(live: DataFrame) -> DataFrame:
    stored = F.col("size") + F.when(F.col("large"), F.col("body_size")).otherwise(F.lit(0))
    return live.filter(
        (F.col("journal") == "messages") & F.col("user_record_type").isin(*_MESSAGE_TYPES)
    ).select(
        F.col("id").alias("message_id"),
        "address",
        "timestamp",
        "large",
        "body_size",
        F.col("size").alias("record_bytes"),
        stored.alias("bytes"),
        "orig_address",
        "expiry_move",
    )


def _queues(live: DataFrame) -> DataFrame:
    return live.filter(
        (F.col("journal") == "bindings") & (F.col("user_record_type") == r.QUEUE_BINDING_RECORD)
    ).select(F.col("id").alias("queue_id"), F.col("name").alias("queue"))


def _pending(live: DataFrame) -> DataFrame:
    """(message_id, queue_id) of every ref whose last ref/ack record is a ref."""
    refs = live.filter(
        (F.col("journal") == "messages")
        & F.col("user_record_type").isin(r.ADD_REF, r.ACKNOWLEDGE_REF)
    )
    last = refs.groupBy(F.col("id").alias("message_id"), "queue_id").agg(
        F.max_by(F.col("user_record_type"), F.col("ord")).alias("last")
    )
    return last.filter(F.col("last") == r.ADD_REF).drop("last")


def _on_queues(live: DataFrame) -> DataFrame:
    """Messages on existing queues: queue_id, queue, message columns."""
    return _pending(live).join(_messages(live), "message_id").join(_queues(live), "queue_id")


def _paged_pending(live: DataFrame, paged: DataFrame) -> DataFrame:
    """(queue_id, message_id, address, large, timestamp, bytes, record_bytes) of every paged
    message an existing queue has still to acknowledge (module docstring)."""
    committed = live.filter(
        (F.col("journal") == "messages")
        & (F.col("user_record_type") == p.PAGE_TRANSACTION)
        & F.col("page_tx_id").isNotNull()
    ).select(F.col("page_tx_id").alias("tx_id"))
    records = paged.filter(F.col("error").isNull())
    visible = records.filter(F.col("tx_id") == 0).unionByName(
        records.join(committed.distinct(), "tx_id", "left_semi")
    )
    routed = visible.select(
        "page",
        "page_index",
        "message_id",
        "address",
        "large",
        "timestamp",
        "bytes",
        "record_bytes",
        "orig_address",
        "expiry_move",
        F.explode("queue_ids").alias("queue_id"),
    ).join(_queues(live).select("queue_id"), "queue_id", "left_semi")
    cursor = live.filter(F.col("journal") == "messages")
    completes = cursor.filter(F.col("user_record_type") == p.PAGE_CURSOR_COMPLETE).select(
        "queue_id", "page"
    )
    acks = cursor.filter(F.col("user_record_type") == p.ACKNOWLEDGE_CURSOR).select(
        "queue_id", "page", "page_index"
    )
    return (
        routed.join(completes, ["queue_id", "page"], "left_anti")
        .join(acks, ["queue_id", "page", "page_index"], "left_anti")
        .select(*_HELD)
    )


def queue_depths(live: DataFrame, paged: DataFrame, *, held: DataFrame | None = None) -> DataFrame:
    """QUEUE_DEPTHS of the replayed ``live`` entries and the PAGED_MESSAGES rows ``paged``: a
    row for every queue (empty ones with 0), its unacknowledged messages (in the journal and
    paged) and their stored bytes. ``held``: :func:`held_messages` of the same two, when the
    caller has it computed already (the report: four jobs read it). Returns a lazy
    DataFrame."""
    counts = (
        _or_held(held, live, paged)
        .groupBy("queue_id")
        .agg(F.count("*").alias("messages"), F.sum("bytes").alias("bytes"))
    )
    return (
        _queues(live)
        .join(counts, "queue_id", "left")
        .select(
            "queue",
            F.coalesce("messages", F.lit(0)).cast("long").alias("messages"),
            F.coalesce("bytes", F.lit(0)).cast("long").alias("bytes"),
        )
    )


def held_messages(live: DataFrame, paged: DataFrame) -> DataFrame:
    """(queue_id, message_id, address, timestamp, bytes, large, record_bytes, orig_address,
    expiry_move) of every message an existing queue still holds, in the journal or paged:
    what queue depths, message ages, the age histogram, bytes per address and the kept large
    messages count. Returns a lazy DataFrame."""
    return _on_queues(live).select(*_HELD).unionByName(_paged_pending(live, paged).select(*_HELD))


def _or_held(held: DataFrame | None, live: DataFrame, paged: DataFrame) -> DataFrame:
    return held_messages(live, paged) if held is None else held


def message_ages(
    live: DataFrame, paged: DataFrame, now_ms: int, *, held: DataFrame | None = None
) -> DataFrame:
    """MESSAGE_AGES of ``live`` and the PAGED_MESSAGES rows ``paged`` at ``now_ms`` (ms since
    the epoch, UTC): per queue, its waiting messages (paged ones included), the oldest and
    newest timestamps and the oldest's age in seconds. ``held`` as :func:`queue_depths`'s.
    Returns a lazy DataFrame."""
    ages = (
        _or_held(held, live, paged)
        .groupBy("queue_id")
        .agg(
            F.count("*").alias("messages"),
            F.min("timestamp").alias("oldest_timestamp"),
            F.max("timestamp").alias("newest_timestamp"),
        )
    )
    return (
        _queues(live)
        .join(ages, "queue_id", "left")
        .select(
            "queue",
            F.coalesce("messages", F.lit(0)).cast("long").alias("messages"),
            "oldest_timestamp",
            "newest_timestamp",
            ((F.lit(now_ms) - F.col("oldest_timestamp")) / 1000)
            .cast("long")
            .alias("oldest_age_seconds"),
        )
    )


#: The age histogram's buckets an operator reads: (name, upper bound in ms, exclusive; None:
#: no bound). A message's age is the report time minus its timestamp; a timestamp in the
#: future (another host's clock) is age 0, the first bucket.
AGE_BUCKETS: Final = (
    ("< 1 min", 60_000),
    ("< 1 h", 3_600_000),
    ("< 1 day", 86_400_000),
    ("older", None),
)


def message_age_histogram(
    live: DataFrame, paged: DataFrame, now_ms: int, *, held: DataFrame | None = None
) -> DataFrame:
    """MESSAGE_AGE_HISTOGRAM of ``live`` and the PAGED_MESSAGES rows ``paged`` at ``now_ms``
    (ms since the epoch, UTC): per queue and :data:`AGE_BUCKETS` bucket, the messages the
    queue still holds (paged ones included) whose age falls in it; a row for every queue and
    bucket. ``held`` as :func:`queue_depths`'s. Returns a lazy DataFrame."""
    age = F.greatest(F.lit(now_ms) - F.col("timestamp"), F.lit(0))
    index: Column = F.lit(len(AGE_BUCKETS) - 1)
    for i, (_name, bound) in reversed(list(enumerate(AGE_BUCKETS))):
        if bound is not None:
            index = F.when(age < bound, F.lit(i)).otherwise(index)
    counts = (
        _or_held(held, live, paged)
        .select("queue_id", index.alias("bucket_index"))
        .groupBy("queue_id", "bucket_index")
        .agg(F.count("*").alias("messages"))
    )
    spark = live.sparkSession
    buckets = spark.createDataFrame(
        [(i, name) for i, (name, _bound) in enumerate(AGE_BUCKETS)],
        "bucket_index int, bucket string",
    )
    return (
        _queues(live)
        .crossJoin(buckets)
        .join(counts, ["queue_id", "bucket_index"], "left")
        .select(
            "queue",
            F.col("bucket_index").cast("int").alias("bucket_index"),
            "bucket",
            F.coalesce("messages", F.lit(0)).cast("long").alias("messages"),
        )
    )


def address_bytes(live: DataFrame, paged: DataFrame, *, held: DataFrame | None = None) -> DataFrame:
    """ADDRESS_BYTES of ``live`` and the PAGED_MESSAGES rows ``paged``: per address, the
    messages some existing queue still holds (paged ones included) and their stored bytes (a
    message on several queues counts once); and, by their original address, the held
    messages a dead-letter or an expiry move put where they are. ``held`` as
    :func:`queue_depths`'s. Returns a lazy DataFrame."""
    messages = _or_held(held, live, paged).dropDuplicates(["message_id"])
    moved = F.col("orig_address").isNotNull()
    here = messages.select(
        "address", F.lit(1).alias("messages"), "bytes",
        F.lit(0).alias("dead_lettered"), F.lit(0).alias("expired"),
    )  # fmt: skip
    away = messages.filter(moved).select(
        F.col("orig_address").alias("address"), F.lit(0).alias("messages"),
        F.lit(0).cast("long").alias("bytes"),
        F.when(F.col("expiry_move"), 0).otherwise(1).alias("dead_lettered"),
        F.when(F.col("expiry_move"), 1).otherwise(0).alias("expired"),
    )  # fmt: skip
    sums = (
        F.sum(c).cast("long").alias(c) for c in ("messages", "bytes", "dead_lettered", "expired")
    )
    return here.unionByName(away).groupBy("address").agg(*sums)


def _type_name() -> Column:
    name = F.lit(None).cast("string")
    for (journal, urt), text in RECORD_TYPE_NAMES.items():
        name = F.when(
            (F.col("journal") == journal) & (F.col("user_record_type") == urt), F.lit(text)
        ).otherwise(name)
    fallback = F.concat(F.lit("UNKNOWN_"), F.col("user_record_type").cast("string"))
    return F.coalesce(name, fallback)


def record_types(live: DataFrame) -> DataFrame:
    """RECORD_TYPES of ``live``: live entries and their body bytes per journal and user
    record type, with the type's name. Returns a lazy DataFrame."""
    return (
        live.groupBy("journal", "user_record_type")
        .agg(F.count("*").cast("long").alias("records"), F.sum("size").cast("long").alias("bytes"))
        .select("journal", "user_record_type", _type_name().alias("name"), "records", "bytes")
    )


def dead_records(records: DataFrame, live: DataFrame) -> DataFrame:
    """DEAD_RECORDS: per journal, records read and their body bytes, what ``live`` keeps, and
    the difference (what a cleanup or compaction reclaims). Returns a lazy DataFrame."""
    total = records.groupBy("journal").agg(
        F.count("*").alias("records"), F.sum("size").alias("bytes")
    )
    kept = live.groupBy("journal").agg(
        F.count("*").alias("live_records"), F.sum("size").alias("live_bytes")
    )
    both = total.join(kept, "journal", "left").fillna(0, ["live_records", "live_bytes"])
    return both.select(
        "journal",
        F.col("records").cast("long").alias("records"),
        F.col("live_records").cast("long").alias("live_records"),
        (F.col("records") - F.col("live_records")).cast("long").alias("dead_records"),
        F.col("bytes").cast("long").alias("bytes"),
        F.col("live_bytes").cast("long").alias("live_bytes"),
        (F.col("bytes") - F.col("live_bytes")).cast("long").alias("dead_bytes"),
    )


def _prepared(records: DataFrame) -> DataFrame:
    """The transactional records (13-15) of the message journal's transactions that are
    prepared and not ended (a whole prepare, no commit or rollback after): what a load keeps
    for the transaction manager. Returns a lazy DataFrame of RECORDS' columns."""
    window = (
        Window.partitionBy("journal", "tx_id")
        .orderBy("seq", "pos")
        .rowsBetween(Window.currentRow, Window.unboundedFollowing)
    )
    torn = F.coalesce(
        F.col("tx_count").isNotNull() & (F.col("tx_count") != F.col("tx_seen")), F.lit(False)
    )
    kind = F.col("kind")
    ends = F.when(kind.isin(COMMIT, ROLLBACK) | ((kind == PREPARE) & torn), F.lit(True))
    prepares = F.when((kind == PREPARE) & ~torn, F.lit(True))
    return (
        records.filter(
            (F.col("journal") == "messages") & kind.isin(*_TX_RECORDS, PREPARE, COMMIT, ROLLBACK)
        )
        .withColumn("_end", F.first(ends, ignorenulls=True).over(window))
        .withColumn("_prepared", F.first(prepares, ignorenulls=True).over(window))
        .filter(kind.isin(*_TX_RECORDS) & F.col("_end").isNull() & F.col("_prepared"))
        .drop("_end", "_prepared")
    )


def _kept_large(
    records: DataFrame, live: DataFrame, paged: DataFrame, held: DataFrame | None
) -> DataFrame:
    """(message_id, address, body_size, record_bytes) of every large message a load keeps,
    so keeps its body (:func:`store.messaging.loader._large_bodies`): held by an existing
    queue, in the journal or paged, or sent in a prepared transaction (a large send, or a
    paged one of its page transaction)."""
    body = (F.col("bytes") - F.col("record_bytes")).alias("body_size")
    kept = (
        _or_held(held, live, paged)
        .filter(F.col("large"))
        .select("message_id", "address", body, "record_bytes")
    )
    prepared = _prepared(records)
    sends = prepared.filter(
        (F.col("user_record_type") == r.ADD_LARGE_MESSAGE) & F.col("large")
    ).select(
        F.col("id").alias("message_id"), "address", "body_size", F.col("size").alias("record_bytes")
    )
    page_txs = prepared.filter(
        (F.col("user_record_type") == p.PAGE_TRANSACTION) & F.col("page_tx_id").isNotNull()
    ).select(F.col("page_tx_id").alias("tx_id"))
    pending = (
        paged.filter(F.col("error").isNull() & F.col("large"))
        .join(page_txs, "tx_id", "left_semi")
        .select("message_id", "address", body, "record_bytes")
    )
    return kept.unionByName(sends).unionByName(pending)


def large_messages(
    records: DataFrame,
    live: DataFrame,
    paged: DataFrame,
    bodies: DataFrame,
    *,
    held: DataFrame | None = None,
) -> DataFrame:
    """LARGE_MESSAGES of RECORDS ``records``, their replayed ``live`` entries, the
    PAGED_MESSAGES rows ``paged`` and the LARGE_BODIES rows ``bodies`` (the large-message
    store as it is): every large message the load keeps, the body size its record claims
    beside what the store holds for it and a ``status`` (``ok``, ``size differs``,
    ``missing``, ``damaged``), and every body no such message refers to (``orphan``: what
    the store's load sweeps). ``held`` as :func:`queue_depths`'s. Returns a lazy DataFrame."""
    kept = (
        _kept_large(records, live, paged, held)
        .dropDuplicates(["message_id"])
        .withColumn("_kept", F.lit(True))
    )
    found = bodies.withColumn("_found", F.lit(True))
    both = kept.join(found, "message_id", "full")
    status = (
        F.when(F.col("_kept").isNull(), F.lit("orphan"))
        .when(F.col("_found").isNull(), F.lit("missing"))
        .when(~F.col("complete"), F.lit("damaged"))
        .when(F.col("stored_bytes") != F.col("body_size"), F.lit("size differs"))
        .otherwise(F.lit("ok"))
    )
    return both.select(
        "message_id",
        "address",
        F.col("body_size").cast("long").alias("body_size"),
        F.coalesce("stored_bytes", F.lit(0)).cast("long").alias("stored_bytes"),
        F.coalesce("chunks", F.lit(0)).cast("long").alias("chunks"),
        F.col("record_bytes").cast("long").alias("record_bytes"),
        status.alias("status"),
        "error",
    )


def page_stores(paged: DataFrame) -> DataFrame:
    """PAGE_STORES of PAGED_MESSAGES rows: per address, pages, paged records and their bytes
    in the pages. Returns a lazy DataFrame."""
    return paged.groupBy("address").agg(
        F.countDistinct("page").cast("long").alias("pages"),
        F.count("*").cast("long").alias("records"),
        F.sum("page_bytes").cast("long").alias("bytes"),
    )


def audit(
    records: DataFrame, *, address: str | None, start_ms: int | None, end_ms: int | None
) -> DataFrame:
    """AUDIT of RECORDS (a retention history, or a journal): every message ever written to
    ``address`` (None: any) with ``start_ms <= timestamp < end_ms`` (None: unbounded), once
    each, whatever happened to it later. Returns a lazy DataFrame."""
    sent = records.filter(
        (F.col("journal") == "messages")
        & F.col("kind").isin(ADD, ADD_TX)
        & F.col("user_record_type").isin(*_MESSAGE_TYPES)
        & F.col("error").isNull()
    )
    if address is not None:
        sent = sent.filter(F.col("address") == address)
    if start_ms is not None:
        sent = sent.filter(F.col("timestamp") >= start_ms)
    if end_ms is not None:
        sent = sent.filter(F.col("timestamp") < end_ms)
    return sent.select(
        F.col("id").alias("message_id"), "address", "timestamp", "priority", "body_size", "large"
    ).dropDuplicates(["message_id"])
