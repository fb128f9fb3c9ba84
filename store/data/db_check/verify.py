"""Verifying and repairing a database store offline: ``store data verify`` / ``repair`` on
PostgreSQL, MariaDB/MySQL, SQLite (and the JDBC databases) — the counterpart of
:mod:`store.file.verify` and :mod:`store.file.repair`.

:func:`verify_database` reads every row of the two journal tables in ``seq`` order, with the
load's query, through the load's own row dispatch (:class:`store.db.row_replay.RowReplay`:
:class:`store.journal.replay.Replayer` for what a load returns, :class:`store.db.rows.RowIndex`
for which rows it needs), decodes every record body with the storage manager's codecs, and
lists **every** finding with its table and ``seq`` (the file verify's path and offset). It
also reads the large-message table and the page-store directory. It changes nothing.

This module holds the entry points; the scans are :mod:`store.data.db_check.verify_journal`
(the journal tables) and :mod:`store.data.db_check.verify_files` (the large-message table and
the page store), the report's dataclasses :mod:`store.data.db_check.report`.

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

:func:`store.data.db_check.repair.repair_database` removes what a load ignores anyway, on this
module's findings.

Both take the store lock (:func:`store.db.lock.acquire_store_lock`) for their duration and
release it, so a store a live process holds is refused with StoreLockedError naming the holder;
``verify_database(force=True)`` reads without the lock. They return result dataclasses and never
print (docs/conventions.md#5, #10).

Thread-safety: each call works alone on its store, under the store lock.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from store.config import StoreConfig
from store.data.db_check.report import ERROR, DatabaseVerifyReport, DbFinding, TableSummary
from store.data.db_check.verify_files import scan_large, scan_pages
from store.data.db_check.verify_journal import scan_journal
from store.db import refuse_live_lease
from store.db.engine import create_store_engine, dispose_store_engine
from store.db.lock import acquire_store_lock
from store.db.migrate import ensure_schema
from store.db.schema import StoreSchema, TableNames
from store.db.sqlstates import booted_elsewhere
from store.errors import (
    ConfigError,
    SchemaError,
    StoreError,
    StoreLockedError,
    StoreUnavailableError,
)

__all__ = [
    "DatabaseVerifyReport",
    "DbFinding",
    "TableSummary",
    "opened",
    "verify_database",
    "verify_opened",
]


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
        summary, found, large = scan_journal(engine, table, journal)
        tables.append(summary)
        findings.extend(found)
        live_large |= large
    summary, found = scan_large(engine, schema.large_messages, live_large)
    tables.append(summary)
    findings.extend(found)
    summaries, found = scan_pages(engine, schema)
    tables.extend(summaries)
    findings.extend(found)
    return DatabaseVerifyReport(where, tables, findings)
