"""Store lock: one writer per database store (docs/journal.md; docs/ha.md's node manager is how a
second process *waits* instead of failing).

A store is its database plus its table names, so two stores with different names can share
one database. Opening takes the lock at once and raises
:class:`~store.errors.StoreLockedError` naming the holder when another process (or another
open in this process) has it. Per database:

==============  ==========================================================================
database        lock
==============  ==========================================================================
PostgreSQL      ``pg_try_advisory_lock(key)`` on a dedicated autocommit connection, ``key``
                a 64-bit hash of the table names; the holder is found in ``pg_locks`` /
                ``pg_stat_activity`` (its ``application_name`` says pid and host). The server
                releases it when that connection dies, so a killed process never leaves it.
MySQL/MariaDB   ``GET_LOCK('store:<hash>', 0)`` on a dedicated connection (with a long
                ``wait_timeout`` so an idle lock connection is not dropped); the holder is
                ``IS_USED_LOCK`` → ``information_schema.PROCESSLIST``.
SQLite          ``flock`` on the sidecar file ``<database file>.<bindings table>.lock``
                (one per store, so stores with different names share a file), which names
                the holder's pid and host; the kernel releases it with the process.
JDBC (Derby,    a lock inside this process only; across processes the embedded engine's own
H2, …)          boot lock (Derby's ``db.lck``, H2's file lock) refuses a second process, and
                that refusal is reported as StoreLockedError by the opener. Server-mode JDBC
                databases have no cross-process store lock: use the HA node manager there.
==============  ==========================================================================

The **schema lock** (:func:`schema_lock`) is another lock: it serialises the schema changes
of one store (the first open's creation, ``store db upgrade``), and it *waits*, for at most
:data:`SCHEMA_LOCK_WAIT` seconds, because the second of two nodes starting together must see
the schema the first one creates, not fail. It is a thread lock of this process (per
database and table names), then per database:

==============  ==========================================================================
database        schema lock
==============  ==========================================================================
PostgreSQL      ``pg_try_advisory_xact_lock(key)``, ``key`` a hash of ``schema`` and the
                table names, polled, in the transaction that changes the schema (DDL is
                transactional there): it is released by that transaction's end
MySQL/MariaDB   ``GET_LOCK('store-schema:<hash>', 0)``, polled, on the connection that
                changes the schema, released after its commit (DDL commits implicitly, so
                the lock must outlive statements, and the version row must be visible to
                the next holder)
SQLite          ``BEGIN IMMEDIATE``: the database's write lock for the whole transaction
JDBC            the thread lock only: an embedded database (Derby, H2) is open in one
                process at a time (see :mod:`store.db.migrate` for servers)
==============  ==========================================================================

Polled rather than waited for in the database: a wait would be cut short by the statement
timeout (PostgreSQL) or the read timeout (PyMySQL), both ``jdbc-network-timeout``.

Thread-safety: :func:`acquire_store_lock` and :func:`schema_lock` may be called from any
thread; a lock object's ``release`` is idempotent and may be called from any thread.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from store.db.dialects import MYSQL_LONG_SESSION, SQLITE_WRITE_LOCK_OPTION
from store.db.schema import TableNames
from store.db.urls import DatabaseTarget
from store.errors import StoreLockedError, StoreUnavailableError

__all__ = ["SCHEMA_LOCK_WAIT", "StoreLock", "acquire_store_lock", "lock_key", "schema_lock"]

_log = logging.getLogger(__name__)

# Stores this process holds, by identity: the same-process check for every database, and the
# only check JDBC databases get from this module.
_held: dict[str, str] = {}
_held_lock = threading.Lock()

#: How long a schema change waits for another one on the same store, in seconds.
SCHEMA_LOCK_WAIT = 120.0
_POLL = 0.05
#: Attempts at the PostgreSQL store lock while its holder turns out to be gone already.
_RELEASED_RETRIES = 20
# The thread locks of the schema lock, by store (database and table names).
_schema_locks: dict[str, threading.Lock] = {}
_schema_locks_guard = threading.Lock()


def lock_key(names: TableNames) -> int:
    """The store's 64-bit lock key: a hash of its table names. Returns a signed int64."""
    text = "|".join(names.all()).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big", signed=True)


def _whoami() -> str:
    return f"pid {os.getpid()} on {socket.gethostname()}"


class StoreLock:
    """A held store lock; :meth:`release` gives it back. ``holder`` describes this holder.

    Thread-safety: :meth:`release` is idempotent and may be called from any thread.
    """

    def __init__(
        self,
        identity: str,
        *,
        connection: Connection | None = None,
        file: Any = None,
        release_sql: Any = None,
    ) -> None:
        self.identity = identity
        self.holder = _whoami()
        self._connection = connection
        self._file = file
        self._release_sql = release_sql
        self._released = False
        self._mutex = threading.Lock()

    def release(self) -> None:
        """Give the lock back. Idempotent; raises nothing (a lost connection frees it anyway)."""
        with self._mutex:
            if self._released:
                return
            self._released = True
        try:
            if self._connection is not None:
                try:
                    if self._release_sql is not None:
                        self._connection.execute(self._release_sql)
                finally:
                    # Discard rather than pool: the connection carries session state.
                    self._connection.invalidate()
                    self._connection.close()
            if self._file is not None:
                fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
                self._file.close()
        except Exception:
            _log.debug("releasing the store lock failed; the database frees it", exc_info=True)
        finally:
            with _held_lock:
                _held.pop(self.identity, None)


