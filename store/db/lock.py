"""The store lock: one writer per database store (DESIGN §4; the HA node manager of §8 is how a
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

Thread-safety: :func:`acquire_store_lock` may be called from any thread; a lock object's
``release`` is idempotent and may be called from any thread.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import socket
import threading
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from store.db.dialects import MYSQL_LONG_SESSION
from store.db.schema import TableNames
from store.db.urls import DatabaseTarget
from store.errors import StoreLockedError, StoreUnavailableError

__all__ = ["StoreLock", "acquire_store_lock", "lock_key"]

_log = logging.getLogger(__name__)

# Stores this process holds, by identity: the same-process check for every database, and the
# only check JDBC databases get from this module.
_held: dict[str, str] = {}
_held_lock = threading.Lock()


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
        if conn.execute(sa.select(sa.func.pg_try_advisory_lock(key))).scalar():
            return StoreLock(
                identity, connection=conn, release_sql=sa.select(sa.func.pg_advisory_unlock(key))
            )
        holder = _postgresql_holder(conn, key)
    except sa.exc.SQLAlchemyError as exc:
        conn.close()
        raise StoreUnavailableError(f"locking the store failed: {exc}") from exc
    conn.close()
    raise _locked(names, holder)


def _postgresql_holder(conn: Connection, key: int) -> str:
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
        return "another session (it may have just released it)"
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
