"""One instant of a database store for a whole report (issue 28).

A ``seq`` bound alone is no cut once anything is acknowledged: a delete removes rows in place,
and Spark reads each partition of each table with its own query at its own time, so an ack (or
a message moved between queues in one transaction) committed during a report is seen by some
partitions and not others: a moved message counted twice or not at all.

- **PostgreSQL** shares a snapshot across connections: the driver program opens a
  ``REPEATABLE READ`` transaction, exports its snapshot (``pg_export_snapshot()``) and keeps
  the transaction open until the report is written; every Spark read starts its session with
  ``SET TRANSACTION SNAPSHOT`` (:class:`store.reporting.sources.JdbcRead` ``snapshot``), so
  every partition of every table (journals, page tables, bounds) sees that one instant.
- **MariaDB / MySQL** has no way to share a snapshot between connections (``START TRANSACTION
  WITH CONSISTENT SNAPSHOT`` is per connection), **SQLite** none between processes: their
  reports are cut per table at the largest ``seq`` and read per partition, and the report says
  so (:func:`cut_note`) on its page and in its summary line;
- **embedded Derby** needs no snapshot: the report's JVM (Spark's) boots the database at its
  first read and shuts it down after the last (:func:`store.reporting.sources
  .release_embedded`), and no other process can open it meanwhile, so nothing writes during
  the report (:data:`EMBEDDED_DERBY`). **H2** (embedded or over TCP) shares no snapshot, and an
  embedded H2 database is closed between reads: its report is cut per table, like MariaDB's.

Thread-safety: :func:`exported_snapshot` is a context manager for the driver's one thread.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager

from store.config import DatabaseStoreConfig, db_dialect_of

__all__ = ["EMBEDDED_DERBY", "ONE_INSTANT", "cut_note", "exported_snapshot"]

#: What a report says of a PostgreSQL cut.
ONE_INSTANT = "one instant of the database (a PostgreSQL snapshot shared by every read)"
#: What a report says of an embedded Derby database's cut.
EMBEDDED_DERBY = (
    "one instant of the database (embedded Derby, booted by the report alone from its first "
    "read to its last: nothing else can write to it meanwhile)"
)


def cut_note(db: DatabaseStoreConfig | None, snapshot: str | None) -> str | None:
    """What the report says about its cut: None for a file source (files as read), else
    :data:`ONE_INSTANT` or why the cut is not one instant. Raises nothing."""
    if db is None:
        return None
    if snapshot is not None:
        return ONE_INSTANT
    dialect = db_dialect_of(db.jdbc_connection_url)
    if dialect == "derby" and not db.jdbc_connection_url.lower().startswith("jdbc:derby://"):
        return EMBEDDED_DERBY
    why = {
        "mysql": "MariaDB/MySQL cannot share a snapshot between connections",
        "sqlite": "SQLite cannot share a snapshot between connections",
        "h2": "H2 cannot share a snapshot between connections",
        "postgresql": "the PostgreSQL snapshot could not be exported (no psycopg here)",
    }.get(dialect, "this database cannot share a snapshot between connections")
    return (
        f"NOT one instant: {why}; each table is cut at its largest seq and each partition read "
        "at its own time, so acks committed during the report may be counted in some "
        "partitions and not in others"
    )


@contextmanager
def exported_snapshot(db: DatabaseStoreConfig | None) -> Iterator[str | None]:
    """Yield the id of a PostgreSQL snapshot of ``db`` held open until the block ends, or None
    when ``db`` is None, not PostgreSQL, or this install lacks the store's Python driver for
    it (psycopg). Raises StoreUnavailableError when the database cannot be reached."""
    if db is None or db_dialect_of(db.jdbc_connection_url) != "postgresql":
        yield None
        return
    try:
        available = importlib.util.find_spec("psycopg") is not None
    except ImportError:
        available = False
    if not available:
        yield None
        return
    import sqlalchemy as sa

    from store.db.engine import create_store_engine, dispose_store_engine

    engine, _target = create_store_engine(db)
    try:
        with engine.connect() as conn:
            conn = conn.execution_options(isolation_level="REPEATABLE READ")
            with conn.begin():
                snapshot = conn.execute(sa.text("SELECT pg_export_snapshot()")).scalar_one()
                yield str(snapshot)
    finally:
        dispose_store_engine(engine)
