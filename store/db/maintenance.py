"""Reading a journal table for compaction and statistics (the slow, occasional paths).

:func:`sweep_dead_rows` finds rows no load needs. With the row index deleting everything as it
dies, there normally are none; it exists for tables that went through a failure between a
batch and its cleanup in some older version, rows Artemis left behind (reference §4.6), or a
table edited by hand. It scans ``seq``, ``id``, ``recordtype`` and ``txid`` only (no bodies),
up to the ``seq`` reached when it started, and asks the row index about each row under the
journal's lock, a chunk at a time.

Thread-safety: functions take the lock they need; call them from any thread.
"""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy.engine import Engine

from store.db.dialects import JournalSQL
from store.db.rows import RowIndex
from store.errors import StoreUnavailableError

__all__ = ["sweep_dead_rows", "table_totals"]


def sweep_dead_rows(
    engine: Engine, sql: JournalSQL, index: RowIndex, lock: threading.Lock, upto: int
) -> list[int]:
    """The seqs of rows at or below ``upto`` that no load needs.

    Returns them in scan order. Raises StoreUnavailableError when the database fails.
    """
    dead: list[int] = []
    try:
        conn = engine.raw_connection()
        try:
            for rows in sql.stream(conn.driver_connection, sql.scan, (upto,)):
                with lock:
                    needed = index.row_needed
                    dead.extend(int(r[0]) for r in rows if not needed(r[0], r[1], r[2], r[3]))
            conn.rollback()
        finally:
            conn.close()
    except Exception as exc:
        raise StoreUnavailableError(
            f"compaction scan of table {sql.table.name} failed: {type(exc).__name__}: {exc}"
        ) from exc
    return dead


def table_totals(engine: Engine, sql: JournalSQL) -> tuple[int, int, int]:
    """(rows, bytes of bodies and XIDs, bytes of record bodies) of the table.

    Raises StoreUnavailableError when the database fails.
    """
    try:
        conn = engine.raw_connection()
        try:
            cursor = conn.cursor()
            try:
                cursor.execute(sql.totals.sql)
                rows, total = _first(cursor)
                cursor.execute(sql.record_bytes.sql)
                (records,) = _first(cursor)
            finally:
                cursor.close()
            conn.rollback()
        finally:
            conn.close()
    except Exception as exc:
        raise StoreUnavailableError(
            f"statistics of table {sql.table.name} failed: {type(exc).__name__}: {exc}"
        ) from exc
    return int(rows), int(total), int(records)


def _first(cursor: Any) -> Any:
    row = cursor.fetchone()
    return tuple(0 if v is None else v for v in row)
