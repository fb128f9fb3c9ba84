"""Building the SQLAlchemy engine of a database store (docs/config.md, reference §4.2).

One engine per store; both journals, the lock, migrations and the other database parts share
its pool. What is set here, per database:

===============  =====================================================================
database         settings
===============  =====================================================================
PostgreSQL       ``statement_timeout`` and ``tcp_user_timeout`` = ``jdbc-network-timeout``,
                 ``connect_timeout`` (its seconds, at least 2), TCP keepalives,
                 ``application_name`` = ``store:<message table>`` unless the URL names one
MySQL/MariaDB    PyMySQL ``read_timeout`` / ``write_timeout`` / ``connect_timeout``
SQLite           ``busy_timeout`` = the timeout; WAL journal with ``synchronous=FULL``
                 (a commit is durable when it returns); sqlite3 in autocommit mode so the
                 store's explicit ``BEGIN``/``COMMIT`` are the only ones (``BEGIN IMMEDIATE``
                 on a connection with ``SQLITE_WRITE_LOCK_OPTION``); the database file's
                 folder is created when missing
JDBC             ``setQueryTimeout`` on every statement, ``setNetworkTimeout`` where the
                 driver has one (see :mod:`store.db.jdbc_dbapi`)
===============  =====================================================================

A ``jdbc-network-timeout`` of 0 means no timeout. The pool follows the DBCP2-style
data-source properties (:func:`store.db.urls.pool_options`; Artemis's default is an
unbounded pool). Statement parameters are never put into SQLAlchemy's error messages
(``hide_parameters``).

Thread-safety: the engine is thread-safe; this module's functions are pure.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import weakref
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.pool import StaticPool

from store.config import DatabaseStoreConfig
from store.db.dialects import (
    SQLITE_BEGIN,
    SQLITE_BEGIN_WRITE,
    SQLITE_FILE_PRAGMAS,
    SQLITE_MEMORY_PRAGMAS,
    SQLITE_WRITE_LOCK_OPTION,
)
from store.db.urls import DatabaseTarget, pool_options, resolve_target
from store.errors import StoreIOError

__all__ = ["create_store_engine", "dispose_store_engine", "read_only_sessions"]

_log = logging.getLogger(__name__)

# Embedded Derby: a database booted by this process cannot be opened by any other process until
# it is shut down, so the last engine of a database shuts it down (it reboots in milliseconds).
_embedded_lock = threading.Lock()
_embedded_users: dict[str, int] = {}
_embedded_of: weakref.WeakKeyDictionary[Engine, tuple[str, Any]] = weakref.WeakKeyDictionary()


def _embedded_derby(jdbc_url: str) -> str | None:
    """The database name of an embedded, on-disk Derby URL (None for anything else)."""
    if not jdbc_url.lower().startswith("jdbc:derby:"):
        return None
    name = jdbc_url[len("jdbc:derby:") :].split(";", 1)[0]
    if not name or name.startswith("//") or name.lower().startswith("memory:"):
        return None
    return name


def _postgresql_args(
    target: DatabaseTarget, timeout_ms: int, app: str
) -> tuple[Any, dict[str, Any]]:
    url = target.url
    query = dict(url.query)
    args: dict[str, Any] = dict(target.connect_args)
    options = [str(query.pop("options"))] if "options" in query else []
    if timeout_ms > 0:
        options.append(f"-c statement_timeout={timeout_ms}")
        query.setdefault("connect_timeout", str(max(2, math.ceil(timeout_ms / 1000))))
        query.setdefault("tcp_user_timeout", str(timeout_ms))
        query.setdefault("keepalives", "1")
        query.setdefault("keepalives_idle", str(max(1, timeout_ms // 4000)))
        query.setdefault("keepalives_interval", str(max(1, timeout_ms // 8000)))
        query.setdefault("keepalives_count", "3")
    if options:
        args["options"] = " ".join(options)
    query.setdefault("application_name", app[:63])
    return url.set(query=query), args


def _mysql_args(target: DatabaseTarget, timeout_ms: int) -> dict[str, Any]:
    args: dict[str, Any] = dict(target.connect_args)
    if timeout_ms > 0:
        seconds = timeout_ms / 1000
        args.setdefault("read_timeout", seconds)
        args.setdefault("write_timeout", seconds)
        args.setdefault("connect_timeout", max(1, math.ceil(seconds)))
    return args


def _sqlite_folder(path: str) -> None:
    # sqlite3 creates the file but not its folder, and the store lock's file sits beside it.
    # (Embedded Derby creates missing folders itself.)
    folder = os.path.dirname(path)
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise StoreIOError(
            f"cannot create the folder of the SQLite database {path}: {exc.strerror or exc}",
            path=folder,
            hint="check jdbc-connection-url (a relative path follows the configuration file)",
        ) from exc


def _sqlite_engine(target: DatabaseTarget, timeout_ms: int, pool: dict[str, Any]) -> Engine:
    if target.sqlite_path is not None:
        _sqlite_folder(target.sqlite_path)
    args = {"timeout": timeout_ms / 1000 if timeout_ms > 0 else 365 * 86400.0}
    args["check_same_thread"] = False
    if target.sqlite_path is None:
        engine = sa.create_engine(
            target.url, connect_args=args, poolclass=StaticPool, hide_parameters=True
        )
    else:
        engine = sa.create_engine(target.url, connect_args=args, hide_parameters=True, **pool)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, record: Any) -> None:
        dbapi_connection.isolation_level = None  # explicit BEGIN only (see module docstring)
        cursor = dbapi_connection.cursor()
        pragmas = SQLITE_MEMORY_PRAGMAS if target.sqlite_path is None else SQLITE_FILE_PRAGMAS
        for pragma in pragmas:
            cursor.execute(pragma)
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        write = connection.get_execution_options().get(SQLITE_WRITE_LOCK_OPTION, False)
        connection.exec_driver_sql(SQLITE_BEGIN_WRITE if write else SQLITE_BEGIN)

    return engine


def _jdbc_engine(target: DatabaseTarget, timeout_ms: int, pool: dict[str, Any]) -> Engine:
    from store.db.jdbc_dbapi import connect
    from store.db.jdbc_dialect import register_dialects

    register_dialects()
    jdbc = target.jdbc
    assert jdbc is not None

    def creator() -> Any:
        return connect(
            jdbc.url, jdbc.driver_class, jdbc.classpath, jdbc.properties, timeout_ms=timeout_ms
        )

    engine = sa.create_engine(target.url, creator=creator, hide_parameters=True, **pool)
    database = _embedded_derby(jdbc.url)
    if database is not None:
        with _embedded_lock:
            _embedded_users[database] = _embedded_users.get(database, 0) + 1
            _embedded_of[engine] = (database, jdbc)
    return engine


def read_only_sessions(engine: Engine) -> None:
    """Make every new connection of ``engine`` refuse writes, as the database enforces them:
    PostgreSQL ``SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY``, MySQL/MariaDB
    ``SET SESSION TRANSACTION READ ONLY``, SQLite ``PRAGMA query_only = ON``. For the read-only
    tools (:mod:`store.opening.read_only`): a write a code path would still attempt fails with
    the database's own error instead of changing the store. JDBC connections are left as they
    are (the read-only opener writes nothing there either; only the guard is missing).
    Call before the first connection. Returns None; raises nothing."""
    statement = {
        "postgresql": "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY",
        "mysql": "SET SESSION TRANSACTION READ ONLY",
        "mariadb": "SET SESSION TRANSACTION READ ONLY",
        "sqlite": "PRAGMA query_only = ON",
    }.get(engine.dialect.name)
    if statement is None:
        return

    @event.listens_for(engine, "connect")
    def _read_only(dbapi_connection: Any, record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(statement)
        finally:
            cursor.close()
        commit = getattr(dbapi_connection, "commit", None)
        if commit is not None and engine.dialect.name != "sqlite":
            commit()  # psycopg opens a transaction for the SET; end it


def dispose_store_engine(engine: Engine) -> None:
    """Dispose of a store's engine; the last engine of an embedded Derby database also shuts
    that database down, so another process can open it. Returns None; raises nothing."""
    engine.dispose()
    with _embedded_lock:
        entry = _embedded_of.pop(engine, None)
        if entry is None:
            return
        database, jdbc = entry
        left = _embedded_users[database] = _embedded_users[database] - 1
        if left:
            return
        del _embedded_users[database]
    _shutdown_derby(database, jdbc)


def _shutdown_derby(database: str, jdbc: Any) -> None:
    from store.db.jvm import load_driver

    try:
        import jpype

        driver = load_driver(jdbc.driver_class, jdbc.classpath)
        driver.connect(f"jdbc:derby:{database};shutdown=true", jpype.java.util.Properties())
    except Exception as exc:  # Derby reports a clean shutdown as SQLState 08006
        state = getattr(exc, "getSQLState", lambda: None)()
        if state != "08006":
            _log.warning("shutting down embedded Derby database %s failed: %s", database, exc)


def create_store_engine(
    config: DatabaseStoreConfig, target: DatabaseTarget | None = None
) -> tuple[Engine, DatabaseTarget]:
    """Create the engine of the store ``config`` describes (connecting lazily).

    Returns ``(engine, target)``. Raises ConfigError for a URL or property that cannot be used,
    StoreIOError when the folder of a SQLite database file cannot be created. A connection the
    database refuses to log in raises ConfigError (``key`` ``jdbc-password``) wherever the
    engine connects (:func:`_refused_logins_are_config_errors`).
    """
    target = target or resolve_target(config)
    engine = _engine(config, target)
    _refused_logins_are_config_errors(engine, target)
    return engine, target


def _refused_logins_are_config_errors(engine: Engine, target: DatabaseTarget) -> None:
    """Make a refused login (:func:`store.db.sqlstates.login_refused`) raise ConfigError in
    place of the driver's error, at every connect of ``engine``: every caller's database
    errors become StoreUnavailableError, which ``store`` exits 4 with and a script retries,
    and trying again does not fix a wrong password (exit 2)."""
    from store.db.sqlstates import refused_login_error

    def handle_error(context: sa.engine.ExceptionContext) -> None:
        refused = refused_login_error(
            context.original_exception, f"the database of {target.display}"
        )
        if refused is not None:
            raise refused from context.original_exception

    event.listen(engine, "handle_error", handle_error)


def _engine(config: DatabaseStoreConfig, target: DatabaseTarget) -> Engine:
    timeout_ms = config.jdbc_network_timeout
    pool = pool_options(config.data_source_properties)
    if target.dialect == "sqlite":
        return _sqlite_engine(target, timeout_ms, pool)
    if target.jdbc is not None:
        return _jdbc_engine(target, timeout_ms, pool)
    backend = target.url.get_backend_name()
    if backend == "postgresql":
        app = f"store:{config.message_table_name.lower()}"
        url, args = _postgresql_args(target, timeout_ms, app)
    elif backend in ("mysql", "mariadb"):
        url, args = target.url, _mysql_args(target, timeout_ms)
    else:
        url, args = target.url, dict(target.connect_args)
    engine = sa.create_engine(url, connect_args=args, hide_parameters=True, **pool)
    if target.hosts:
        from store.db.failover import connect_writable

        @event.listens_for(engine, "do_connect")
        def _first_writable(dialect: Any, record: Any, cargs: Any, cparams: Any) -> Any:
            return connect_writable(dialect.loaded_dbapi, target.hosts, cparams)

    return engine