def _identity(target: DatabaseTarget, names: TableNames) -> str:
    if target.dialect == "sqlite":
        where = target.sqlite_path or f":memory:{id(target)}"
    elif target.jdbc is not None:
        where = target.jdbc.url
    else:
        where = target.url.render_as_string(hide_password=True)
    return f"{where}|{'|'.join(names.all())}"


def acquire_store_lock(engine: Engine, target: DatabaseTarget, names: TableNames) -> StoreLock:
    """Take the store's lock (see the module docstring) without waiting.

    Returns the held :class:`StoreLock`. Raises StoreLockedError naming the holder when another
    process or another open of this process holds it; StoreUnavailableError when the database
    cannot be reached.
    """
    identity = _identity(target, names)
    with _held_lock:
        if identity in _held:
            raise StoreLockedError(
                f"store (tables {names.bindings}, {names.messages}) is already open in this "
                f"process ({_held[identity]})",
                holder=_held[identity],
                hint="close the other Store first",
            )
        _held[identity] = _whoami()
    try:
        name = engine.dialect.name
        if name == "postgresql":
            return _postgresql(engine, identity, names)
        if name in ("mysql", "mariadb"):
            return _mysql(engine, identity, names)
        if name == "sqlite" and target.sqlite_path is not None:
            return _sqlite(target.sqlite_path, identity, names)
        return StoreLock(identity)
    except BaseException:
        with _held_lock:
            _held.pop(identity, None)
        raise


def _connect(engine: Engine) -> Connection:
    try:
        return engine.connect().execution_options(isolation_level="AUTOCOMMIT")
    except sa.exc.SQLAlchemyError as exc:
        raise StoreUnavailableError(
            f"cannot connect to the database to lock the store: {type(exc).__name__}: "
            f"{exc.__cause__ or exc}"
        ) from exc


def _locked(names: TableNames, holder: str) -> StoreLockedError:
    return StoreLockedError(
        f"store (tables {names.bindings}, {names.messages}) is held by {holder}",
        holder=holder,
        hint="only one process may write a store; a backup waits through the HA node manager",
    )


def _postgresql(engine: Engine, identity: str, names: TableNames) -> StoreLock:
    key = lock_key(names)
    conn = _connect(engine)
    try:
        me = f"store lock: {_whoami()}"[:63]
        conn.execute(sa.select(sa.func.set_config("application_name", me, False)))
        # A holder that is gone by the time we look for it (a session that just ended, e.g.
        # the backend of a process killed a moment ago) means the lock is free: try again.
        for _ in range(_RELEASED_RETRIES):
            if conn.execute(sa.select(sa.func.pg_try_advisory_lock(key))).scalar():
                return StoreLock(
                    identity,
                    connection=conn,
                    release_sql=sa.select(sa.func.pg_advisory_unlock(key)),
                )
            holder = _postgresql_holder(conn, key)
            if holder is not None:
                break
            time.sleep(_POLL)
        else:
            holder = "another session (it released the lock and took it again, or is ending)"
    except sa.exc.SQLAlchemyError as exc:
        conn.close()
        raise StoreUnavailableError(f"locking the store failed: {exc}") from exc
    conn.close()
    raise _locked(names, holder)


def _postgresql_holder(conn: Connection, key: int) -> str | None:
    """Who holds the advisory lock ``key``, or None when nobody does (any more)."""
    locks = sa.table(
        "pg_locks",
        sa.column("pid"),
        sa.column("locktype"),
        sa.column("classid"),
        sa.column("objid"),
        sa.column("objsubid"),
        sa.column("granted"),
    )
    activity = sa.table(
        "pg_stat_activity",
        sa.column("pid"),
        sa.column("application_name"),
        sa.column("client_addr"),
    )
    unsigned = key & 0xFFFF_FFFF_FFFF_FFFF
    query = (
        sa.select(activity.c.pid, activity.c.application_name, activity.c.client_addr)
        .select_from(locks.join(activity, locks.c.pid == activity.c.pid))
        .where(
            locks.c.locktype == "advisory",
            locks.c.granted.is_(True),
            sa.cast(locks.c.classid, sa.BigInteger) == unsigned >> 32,
            sa.cast(locks.c.objid, sa.BigInteger) == unsigned & 0xFFFF_FFFF,
            sa.cast(locks.c.objsubid, sa.Integer) == 1,
        )
    )
    row = conn.execute(query).first()
    if row is None:
        return None
    pid, app, addr = row
    return f"PostgreSQL backend {pid} ({app or 'no application name'}, client {addr or 'local'})"


