"""Reconnecting a database journal's writer after an outage and settling the batch that
failed (:mod:`store.db.writer`, "Outages"; docs/db.md "Outages").

A fresh connection first passes the journal's ``reconnected`` check: the store's schema
revision, read again (:func:`revision_check`), must be the one the store opened with. A
database restored from an older backup, or migrated by someone else, while the store was away
is then SchemaError, and the writer stops for good before it settles or writes anything
(writing this code's rows into another revision's tables, or into a database that lost what
the store had committed, would mix two histories).

A batch is one transaction, so looking up its rows by their ``seq`` keys on a fresh
connection tells whether its commit was applied (its answer lost) or not: any row of the
range found means all of it is there; none found means it was not, or every row it inserted
it also deleted (then committing it again leaves the same rows).

Thread-safety: functions run on the writer thread with connections of their own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.pool import StaticPool

from store.db.dialects import JournalSQL
from store.db.writer import Batch, Fence, ReconnectError, is_outage
from store.errors import SchemaError, StoreError, StoreUnavailableError

__all__ = [
    "applied",
    "first_line",
    "forget_pool",
    "invalidate",
    "reconnect",
    "reporter",
    "revision_check",
]

_log = logging.getLogger(__name__)


def reconnect(
    engine: Engine,
    sql: JournalSQL,
    batch: Batch,
    table: str,
    check: Callable[[Any], None] | None = None,
) -> tuple[Any, bool]:
    """A fresh writer connection from ``engine`` (prepared for writing) and whether ``batch``
    was applied already; ``check`` runs first on the DB-API connection.
    Raises ReconnectError (naming ``table``) while no connection works; the pool's idle
    connections are dropped then. Raises what ``check`` raises (SchemaError), the connection
    given back."""
    try:
        conn = engine.raw_connection()
    except Exception as exc:
        forget_pool(engine)
        raise ReconnectError(
            f"database write to table {table}: cannot connect: {type(exc).__name__}: "
            f"{first_line(exc)}"
        ) from exc
    try:
        if check is not None:
            check(conn.driver_connection)
        done = batch.first_seq > 0 and applied(conn.driver_connection, sql, batch)
        sql.prepare_writer(conn.driver_connection)
    except StoreError:
        invalidate(conn)
        raise
    except Exception as exc:
        invalidate(conn)
        forget_pool(engine)
        # A read that fails for its own reasons (the table gone) is no outage: it counts
        # as a failed rerun, so the writer stops instead of retrying for ever.
        kind = ReconnectError if is_outage(exc) else StoreUnavailableError
        raise kind(
            f"database read of table {table} failed: {type(exc).__name__}: {first_line(exc)}"
        ) from exc
    if done:
        _log.info(
            "table %s: a commit whose answer was lost had been applied (rows %d-%d)",
            table,
            batch.first_seq,
            batch.last_seq,
        )
    return conn, done


def applied(conn: Any, sql: JournalSQL, batch: Batch) -> bool:
    """Whether any row ``batch`` inserted exists on the DB-API connection ``conn`` (one
    transaction: then all of it does). Raises what the driver raises."""
    cursor = conn.cursor()
    try:
        cursor.execute(sql.count_seqs.sql, (batch.first_seq, batch.last_seq))
        row = cursor.fetchone()
    finally:
        cursor.close()
    conn.rollback()  # ends the read transaction where there is one
    return bool(row and row[0])


def forget_pool(engine: Engine) -> None:
    """Drop the pool's idle connections (after a restart they are all dead, and each would
    fail one attempt), keeping an in-memory SQLite database's only connection. Connections
    checked out stay usable; nothing is closed (a cut network could hang a close)."""
    if not isinstance(engine.pool, StaticPool):
        engine.dispose(close=False)


def invalidate(conn: Any) -> None:
    """Invalidate a pooled connection (never back to the pool in an unknown state); raises
    nothing."""
    try:
        conn.invalidate()
    except Exception:
        _log.debug("invalidating a connection failed", exc_info=True)


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message, at most 300 characters."""
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else ""


def reporter(fence: Fence | None, table: str) -> Callable[[StoreError], None] | None:
    """The writer's ``gave_up`` for a journal of ``table`` under ``fence``: the fence's own
    ``gave_up`` (HA: the live lock is given up, :mod:`store.ha.database`), or None."""
    report = getattr(fence, "gave_up", None)
    if report is None:
        return None

    def gave_up(error: StoreError) -> None:
        report(f"table {table}: {error}")

    return gave_up


def revision_check(engine: Engine, version_table: str, expected: str) -> Callable[[Any], None]:
    """The ``reconnected`` check of a store's journals: on a DB-API connection, the revision
    in ``version_table`` must be ``expected`` (module docstring). The check raises
    SchemaError naming both, and what the driver raises when the read fails."""
    query = str(
        sa.select(sa.column("version_num"))
        .select_from(sa.table(version_table))
        .compile(dialect=engine.dialect)
    )

    def check(conn: Any) -> None:
        cursor = conn.cursor()
        try:
            cursor.execute(query)
            found = [str(row[0]) for row in cursor.fetchall()]
        finally:
            cursor.close()
        conn.rollback()
        if found != [expected]:
            now = ", ".join(found) or "none (the table is empty)"
            raise SchemaError(
                f"after the database came back, {version_table} holds schema revision {now}, "
                f"not {expected}, the revision this store opened with: the database was "
                "restored or migrated while the store was away; the store stops writing",
                hint="check what the database holds, then reopen the store (store db current)",
            )

    return check
