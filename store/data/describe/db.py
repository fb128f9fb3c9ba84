"""The database store's side of :func:`store.data.describe.describe_store`: the node id from
the node-manager table, each journal table in ``seq`` order, the page tables and the
large-message table, with ``SELECT`` s only.

Each journal table is read twice, as the package :mod:`store.data.describe` says: first to
replay it as the load does (:class:`~store.journal.replay.Replayer` for what a load returns,
fed without bodies, and :class:`~store.db.rows.RowIndex` for which rows a load needs; the
dispatch mirrors :meth:`store.db.journal.DatabaseJournal.load`), then, once
:func:`store.db.maintenance.sweep_dead_rows` has named the rows no load needs, to produce
every row (those marked ``reclaimed``, or only counted without ``options.reclaimed``). A row
of a kind no journal writes is a problem of the summary: the load refuses it. Rows are
fetched in batches (a server-side cursor where the driver has one).

Thread-safety: one generator belongs to one thread.
"""

from __future__ import annotations

import collections
import contextlib
import os
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from store.data.describe import parts
from store.data.describe.model import DescribeOptions, Entry, Journal, NodeId, Record, Summary
from store.data.describe.records import decode_user_record, user_type_name
from store.db import refuse_live_lease
from store.db.dialects import journal_sql_for
from store.db.engine import create_store_engine, dispose_store_engine
from store.db.lock import StoreLock, acquire_store_lock
from store.db.maintenance import sweep_dead_rows
from store.db.rows import RowIndex
from store.db.schema import StoreSchema, TableNames
from store.db.urls import resolve_target
from store.db.writer import Batch
from store.errors import ConfigError, StoreLockedError, StoreUnavailableError
from store.journal.api import RecordType
from store.journal.replay import Replayer

if TYPE_CHECKING:
    from store.config import StoreConfig

__all__ = ["database_entries"]

_FETCH = 500
_NO_USER = frozenset(
    {RecordType.DELETE, RecordType.DELETE_TX, RecordType.COMMIT, RecordType.ROLLBACK}
)
_NODE_ID_ROW = 3
_FORCE_HINT = (
    "stop the broker first, or pass --force to read it anyway (reading rows without the "
    "store lock is safe)"
)


def database_entries(config: StoreConfig, options: DescribeOptions) -> Iterator[Entry]:
    """The entries of a database store (see :func:`store.data.describe.describe_store`)."""
    db = config.database_store
    assert db is not None
    target = resolve_target(db)
    if target.sqlite_path is not None and not os.path.exists(target.sqlite_path):
        raise ConfigError(
            f"no store in {target.display}: the database file does not exist",
            key="jdbc-connection-url",
            value=target.display,
            allowed="the URL of a database that holds a store",
        )
    engine, target = create_store_engine(db, target)
    lock: StoreLock | None = None
    try:
        with _unavailable(target.display):
            schema = StoreSchema(TableNames.from_config(db))
            existing = {n.lower() for n in sa.inspect(engine).get_table_names()}
            wanted = _wanted(schema, existing, options, target.display)
            if not options.force:
                try:
                    lock = acquire_store_lock(engine, target, schema.names)
                except StoreLockedError as exc:
                    raise StoreLockedError(str(exc), holder=exc.holder, hint=_FORCE_HINT) from exc
                if schema.node_manager.name.lower() in existing:
                    refuse_live_lease(engine, schema, db, hint=_FORCE_HINT)
            yield NodeId(
                node_id=_node_id(engine, schema, existing),
                source=f"{target.display} table {schema.node_manager.name}",
            )
            for name, table in wanted:
                yield from _journal(engine, target.display, name, table, options)
            if options.paging:
                yield from parts.database_paging(engine, schema, options)
            if options.large_messages:
                yield from parts.database_large_messages(engine, schema)
    finally:
        if lock is not None:
            lock.release()
        dispose_store_engine(engine)


