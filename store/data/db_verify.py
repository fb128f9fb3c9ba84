"""Verifying and repairing a database store offline: ``store data verify`` / ``repair`` on
PostgreSQL, MariaDB/MySQL, SQLite (and the JDBC databases) — the counterpart of
:mod:`store.file.verify` and :mod:`store.file.repair`.

:func:`verify_database` reads every row of the two journal tables in ``seq`` order through the
load's own rules (:class:`store.journal.replay.Replayer` for what a load returns,
:class:`store.db.rows.RowIndex` for which rows it needs), decodes every record body with the
storage manager's codecs, and lists **every** finding with its table and ``seq`` (the file
verify's path and offset). It also reads the large-message table and the page-store directory.
It changes nothing.

Severities follow the file verify: ``error`` is what makes a load refuse the store, ``warning``
what a load tolerates or the next open cleans up by itself, ``info`` the rest.

===========================  ========  ======================================================
kind                         severity  what
===========================  ========  ======================================================
``schema``                   error     tables missing, or a schema revision the code does not
                                       know or needs upgrading (:mod:`store.db.migrate`); no
                                       row is read then
``bad-record-type``          error     a journal row whose ``recordtype`` is not 10..19 (the
                                       load raises CorruptionError at that ``seq``)
``undecodable``              error     a row a load returns (live record, prepared
                                       transaction) whose body does not decode with the
                                       storage manager's codecs (``StorageManager.load``
                                       refuses it); a dead row that does not decode is only
                                       reported with the dead rows
``unknown-user-record-type`` warning   a live record of a user record type the storage
                                       manager does not know (logged and kept by a load)
``uncommitted-transaction``  warning   rows of a transaction neither committed, rolled back
                                       nor prepared (a crash mid-transaction): the load drops
                                       them and deletes them in its first batch
``dead-rows``                warning   rows no load needs (:func:`store.db.maintenance
                                       .sweep_dead_rows`'s rule: stray commits, events,
                                       delete rows, rows of deleted records); the first batch
                                       after a load deletes them
``update-without-add``       warning   a non-transactional UPDATE of an id no ADD made live
                                       (the load keeps it, the storage manager ignores a ref,
                                       ack, delivery count or schedule of a missing message)
``incomplete-body``          warning   large-message chunk rows with no descriptor (a body cut
                                       off by a crash): the next open deletes them
``missing-chunks``           error     a complete body (descriptor row) whose chunk rows are
                                       gone, or whose descriptor does not decode: the message
                                       cannot be read
``damaged-body``             error     a complete body that cannot be read whole: a chunk
                                       fails its checksum, is not in its place, or its
                                       ``data`` is NULL (read by the store's own reader)
``bad-row``                  error     a large-message row whose ``filename`` or ``extension``
                                       is NULL or not ours (the store refuses to open)
``large-body-missing``       error     a live large message (type 30) with no body rows: the
                                       message cannot be delivered
``missing-page-table``       error     a page table the page-store directory lists but the
                                       database lacks: its pages are lost and open refuses
                                       the store (``store data repair --remove-pages``)
``unlisted-page-table``      warning   a page table the directory does not list that holds a
                                       tombstone or no page row (a crash while it was created
                                       or removed): the next open drops it
``unlisted-page-table-with-  error     a page table the directory does not list that holds
pages``                                page rows: open refuses the store and keeps the table
                                       (``store data repair --adopt-pages/--remove-pages``)
===========================  ========  ======================================================

:func:`store.data.db_repair.repair_database` removes what a load ignores anyway, on this
module's findings.

Both take the store lock (:func:`store.db.lock.acquire_store_lock`) for their duration and
release it, so a store a live process holds is refused with StoreLockedError naming the holder;
``verify_database(force=True)`` reads without the lock. They return result dataclasses and never
print (docs/conventions.md#5, #10).

Thread-safety: each call works alone on its store, under the store lock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from store.config import StoreConfig
from store.db import refuse_live_lease
from store.db.engine import create_store_engine, dispose_store_engine
from store.db.lock import acquire_store_lock
from store.db.migrate import ensure_schema
from store.db.rows import RowIndex
from store.db.schema import StoreSchema, TableNames
from store.db.sqlstates import booted_elsewhere
from store.errors import (
    ConfigError,
    CorruptionError,
    SchemaError,
    StoreError,
    StoreLockedError,
    StoreUnavailableError,
)
from store.journal import api
from store.journal.replay import Replayer
from store.large.api import check_body
from store.large.database import (
    MSG_EXTENSION,
    DatabaseLargeMessages,
    chunk_name,
    decode_descriptor,
    parse_row_name,
)
from store.messaging import records as r
from store.messaging.message_records import decode_large_message, decode_message
from store.messaging.page_records import (
    ACKNOWLEDGE_CURSOR,
    PAGE_CURSOR_COMPLETE,
    PAGE_CURSOR_COUNTER_INC,
    PAGE_CURSOR_COUNTER_VALUE,
    PAGE_CURSOR_PENDING_COUNTER,
    PAGE_TRANSACTION,
    decode_page_record,
)
from store.paging.database import DIRECTORY_ROW, TOMBSTONE_ROW, decode_directory
from store.paging.format import page_number_of

__all__ = [
    "DatabaseVerifyReport",
    "DbFinding",
    "TableSummary",
    "opened",
    "verify_database",
    "verify_opened",
]

ERROR: Final = "error"
WARNING: Final = "warning"
INFO: Final = "info"

_KNOWN_TYPES: Final = frozenset(int(t) for t in api.RecordType)
_TX_ROWS: Final = frozenset((api.ADD_TX, api.UPDATE_TX, api.DELETE_TX, api.PREPARE))
#: Message-journal user record types a plain UPDATE carries, all ignored by the storage
#: manager when their message is missing (store.messaging.recovery._apply).
_REF_UPDATES: Final = frozenset(
    (r.ADD_REF, r.ACKNOWLEDGE_REF, r.UPDATE_DELIVERY_COUNT, r.SET_SCHEDULED_DELIVERY_TIME)
)


@dataclass(frozen=True, slots=True)
class DbFinding:
    """One thing :func:`verify_database` found; ``kind`` is a stable key (module docstring).

    ``table`` and ``seq`` say where (``seq`` is the first row concerned: a journal row's
    ``seq``, a file table's row ``id``, None for a whole table); ``seqs`` every row concerned
    and ``ids`` the record or message ids, where they mean something. Immutable.
    """

    severity: str
    kind: str
    table: str
    seq: int | None
    message: str
    seqs: tuple[int, ...] = ()
    ids: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class TableSummary:
    """One table as :func:`verify_database` read it: its rows and those a load needs.

    Immutable.
    """

    table: str
    what: str  # "bindings", "messages", "large messages", "page store", "pages <address>"
    rows: int
    needed: int | None = None  # journal tables: rows a load needs
    records: int | None = None  # journal tables: records a load returns


@dataclass(frozen=True, slots=True)
class DatabaseVerifyReport:
    """Every finding of one database store; ``ok`` is False when any is an error.

    ``where`` names the database (password hidden). Immutable once returned.
    """

    where: str
    tables: list[TableSummary]
    findings: list[DbFinding]

    @property
    def errors(self) -> list[DbFinding]:
        """The findings that make a load refuse the store."""
        return [f for f in self.findings if f.severity == ERROR]

    @property
    def warnings(self) -> list[DbFinding]:
        """What a load tolerates or the next open cleans up."""
        return [f for f in self.findings if f.severity == WARNING]

    @property
    def ok(self) -> bool:
        """True when nothing found stops the store from loading."""
        return not self.errors


# -- entry points -----------------------------------------------------------------------------


def verify_database(config: StoreConfig, *, force: bool = False) -> DatabaseVerifyReport:
    """Check the database store ``config`` describes and list every finding; changes nothing.

    ``force`` reads without the store lock (a live writer's rows may be in flight). Returns the
    :class:`DatabaseVerifyReport`. Raises ConfigError when ``config`` has no database store,
    StoreLockedError naming the holder when a live process holds the store (unless ``force``),
    StoreUnavailableError when the database fails.
    """
    with opened(config, lock=not force) as (engine, schema, where):
        return verify_opened(engine, schema, where, lease=None if force else config)


# -- opening ----------------------------------------------------------------------------------


@contextmanager
def opened(config: StoreConfig, *, lock: bool) -> Iterator[tuple[Engine, StoreSchema, str]]:
    """(engine, schema, display name) of the database store ``config`` describes, with the
    store lock held for the block when ``lock``; the engine is disposed after. Raises
    ConfigError without a database store, StoreLockedError naming the holder (also for an
    embedded database another process booted), StoreUnavailableError when the database
    fails."""
    db = config.database_store
    if db is None:
        raise ConfigError(
            "the configuration has no database-store section",
            key="database-store",
            allowed="a database-store section with jdbc-connection-url",
        )
    names = TableNames.from_config(db)
    engine, target = create_store_engine(db)
    held = None
    try:
        if lock:
            held = acquire_store_lock(engine, target, names)
        yield engine, StoreSchema(names), target.display
    except (sa.exc.SQLAlchemyError, StoreUnavailableError) as exc:
        if booted_elsewhere(exc):
            raise StoreLockedError(
                f"the database of {target.display} is open in another process",
                holder="another process (the embedded database's own lock)",
                hint="only one process may open an embedded database; stop it first",
            ) from exc
        if isinstance(exc, StoreError):
            raise
        raise StoreUnavailableError(
            f"reading the store at {target.display} failed: {type(exc).__name__}: "
            f"{exc.__cause__ or exc}"
        ) from exc
    finally:
        if held is not None:
            held.release()
        dispose_store_engine(engine)


# -- verify -----------------------------------------------------------------------------------


def verify_opened(
    engine: Engine, schema: StoreSchema, where: str, *, lease: StoreConfig | None
) -> DatabaseVerifyReport:
    """The :class:`DatabaseVerifyReport` of an :func:`opened` store; with ``lease`` (the
    configuration), first refuse a store an HA live node holds (its lease replaces the store
    lock, see store.db.open_database_journals). Raises StoreLockedError for that holder."""
    names = schema.names
    try:
        ensure_schema(engine, names, create=False, config_hint="<config>", where=where)
    except SchemaError as exc:
        text = str(exc) + (f" ({exc.hint})" if getattr(exc, "hint", None) else "")
        return DatabaseVerifyReport(
            where, [], [DbFinding(ERROR, "schema", names.bindings, None, text)]
        )
    if lease is not None and lease.database_store is not None:
        refuse_live_lease(
            engine,
            schema,
            lease.database_store,
            hint="stop that node first, or use verify --force to read anyway",
        )
    tables: list[TableSummary] = []
    findings: list[DbFinding] = []
    live_large: set[int] = set()
    for journal, table in (("bindings", schema.bindings), ("messages", schema.messages)):
        summary, found, large = _scan_journal(engine, table, journal)
        tables.append(summary)
        findings.extend(found)
        live_large |= large
    summary, found = _scan_large(engine, schema.large_messages, live_large)
    tables.append(summary)
    findings.extend(found)
    summaries, found = _scan_pages(engine, schema)
    tables.extend(summaries)
    findings.extend(found)
    return DatabaseVerifyReport(where, tables, findings)


class _Sink:
    """The delete work a load queues (the RowIndex's CleanupSink); verify only discards it."""

    __slots__ = ("records", "rows", "transactions", "tx_records")

    def __init__(self) -> None:
        self.records: list[tuple[int, int]] = []
        self.tx_records: list[tuple[int, int, int, int]] = []
        self.transactions: list[tuple[int, int, int]] = []
        self.rows: list[Any] = []


def _decoder(journal: str, urt: int, rt: int) -> Callable[[bytes, int], object] | None:
    """The storage manager's decoder of a ``journal`` record of user type ``urt`` (None for a
    type it does not know)."""
    update = rt in (api.UPDATE, api.UPDATE_TX)
    if journal == "bindings":
        simple: dict[int, Any] = {
            r.ADDRESS_BINDING_RECORD: r.AddressRecord.decode,
            r.QUEUE_BINDING_RECORD: r.QueueRecord.decode,
            r.ID_COUNTER_RECORD: r.IdCounterRecord.decode,
        }
    else:
        if urt == r.ADD_MESSAGE_PROTOCOL:
            return decode_message
        if urt == r.ADD_LARGE_MESSAGE:
            return decode_large_message
        if urt in (
            PAGE_TRANSACTION,
            ACKNOWLEDGE_CURSOR,
            PAGE_CURSOR_COUNTER_VALUE,
            PAGE_CURSOR_COUNTER_INC,
            PAGE_CURSOR_COMPLETE,
            PAGE_CURSOR_PENDING_COUNTER,
        ):
            return lambda data, _id: decode_page_record(urt, data, update=update)
        simple = {
            r.ADD_REF: r.RefRecord.decode,
            r.ACKNOWLEDGE_REF: r.AckRecord.decode,
            r.UPDATE_DELIVERY_COUNT: r.DeliveryCountRecord.decode,
            r.SET_SCHEDULED_DELIVERY_TIME: r.ScheduledTimeRecord.decode,
            r.DUPLICATE_ID: r.DuplicateIdRecord.decode,
        }
    decode = simple.get(urt)
    return None if decode is None else (lambda data, _id: decode(data))


def _scan_journal(
    engine: Engine, table: sa.Table, journal: str
) -> tuple[TableSummary, list[DbFinding], set[int]]:
    """Replay ``table`` as a load does; returns its summary, findings and live large ids."""
    replayer, index, sink = Replayer(), RowIndex(), _Sink()
    light: list[tuple[int, int, int, int]] = []  # seq, id, recordtype, txid
    bad_types: list[tuple[int, int]] = []
    undecodable: dict[int, str] = {}  # seq -> reason
    unknown: dict[int, list[int]] = {}  # user record type -> seqs
    orphans: list[tuple[int, int, int]] = []  # seq, id, user record type
    c = table.c
    query = sa.select(c.seq, c.id, c.recordtype, c.txid, c.userrecordtype, c.record, c.txdata)
    last = 0
    with engine.connect() as conn:
        result = conn.execution_options(stream_results=True, yield_per=2000).execute(
            query.order_by(c.seq)
        )
        for seq, id, rt, txid, urt, record, txdata in result:
            seq, id, rt, txid, urt = int(seq), int(id), int(rt), int(txid), int(urt)
            data = bytes(record) if record is not None else b""
            last = seq
            light.append((seq, id, rt, txid))
            if rt not in _KNOWN_TYPES:
                bad_types.append((seq, rt))
                continue
            if rt in (api.ADD, api.UPDATE, api.ADD_TX, api.UPDATE_TX):
                decode = _decoder(journal, urt, rt)
                if decode is None:
                    unknown.setdefault(urt, []).append(seq)
                else:
                    try:
                        decode(data, id)
                    except (ValueError, StoreError) as exc:
                        undecodable[seq] = f"record {id} (type {urt}): {exc}"
            elif rt == api.PREPARE and journal == "messages":
                try:
                    r.decode_xid(bytes(txdata) if txdata is not None else b"")
                except ValueError as exc:
                    undecodable[seq] = f"prepare of transaction {txid}: XID: {exc}"
            _replay(replayer, index, sink, seq, id, rt, txid, urt, data, txdata, orphans)
        conn.rollback()
    failed = set(index.fail_open(last, sink))
    result_records = replayer.result()
    live_large = {
        rec.id for rec in result_records.records if rec.user_record_type == r.ADD_LARGE_MESSAGE
    }
    name = table.name
    findings: list[DbFinding] = [
        DbFinding(
            ERROR,
            "bad-record-type",
            name,
            seq,
            f"row has record type {rt}, not one of 10..19 (a load refuses the table here)",
            (seq,),
        )
        for seq, rt in bad_types
    ]
    bad = {seq for seq, _rt in bad_types}
    uncommitted: dict[int, list[int]] = {}
    dead: list[int] = []
    needed = 0
    for seq, id, rt, txid in light:
        if seq in bad:
            continue
        if index.row_needed(seq, id, rt, txid):
            needed += 1
            if seq in undecodable:
                findings.append(
                    DbFinding(
                        ERROR,
                        "undecodable",
                        name,
                        seq,
                        f"{undecodable[seq]} (the storage manager's load refuses it)",
                        (seq,),
                        (id,),
                    )
                )
        elif rt in _TX_ROWS and txid in failed:
            uncommitted.setdefault(txid, []).append(seq)
        else:
            dead.append(seq)
    gone = set(dead).union(*uncommitted.values())
    unknown_live = {urt: [s for s in seqs if s not in gone] for urt, seqs in unknown.items()}
    for urt, seqs in sorted(unknown_live.items()):
        if seqs:
            findings.append(
                DbFinding(
                    WARNING,
                    "unknown-user-record-type",
                    name,
                    seqs[0],
                    f"{len(seqs)} row(s) of user record type {urt}, which the storage "
                    "manager does not know (a load logs and keeps them)",
                    tuple(seqs),
                )
            )
    for txid, seqs in uncommitted.items():
        findings.append(
            DbFinding(
                WARNING,
                "uncommitted-transaction",
                name,
                seqs[0],
                f"transaction {txid}: {len(seqs)} row(s) never committed, rolled back or "
                "prepared (a crash); a load drops them and deletes them",
                tuple(seqs),
                (txid,),
            )
        )
    refs = [(s, i) for s, i, urt in orphans if journal == "messages" and urt in _REF_UPDATES]
    ref_seqs = {s for s, _i in refs}
    other_orphans = [(s, i) for s, i, _u in orphans if s not in ref_seqs]
    if refs:
        findings.append(
            DbFinding(
                WARNING,
                "update-without-add",
                name,
                refs[0][0],
                f"{len(refs)} UPDATE row(s) of message ids no ADD made live (ids "
                f"{_ids_text([i for _s, i in refs])}): the storage manager ignores them",
                tuple(s for s, _i in refs),
                tuple(i for _s, i in refs),
            )
        )
    if other_orphans:
        findings.append(
            DbFinding(
                WARNING,
                "update-without-add",
                name,
                other_orphans[0][0],
                f"{len(other_orphans)} UPDATE row(s) of ids no ADD made live (ids "
                f"{_ids_text([i for _s, i in other_orphans])}): a load keeps them as "
                "entries; not removed by repair",
                (),
            )
        )
    if dead:
        garbled = sum(1 for s in dead if s in undecodable)
        findings.append(
            DbFinding(
                WARNING,
                "dead-rows",
                name,
                dead[0],
                f"{len(dead)} row(s) no load needs (seqs {_ids_text(dead)})"
                + (f", {garbled} of them undecodable" if garbled else "")
                + "; the first batch after a load deletes them",
                tuple(dead),
            )
        )
    summary = TableSummary(name, journal, len(light), needed, len(result_records.records))
    return summary, findings, live_large


def _replay(
    replayer: Replayer,
    index: RowIndex,
    sink: _Sink,
    seq: int,
    id: int,
    rt: int,
    txid: int,
    urt: int,
    data: bytes,
    txdata: Any,
    orphans: list[tuple[int, int, int]],
) -> None:
    """One row through the load's rules (store.db.journal.DatabaseJournal._replay)."""
    if rt == api.ADD:
        replayer.add(id, urt, data)
        index.add(id)
    elif rt == api.UPDATE:
        if not replayer.is_live(id):
            orphans.append((seq, id, urt))
        replayer.update(id, urt, data)
        index.add(id)
    elif rt == api.ADD_TX:
        replayer.add_tx(txid, id, urt, data)
        index.tx_record(txid, rt, id, seq)
    elif rt == api.UPDATE_TX:
        replayer.update_tx(txid, id, urt, data)
        index.tx_record(txid, rt, id, seq)
    elif rt == api.DELETE_TX:
        replayer.delete_tx(txid, id)
        index.tx_record(txid, rt, id, seq)
    elif rt == api.PREPARE:
        replayer.prepare(txid, bytes(txdata) if txdata is not None else b"")
        index.prepare(txid, seq)
    elif rt == api.COMMIT:
        replayer.commit(txid)
        index.commit(txid, seq, sink)
    elif rt == api.ROLLBACK:
        replayer.rollback(txid)
        index.rollback(txid, seq, sink)
    elif rt == api.DELETE:
        replayer.delete(id)
        index.delete(id, seq, sink)
    # EVENT: nothing; the row is dead.


def _ids_text(values: list[int], limit: int = 10) -> str:
    shown = ", ".join(map(str, values[:limit]))
    return shown + (f", … ({len(values) - limit} more)" if len(values) > limit else "")


def _scan_large(
    engine: Engine, table: sa.Table, live_large: set[int]
) -> tuple[TableSummary, list[DbFinding]]:
    c = table.c
    descriptors: dict[int, tuple[int, Any]] = {}  # message id -> (row id, data)
    chunks: dict[int, dict[str, int]] = {}  # message id -> filename -> row id
    bad: list[DbFinding] = []
    rows = 0
    with engine.connect() as conn:
        for row_id, filename, extension, data in conn.execute(
            sa.select(c.id, c.filename, c.extension, c.data).order_by(c.id)
        ):
            rows += 1
            try:
                row = parse_row_name(table.name, row_id, filename, extension)
            except CorruptionError as exc:
                bad.append(DbFinding(ERROR, "bad-row", table.name, int(row_id), exc.reason))
                continue
            if row.extension == MSG_EXTENSION:
                descriptors[row.message_id] = (int(row_id), data)
            else:
                chunks.setdefault(row.message_id, {})[filename] = int(row_id)
    name = table.name
    findings: list[DbFinding] = bad
    reader = DatabaseLargeMessages(engine, table, read_only=True)
    for owner in sorted(set(chunks) - set(descriptors)):
        ids = sorted(chunks[owner].values())
        findings.append(
            DbFinding(
                WARNING,
                "incomplete-body",
                name,
                ids[0],
                f"message {owner}: {len(ids)} chunk row(s) without a descriptor (a body "
                "cut off by a crash); the next open deletes them",
                tuple(ids),
                (owner,),
            )
        )
    for owner, (row_id, data) in sorted(descriptors.items()):
        try:
            count = decode_descriptor(f"{name} row {row_id}", owner, data).chunk_count
        except CorruptionError as exc:
            findings.append(
                DbFinding(
                    ERROR,
                    "missing-chunks",
                    name,
                    row_id,
                    f"message {owner}: {exc.reason}",
                    (row_id,),
                    (owner,),
                )
            )
            continue
        have = chunks.get(owner, {})
        missing = [k for k in range(count) if chunk_name(owner, k) not in have]
        if missing:
            findings.append(
                DbFinding(
                    ERROR,
                    "missing-chunks",
                    name,
                    row_id,
                    f"message {owner}: chunk(s) {_ids_text(missing)} of {count} missing: "
                    "the body cannot be read",
                    (row_id,),
                    (owner,),
                )
            )
            continue
        try:
            check_body(reader, owner)
        except CorruptionError as exc:
            findings.append(
                DbFinding(
                    ERROR,
                    "damaged-body",
                    name,
                    row_id,
                    f"message {owner}: {exc.reason} (at body offset {exc.offset})",
                    (row_id,),
                    (owner,),
                )
            )
    for owner in sorted(live_large - set(descriptors)):
        findings.append(
            DbFinding(
                ERROR,
                "large-body-missing",
                name,
                None,
                f"large message {owner} is live in the message journal but its body has "
                "no rows here",
                (),
                (owner,),
            )
        )
    return TableSummary(name, "large messages", rows), findings


def _scan_pages(engine: Engine, schema: StoreSchema) -> tuple[list[TableSummary], list[DbFinding]]:
    d = schema.page_store
    prefix = schema.names.page_store
    with engine.connect() as conn:
        rows = conn.execute(sa.select(d.c.id, d.c.filename, d.c.data).order_by(d.c.id)).all()
        existing = set()
        for table_name in sa.inspect(conn).get_table_names():
            rest = table_name.lower()[len(prefix) :]
            if table_name.lower().startswith(prefix) and rest.isdigit():
                existing.add(int(rest))
        directory = [row for row in rows if row[1] == DIRECTORY_ROW]
        findings: list[DbFinding] = []
        listed: set[int] = set()
        if directory:
            try:
                listed = decode_directory(bytes(directory[0][2] or b""))
            except ValueError as exc:
                findings.append(
                    DbFinding(
                        ERROR,
                        "bad-directory",
                        d.name,
                        int(directory[0][0]),
                        f"the page directory does not decode: {exc}",
                    )
                )
        summaries = [TableSummary(d.name, "page store", len(rows))]
        for suffix in sorted(listed - existing):
            findings.append(
                DbFinding(
                    ERROR,
                    "missing-page-table",
                    f"{prefix}{suffix}",
                    None,
                    f"the page directory lists table {prefix}{suffix}, which does not "
                    "exist: a load ignores it (its paged messages are gone)",
                    (),
                    (suffix,),
                )
            )
        for suffix in sorted(existing - listed):
            table = schema.page_table(suffix)
            names = set(conn.execute(sa.select(table.c.filename).distinct()).scalars())
            pages = {n for n in names if n is None or page_number_of(n) is not None}
            if pages and TOMBSTONE_ROW not in names:  # store.paging.database: kept, reported
                findings.append(
                    DbFinding(
                        ERROR,
                        "unlisted-page-table-with-pages",
                        table.name,
                        None,
                        f"page table {table.name} holds page rows but the page directory does "
                        "not list it: open refuses the store (`store data repair "
                        "--adopt-pages` or `--remove-pages`)",
                    )
                )
                continue
            findings.append(
                DbFinding(
                    WARNING,
                    "unlisted-page-table",
                    f"{prefix}{suffix}",
                    None,
                    f"page table {prefix}{suffix} is not in the page directory (a crash "
                    "while it was created or removed): the next open drops it",
                    (),
                    (suffix,),
                )
            )
        for suffix in sorted(listed & existing):
            table = schema.page_table(suffix)
            count = conn.execute(sa.select(sa.func.count()).select_from(table)).scalar() or 0
            summaries.append(TableSummary(table.name, "pages", int(count)))
        conn.rollback()
    return summaries, findings


# -- repair -----------------------------------------------------------------------------------
