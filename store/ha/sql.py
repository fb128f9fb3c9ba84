"""Every per-database statement of the database node manager (DESIGN §8, CONVENTIONS 14).

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
the fence reads the lock row with a share lock (``FOR SHARE`` / ``LOCK IN SHARE MODE``) so
that a takeover waits for a batch in flight instead of racing it; a process stopped while such
a transaction is open would hold that lock forever, so the transaction carries an idle
timeout of at most the expiration: PostgreSQL ``idle_in_transaction_session_timeout`` set
with ``set_config(…, true)`` in the fence's own statement (transaction-local: nothing else
on the pooled connection is affected), MariaDB ``idle_transaction_timeout`` (whole seconds,
session-wide, set once per connection). SQLite has no such timeout: a frozen writer's
transaction holds the database's write lock, and the takeover waits for it (DESIGN §8).
JDBC databases get the check without the share lock.

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
    """MariaDB's idle-transaction bound (whole seconds, at least 1); MySQL has none."""
    if dialect.name in ("mysql", "mariadb") and getattr(dialect, "is_mariadb", False):
        return [f"SET SESSION idle_transaction_timeout = {max(1, int(expiration_ms) // 1000)}"]
    return []


class FenceSQL:
    """The fence's one statement for a dialect: the live-lock row (share-locked where the
    database can), the database's now, and on PostgreSQL the transaction's idle bound.

    ``sql`` is compiled for the driver's positional parameter style; :meth:`params` gives its
    parameters. Thread-safety: immutable.
    """

    def __init__(self, table: sa.Table, dialect: Dialect, expiration_ms: int) -> None:
        if not dialect.positional:
            dialect = type(dialect)(paramstyle="format")  # type: ignore[call-arg]
        clock = clock_for(dialect.name)
        self.clock = clock
        columns: list[Any] = [table.c.holder_id, table.c.holder_expiration_time, clock.expr]
        if dialect.name == "postgresql":
            timeout = sa.bindparam("idle", str(int(expiration_ms)), type_=sa.String)
            columns.append(sa.func.set_config("idle_in_transaction_session_timeout", timeout, True))
        stmt = sa.select(*columns).where(table.c.id == sa.bindparam("row", 1, type_=sa.Integer))
        if dialect.name in ("postgresql", "mysql", "mariadb"):
            stmt = stmt.with_for_update(read=True)
        compiled = stmt.compile(dialect=dialect)
        self.sql: str = compiled.string
        order = tuple(getattr(compiled, "positiontup", None) or ())
        values = compiled.construct_params()
        # Every parameter is fixed (the row, the timeout, set_config's own arguments).
        self._params: tuple[Any, ...] = tuple(values[name] for name in order)
        self.session = mariadb_session_setup(dialect, expiration_ms)

    def params(self) -> tuple[Any, ...]:
        """The statement's parameters, in placement order."""
        return self._params