@contextlib.contextmanager
def _unavailable(where: str) -> Iterator[None]:
    """Database errors as StoreUnavailableError naming ``where``."""
    try:
        yield
    except sa.exc.SQLAlchemyError as exc:
        raise StoreUnavailableError(
            f"reading the database store at {where} failed: {type(exc).__name__}: "
            f"{exc.__cause__ or exc}"
        ) from exc


def _wanted(
    schema: StoreSchema, existing: set[str], options: DescribeOptions, where: str
) -> list[tuple[str, sa.Table]]:
    """The journal tables to read, each checked to exist (else ConfigError: nothing here ever
    creates a store); the bindings table is checked even when neither is read."""
    chosen = [("bindings", schema.bindings, options.bindings)]
    chosen.append(("messages", schema.messages, options.messages))
    wanted = [(name, table) for name, table, on in chosen if on]
    checked = [t for _n, t in wanted] or [schema.bindings]
    missing = [t.name for t in checked if t.name.lower() not in existing]
    if missing:
        absent = (
            f"table {missing[0]} does not exist"
            if len(missing) == 1
            else f"tables {', '.join(missing)} do not exist"
        )
        raise ConfigError(
            f"no store in {where}: {absent}",
            key="bindings-table-name" if schema.bindings.name in missing else "message-table-name",
            value=missing[0],
            allowed="the table names of an existing store",
        )
    return wanted


def _node_id(engine: Engine, schema: StoreSchema, existing: set[str]) -> str | None:
    t = schema.node_manager
    if t.name.lower() not in existing:
        return None
    with engine.connect() as conn:
        value = conn.execute(sa.select(t.c.node_id).where(t.c.id == _NODE_ID_ROW)).scalar()
        conn.rollback()
    text = str(value).strip() if value is not None else ""
    return text or None


def _rows(engine: Engine, table: sa.Table, *, bodies: bool) -> Iterator[Any]:
    """Every row of ``table`` in ``seq`` order: (id, recordtype, txid, userrecordtype,
    record, txdata, seq), ``record`` None unless ``bodies``."""
    c = table.c
    columns = [c.id, c.recordtype, c.txid, c.userrecordtype, c.txdata, c.seq]
    if bodies:
        columns.append(c.record)
    stmt = sa.select(*columns).order_by(c.seq)
    with engine.connect() as conn:
        result = conn.execution_options(stream_results=True, yield_per=_FETCH).execute(stmt)
        try:
            for row in result:
                record = row[6] if bodies else None
                yield row[0], row[1], row[2], row[3], record, row[4], row[5]
        finally:
            result.close()
            conn.rollback()


class _Judge:
    """The first pass: the load's replay and row index, fed in ``seq`` order."""

    def __init__(self) -> None:
        self.replayer = Replayer()
        self.index = RowIndex()
        self.sink = Batch()
        self.problems: list[str] = []
        self.last = 0

    def feed(self, id: int, rt: int, txid: int, urt: int, txdata: bytes | None, seq: int) -> None:
        r, index, sink = self.replayer, self.index, self.sink
        self.last = max(self.last, seq)
        if rt == RecordType.ADD:
            r.add(id, urt, b"")
            index.add(id)
        elif rt == RecordType.UPDATE:
            r.update(id, urt, b"")
            index.add(id)
        elif rt in (RecordType.ADD_TX, RecordType.UPDATE_TX, RecordType.DELETE_TX):
            if rt == RecordType.ADD_TX:
                r.add_tx(txid, id, urt, b"")
            elif rt == RecordType.UPDATE_TX:
                r.update_tx(txid, id, urt, b"")
            else:
                r.delete_tx(txid, id)
            index.tx_record(txid, rt, id, seq)
        elif rt == RecordType.PREPARE:
            r.prepare(txid, bytes(txdata or b""))
            index.prepare(txid, seq)
        elif rt == RecordType.COMMIT:
            r.commit(txid)
            if not index.commit(txid, seq, sink):
                index.orphan_row(seq, sink)
        elif rt == RecordType.ROLLBACK:
            r.rollback(txid)
            if not index.rollback(txid, seq, sink):
                index.orphan_row(seq, sink)
        elif rt == RecordType.DELETE:
            r.delete(id)
            index.delete(id, seq, sink)
            index.orphan_row(seq, sink)
        elif rt == RecordType.EVENT:
            index.orphan_row(seq, sink)
        else:
            self.problems.append(f"row seq {seq} has record type {rt}, not one of 10..19")


