"""Every per-database statement of the database node manager (docs/ha.md, docs/conventions.md#14).

The lease is timed by the database's clock in UTC, as epoch milliseconds (ARTEMIS-1784 and
ARTEMIS-3679: never the local clock, never a local-time ``CURRENT_TIMESTAMP``):

==============  ============================================================================
database        "now" in epoch ms, UTC
==============  ============================================================================
PostgreSQL      ``CAST(EXTRACT(EPOCH FROM CLOCK_TIMESTAMP()) * 1000 AS BIGINT)`` (the wall
                clock at the statement, not the transaction's start)
MySQL/MariaDB   ``TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6)) DIV 1000``
                (pure UTC: no session time zone, no DST ambiguity)
SQLite          ``CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)``
JDBC (Derby,    ``CURRENT_TIMESTAMP``, a JVM-local timestamp converted to UTC here (the JVM
H2, …)          runs in this process's time zone)
==============  ============================================================================

What keeps a frozen holder's locks from blocking a takeover past ``jdbc-lock-expiration``:
the fence checks the lock row first (no lock) and re-reads it with a share lock (``FOR
SHARE`` / ``LOCK IN SHARE MODE``) only as the batch's last statement before ``COMMIT``, so
that a takeover waits for a commit in flight instead of racing it (see :class:`FenceSQL`); a
process stopped between that statement and its commit would hold the lock, so the
transaction carries an idle timeout of at most the expiration: PostgreSQL
``idle_in_transaction_session_timeout`` set with ``set_config(…, true)`` in the fence's first
statement (transaction-local: nothing else on the pooled connection is affected), MariaDB
``idle_transaction_timeout`` (whole seconds, session-wide, set once per connection). SQLite
has no such timeout: a frozen writer's transaction holds the database's write lock, and the
takeover waits for it (docs/ha.md#fencing). JDBC databases get the check without the share lock.

Thread-safety: pure functions and immutable values.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect

__all__ = ["Clock", "FenceSQL", "clock_for", "mariadb_session_setup", "session_setup"]

_PG_NOW = "CAST(EXTRACT(EPOCH FROM CLOCK_TIMESTAMP()) * 1000 AS BIGINT)"
_MYSQL_NOW = "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)"
_SQLITE_NOW = "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"


@dataclass(frozen=True, slots=True)
class Clock:
    """The database's "now": ``expr`` selects it, ``decode`` turns what was selected into
    epoch ms (UTC). Thread-safety: immutable."""

    expr: Any
    native_ms: bool
    #: A one-row table to select ``expr`` from where ``SELECT expr`` alone is not SQL (Derby).
    dummy: Any = None

    def query(self) -> Any:
        """``SELECT <now>`` for this database. Returns the statement."""
        stmt = sa.select(self.expr)
        return stmt if self.dummy is None else stmt.select_from(self.dummy)

    def decode(self, value: Any) -> int:
        """Epoch ms of a selected ``expr`` value. Raises ValueError for an unreadable one."""
        if self.native_ms:
            return int(value)
        if isinstance(value, str):
            value = dt.datetime.fromisoformat(value.strip())
        if isinstance(value, dt.datetime):
            if value.tzinfo is None:
                value = value.astimezone()  # JVM-local, as this process
            return int(value.timestamp() * 1000)
        raise ValueError(f"cannot read a database time from {value!r}")


def clock_for(dialect_name: str) -> Clock:
    """The clock of a dialect (module docstring). Returns it; raises nothing."""
    if dialect_name == "postgresql":
        return Clock(sa.literal_column(_PG_NOW, sa.BigInteger), True)
    if dialect_name in ("mysql", "mariadb"):
        return Clock(sa.literal_column(_MYSQL_NOW, sa.BigInteger), True)
    if dialect_name == "sqlite":
        return Clock(sa.literal_column(_SQLITE_NOW, sa.BigInteger), True)
    if dialect_name == "derby":
        return Clock(sa.func.current_timestamp(), False, sa.table("sysdummy1", schema="sysibm"))
    return Clock(sa.func.current_timestamp(), False)


def session_setup(dialect: Dialect, expiration_ms: int) -> list[str]:
    """Statements run on each new connection of the node manager's own engine: an idle
    transaction never outlives the lease (module docstring). Returns them (maybe none)."""
    if dialect.name == "postgresql":
        return [f"SET idle_in_transaction_session_timeout = {int(expiration_ms)}"]
    return mariadb_session_setup(dialect, expiration_ms)


def mariadb_session_setup(dialect: Dialect, expiration_ms: int) -> list[str]:
    """MariaDB's bounds on a frozen client (whole seconds, at least 1): an idle transaction
    (``idle_transaction_timeout``) and a half-sent or unread packet (``net_read_timeout``,
    ``net_write_timeout``, 30 and 60 s by default); MySQL has no idle-transaction bound."""
    seconds = max(1, int(expiration_ms) // 1000)
    if dialect.name in ("mysql", "mariadb") and getattr(dialect, "is_mariadb", False):
        return [
            f"SET SESSION idle_transaction_timeout = {seconds}, net_read_timeout = {seconds}, "
            f"net_write_timeout = {seconds}"
        ]
    return []


class _Statement:
    """A statement compiled for the driver's positional style, with fixed parameters."""

    __slots__ = ("params", "sql")

    def __init__(self, stmt: Any, dialect: Dialect) -> None:
        compiled = stmt.compile(dialect=dialect)
        self.sql: str = compiled.string
        order = tuple(getattr(compiled, "positiontup", None) or ())
        values = compiled.construct_params()
        # Every parameter is fixed (the row, the timeout, set_config's own arguments).
        self.params: tuple[Any, ...] = tuple(values[name] for name in order)


class FenceSQL:
    """The fence's statements for a dialect (module docstring):

    - ``check``, run first in a batch, before its statements: the live-lock row and the
      database's now, without a lock (and on PostgreSQL the transaction's idle bound);
    - ``lock`` (PostgreSQL, MySQL/MariaDB; None elsewhere), run last, just before the commit:
      the same row share-locked, so a takeover waits for this commit or this commit sees
      the takeover. Taken last on purpose: a client frozen in the middle of its statements
      (PostgreSQL does not time out a ``COPY`` waiting for client data, MariaDB waits for a
      half-sent packet ``net_read_timeout``) then holds no lock a takeover needs.

    Thread-safety: immutable.
    """

    def __init__(self, table: sa.Table, dialect: Dialect, expiration_ms: int) -> None:
        # From the engine's own dialect, which its first connection told whether the server
        # is MariaDB: the positional copy made below knows nothing of the server, and a
        # session setup chosen from it was empty, so a node frozen between a batch's share
        # lock and its commit kept a takeover out for good.
        self.session = mariadb_session_setup(dialect, expiration_ms)
        if not dialect.positional:
            dialect = type(dialect)(paramstyle="format")  # type: ignore[call-arg]
        clock = clock_for(dialect.name)
        self.clock = clock
        columns: list[Any] = [table.c.holder_id, table.c.holder_expiration_time, clock.expr]
        where = table.c.id == sa.bindparam("row", 1, type_=sa.Integer)
        locked = sa.select(*columns).where(where).with_for_update(read=True)
        if dialect.name == "postgresql":
            timeout = sa.bindparam("idle", str(int(expiration_ms)), type_=sa.String)
            columns.append(sa.func.set_config("idle_in_transaction_session_timeout", timeout, True))
        self.check = _Statement(sa.select(*columns).where(where), dialect)
        self.lock = (
            _Statement(locked, dialect)
            if dialect.name in ("postgresql", "mysql", "mariadb")
            else None
        )