def _mysql(engine: Engine, identity: str, names: TableNames) -> StoreLock:
    lock_name = f"store:{lock_key(names) & 0xFFFF_FFFF_FFFF_FFFF:016x}"
    conn = _connect(engine)
    try:
        # An idle connection is closed by the server after wait_timeout, losing the lock.
        conn.exec_driver_sql(MYSQL_LONG_SESSION)
        if conn.execute(sa.select(sa.func.get_lock(lock_name, 0))).scalar() == 1:
            return StoreLock(
                identity, connection=conn, release_sql=sa.select(sa.func.release_lock(lock_name))
            )
        holder_id = conn.execute(sa.select(sa.func.is_used_lock(lock_name))).scalar()
        processes = sa.table(
            "PROCESSLIST",
            sa.column("ID"),
            sa.column("USER"),
            sa.column("HOST"),
            schema="information_schema",
        )
        row = conn.execute(
            sa.select(processes.c.USER, processes.c.HOST).filter_by(ID=holder_id)
        ).first()
    except sa.exc.SQLAlchemyError as exc:
        conn.close()
        raise StoreUnavailableError(f"locking the store failed: {exc}") from exc
    conn.close()
    who = f" ({row[0]}@{row[1]})" if row else ""
    raise _locked(names, f"MySQL connection {holder_id}{who}")


def _sqlite(path: str, identity: str, names: TableNames) -> StoreLock:
    lock_path = f"{path}.{names.bindings}.lock"
    try:
        file = open(lock_path, "a+")  # noqa: SIM115 - held open for the life of the lock
    except OSError as exc:
        raise StoreUnavailableError(f"cannot open the lock file {lock_path}: {exc}") from exc
    try:
        fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        file.seek(0)
        holder = file.read().strip() or "another process"
        file.close()
        raise _locked(names, f"{holder} (lock file {lock_path})") from None
    file.seek(0)
    file.truncate()
    file.write(_whoami() + "\n")
    file.flush()
    return StoreLock(identity, file=file)


def _local_lock(key: str) -> threading.Lock:
    with _schema_locks_guard:
        return _schema_locks.setdefault(key, threading.Lock())


def _schema_key(names: TableNames) -> int:
    text = ("schema|" + "|".join(names.all())).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big", signed=True)


@contextmanager
def schema_lock(engine: Engine, names: TableNames, where: str) -> Iterator[Connection]:
    """Hold the schema lock of the store ``names`` (module docstring) on the database
    ``where`` names (:attr:`DatabaseTarget.display`): yields a connection in a transaction,
    committed when the block ends normally, rolled back otherwise, and the lock is released
    after that. Raises StoreLockedError when the lock stays taken for SCHEMA_LOCK_WAIT
    seconds; SQLAlchemy errors of the database as they come."""
    local = _local_lock(f"{where}|{'|'.join(names.all())}")
    if not local.acquire(timeout=SCHEMA_LOCK_WAIT):
        raise _schema_busy(names)
    try:
        with engine.connect() as conn:
            name = engine.dialect.name
            if name in ("mysql", "mariadb"):
                # Released only after the commit: the version row must be visible to the
                # next holder (the DDL itself commits implicitly on MySQL).
                lock_name = f"store-schema:{_schema_key(names) & 0xFFFF_FFFF_FFFF_FFFF:016x}"
                _poll(conn, sa.select(sa.func.get_lock(lock_name, 0)), names)
                conn.commit()
                try:
                    with conn.begin():
                        yield conn
                finally:
                    _release_mysql(conn, lock_name)
                return
            if name == "sqlite":
                conn.execution_options(**{SQLITE_WRITE_LOCK_OPTION: True})
            with conn.begin():
                if name == "postgresql":
                    key = _schema_key(names)
                    _poll(conn, sa.select(sa.func.pg_try_advisory_xact_lock(key)), names)
                yield conn
    finally:
        local.release()


def _poll(conn: Connection, statement: Any, names: TableNames) -> None:
    deadline = time.monotonic() + SCHEMA_LOCK_WAIT
    while conn.execute(statement).scalar() != 1:
        if time.monotonic() > deadline:
            raise _schema_busy(names)
        time.sleep(_POLL)


def _release_mysql(conn: Connection, lock_name: str) -> None:
    try:
        conn.execute(sa.select(sa.func.release_lock(lock_name)))
        conn.commit()
    except sa.exc.SQLAlchemyError:
        conn.invalidate()  # a closed session frees its locks


def _schema_busy(names: TableNames) -> StoreLockedError:
    return StoreLockedError(
        f"the schema of store {names.bindings} has been changing in another session for "
        f"{SCHEMA_LOCK_WAIT:.0f} s",
        holder="another session creating or upgrading the schema",
        hint="wait for the other start or store db upgrade to finish, then try again",
    )