def _journal(
    engine: Engine, where: str, name: str, table: sa.Table, options: DescribeOptions
) -> Iterator[Entry]:
    judge = _Judge()
    for id, rt, txid, urt, _body, txdata, seq in _rows(engine, table, bodies=False):
        judge.feed(int(id), int(rt), int(txid or 0), int(urt), txdata, int(seq))
    judge.index.fail_open(judge.last, judge.sink)
    dead: set[int] = set()
    if not judge.problems:
        sql = journal_sql_for(table, engine.dialect)
        dead = set(sweep_dead_rows(engine, sql, judge.index, threading.Lock(), judge.last))
    yield Journal(journal=name, store="database", where=f"{where} table {table.name}")
    budget = options.max_records
    shown = reclaimed = 0
    by_op: collections.Counter[int] = collections.Counter()
    by_user: collections.Counter[str] = collections.Counter()
    for id, rt, txid, urt, record, txdata, seq in _rows(engine, table, bodies=True):
        rt, seq = int(rt), int(seq)
        why = None
        if seq in dead:
            reclaimed += 1
            why = "a row no load needs (the next compaction deletes it)"
            if not options.reclaimed:
                continue
        else:
            by_op[rt] += 1
            if rt not in _NO_USER and rt != RecordType.PREPARE:
                by_user[user_type_name(int(urt))] += 1
            if budget is not None and budget <= 0:
                continue
            shown += 1
            if budget is not None:
                budget -= 1
        yield _record(
            name, int(id), rt, int(txid or 0), int(urt), record, txdata, seq, why, options
        )
    yield Summary(
        journal=name,
        records=sum(by_op.values()),
        shown=shown,
        files=None,
        by_op={_op_name(t): n for t, n in sorted(by_op.items())},
        by_user_type=dict(sorted(by_user.items())),
        reclaimed=reclaimed,
        problems=judge.problems,
        load=None if judge.problems else _load_counts(judge.replayer),
    )


def _load_counts(replayer: Replayer) -> dict[str, int]:
    loaded = replayer.result()
    return {
        "records": len(loaded.records),
        "prepared": len(loaded.prepared),
        "failed": len(loaded.failed),
    }


def _op_name(rt: int) -> str:
    try:
        return RecordType(rt).name
    except ValueError:
        return f"RECORD_TYPE_{rt}"


def _record(
    journal: str,
    id: int,
    rt: int,
    txid: int,
    urt: int,
    record: bytes | None,
    txdata: bytes | None,
    seq: int,
    why: str | None,
    options: DescribeOptions,
) -> Record:
    has_user = rt not in _NO_USER and rt != RecordType.PREPARE  # events have one too
    body = bytes(txdata or b"") if rt == RecordType.PREPARE else bytes(record or b"")
    known = 10 <= rt <= 19
    return Record(
        journal=journal,
        op=_op_name(rt),
        id=id,
        tx_id=txid,
        user_type=urt if has_user else None,
        user_type_name=user_type_name(urt) if has_user else None,
        size=len(body),
        body_size=len(body),
        body=b"" if options.safe and rt != RecordType.PREPARE else body,
        decoded=decode_user_record(rt, urt, body, id, safe=options.safe) if known else None,
        seq=seq,
        reclaimed=why,
    )
