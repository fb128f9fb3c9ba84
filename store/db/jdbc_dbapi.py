"""The DB-API layer over JDBC: JayDeBeApi's connection and cursor, made exact for the store.

JayDeBeApi (on JPype) provides the DB-API module SQLAlchemy sees (exceptions, type objects,
``paramstyle = "qmark"``) and the ``Connection``/``Cursor`` classes subclassed here. What the
subclasses change, and why:

- parameters are bound with typed setters (``setLong``, ``setBytes``, ``setNull`` with the
  parameter's SQL type): ``setObject`` cannot bind Python ``bytes`` or ``None`` portably;
- results are read with typed getters and come back as ``int`` / ``bytes`` / ``str``: the stock
  converters return ``java.sql.Blob`` objects for BLOB columns;
- every statement gets ``setQueryTimeout`` from ``jdbc-network-timeout`` (and the connection
  ``setNetworkTimeout`` where the driver supports it), so no statement waits forever;
- every ``java.sql.SQLException`` becomes a DB-API exception (``OperationalError`` for SQLState
  class 08, connection errors; ``DatabaseError`` otherwise), so SQLAlchemy wraps it and the
  store can classify it. The SQLState is kept as ``exc.sqlstate``.

:func:`connect` opens a connection through the driver instance (:func:`store.db.jvm.load_driver`)
with autocommit off.

Thread-safety: a connection is used by one thread at a time (DB-API ``threadsafety = 1``).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping, Sequence
from typing import Any

import jaydebeapi

from store.db.jvm import load_driver
from store.db.sqlstates import booted_elsewhere, sqlstate_of

__all__ = ["JdbcConnection", "JdbcCursor", "booted_elsewhere", "connect", "sqlstate_of"]


def _wrap(exc: BaseException) -> jaydebeapi.Error:
    # JDBC chains the interesting part (e.g. Derby's XSDB6 "another instance booted the
    # database") as "next exceptions": keep every message and SQLState of the chain.
    messages: list[str] = []
    states: list[str] = []
    seen: Any = exc
    for _ in range(10):
        if seen is None:
            break
        get_message = getattr(seen, "getMessage", None)
        messages.append(str(get_message() if get_message is not None else seen))
        state = sqlstate_of(seen)
        if state:
            states.append(state)
        get_next = getattr(seen, "getNextException", None)
        seen = get_next() if get_next is not None else None
    first = states[0] if states else None
    transient = first is not None and first.startswith("08")
    cls = jaydebeapi.OperationalError if transient else jaydebeapi.DatabaseError
    err = cls(" / ".join(messages))
    err.sqlstate = first  # type: ignore[attr-defined]
    err.sqlstates = states  # type: ignore[attr-defined]
    return err


def _java_errors() -> tuple[type[BaseException], ...]:
    import jpype

    return (jpype.JException,)


class JdbcCursor(jaydebeapi.Cursor):  # type: ignore[misc]
    """A JayDeBeApi cursor with typed binding and reading (see module docstring).

    Thread-safety: one thread at a time (DB-API threadsafety 1).
    """

    arraysize = 1000

    def __init__(self, connection: JdbcConnection, query_timeout: int) -> None:
        super().__init__(connection, {})
        self._query_timeout = query_timeout
        self._getters: list[Any] | None = None

    @property
    def description(self) -> list[tuple[Any, ...]] | None:
        cached: list[tuple[Any, ...]] | None = getattr(self, "_description", None)
        if cached:
            return cached
        meta = self._meta
        if not meta:
            return None
        desc = []
        for col in range(1, meta.getColumnCount() + 1):
            size = meta.getColumnDisplaySize(col)
            desc.append(
                (
                    str(meta.getColumnLabel(col)),
                    _dbapi_type(int(meta.getColumnType(col))),
                    size,
                    size,
                    meta.getPrecision(col),
                    meta.getScale(col),
                    meta.isNullable(col),
                )
            )
        self._description = desc
        return desc

    def _prepare(self, operation: str) -> Any:
        prep = self._connection.jconn.prepareStatement(operation)
        if self._query_timeout > 0:
            prep.setQueryTimeout(self._query_timeout)
        return prep

    def _set_stmt_parms(self, prep_stmt: Any, parameters: Sequence[Any]) -> None:
        import jpype

        types = jpype.java.sql.Types
        for i, value in enumerate(parameters, start=1):
            if value is None:
                kind = prep_stmt.getParameterMetaData().getParameterType(i)
                prep_stmt.setNull(i, kind if kind else types.NULL)
            elif isinstance(value, bool):
                prep_stmt.setBoolean(i, value)
            elif isinstance(value, int):
                prep_stmt.setLong(i, value)
            elif isinstance(value, (bytes, bytearray, memoryview)):
                prep_stmt.setBytes(i, jpype.JArray(jpype.JByte)(bytes(value)))
            elif isinstance(value, float):
                prep_stmt.setDouble(i, value)
            else:
                prep_stmt.setString(i, str(value))

    def execute(self, operation: str, parameters: Sequence[Any] | None = None) -> None:
        if self._connection._closed:
            raise jaydebeapi.Error("connection is closed")
        self._close_last()
        try:
            self._prep = self._prepare(operation)
            self._set_stmt_parms(self._prep, parameters or ())
            if self._prep.execute():
                self._rs = self._prep.getResultSet()
                self._meta = self._rs.getMetaData()
                self._getters = None
                self.rowcount = -1
            else:
                self.rowcount = self._prep.getUpdateCount()
        except _java_errors() as exc:
            raise _wrap(exc) from exc

    def executemany(self, operation: str, seq_of_parameters: Sequence[Sequence[Any]]) -> None:
        self._close_last()
        try:
            self._prep = self._prepare(operation)
            for parameters in seq_of_parameters:
                self._set_stmt_parms(self._prep, parameters)
                self._prep.addBatch()
            counts = self._prep.executeBatch()
            self.rowcount = sum(int(c) for c in counts if c >= 0)
        except _java_errors() as exc:
            raise _wrap(exc) from exc
        finally:
            self._close_last()

    def _column_getters(self) -> list[Any]:
        import jpype

        t = jpype.java.sql.Types
        rs = self._rs
        getters: list[Any] = []
        for col in range(1, self._meta.getColumnCount() + 1):
            kind = int(self._meta.getColumnType(col))
            if kind in (t.BIGINT, t.INTEGER, t.SMALLINT, t.TINYINT):
                getters.append(_int_getter(rs, col))
            elif kind in (t.BLOB, t.BINARY, t.VARBINARY, t.LONGVARBINARY):
                getters.append(_bytes_getter(rs, col))
            elif kind in (t.BOOLEAN, t.BIT):
                getters.append(_bool_getter(rs, col))
            elif kind in (t.DOUBLE, t.FLOAT, t.REAL, t.DECIMAL, t.NUMERIC):
                getters.append(_number_getter(rs, col))
            else:
                getters.append(_str_getter(rs, col))
        return getters

    def fetchmany(self, size: int | None = None) -> list[tuple[Any, ...]]:
        if not self._rs:
            raise jaydebeapi.Error("no result set")
        size = self.arraysize if size is None else size
        try:
            if self._getters is None:
                self._getters = self._column_getters()
                self._rs.setFetchSize(min(size, 10_000))
            getters = self._getters
            rs = self._rs
            rows: list[tuple[Any, ...]] = []
            while len(rows) < size and rs.next():
                rows.append(tuple(get() for get in getters))
            return rows
        except _java_errors() as exc:
            raise _wrap(exc) from exc

    def fetchone(self) -> tuple[Any, ...] | None:
        rows = self.fetchmany(1)
        return rows[0] if rows else None

    def fetchall(self) -> list[tuple[Any, ...]]:
        out: list[tuple[Any, ...]] = []
        while rows := self.fetchmany(self.arraysize):
            out.extend(rows)
        return out


def _dbapi_type(kind: int) -> Any:
    import jpype

    t = jpype.java.sql.Types
    if kind in (t.BIGINT, t.INTEGER, t.SMALLINT, t.TINYINT, t.BOOLEAN, t.BIT):
        return jaydebeapi.NUMBER
    if kind in (t.BLOB, t.BINARY, t.VARBINARY, t.LONGVARBINARY):
        return jaydebeapi.BINARY
    if kind in (t.DOUBLE, t.FLOAT, t.REAL):
        return jaydebeapi.FLOAT
    if kind in (t.DECIMAL, t.NUMERIC):
        return jaydebeapi.DECIMAL
    if kind == t.TIMESTAMP:
        return jaydebeapi.DATETIME
    return jaydebeapi.STRING


def _int_getter(rs: Any, col: int) -> Any:
    def get() -> int | None:
        value = rs.getLong(col)
        return None if rs.wasNull() else int(value)

    return get


def _bytes_getter(rs: Any, col: int) -> Any:
    def get() -> bytes | None:
        value = rs.getBytes(col)
        return None if value is None else bytes(value)

    return get


def _bool_getter(rs: Any, col: int) -> Any:
    def get() -> bool | None:
        value = rs.getBoolean(col)
        return None if rs.wasNull() else bool(value)

    return get


def _number_getter(rs: Any, col: int) -> Any:
    def get() -> float | int | None:
        value = rs.getObject(col)
        if value is None:
            return None
        if hasattr(value, "scale") and value.scale() == 0:
            return int(value.longValue())
        return float(value.doubleValue())

    return get


def _str_getter(rs: Any, col: int) -> Any:
    def get() -> str | None:
        value = rs.getString(col)
        return None if value is None else str(value)

    return get


class JdbcConnection(jaydebeapi.Connection):  # type: ignore[misc]
    """A JayDeBeApi connection whose cursors are :class:`JdbcCursor` and whose errors are
    DB-API errors.

    Thread-safety: one thread at a time (DB-API threadsafety 1).
    """

    def __init__(self, jconn: Any, *, query_timeout: int) -> None:
        super().__init__(jconn, {})
        self._query_timeout = query_timeout

    def cursor(self) -> JdbcCursor:
        return JdbcCursor(self, self._query_timeout)

    def commit(self) -> None:
        try:
            self.jconn.commit()
        except _java_errors() as exc:
            raise _wrap(exc) from exc

    def rollback(self) -> None:
        try:
            self.jconn.rollback()
        except _java_errors() as exc:
            raise _wrap(exc) from exc

    def close(self) -> None:
        closed = bool(getattr(self, "_closed", False))
        if closed:
            return
        try:
            self.jconn.close()
        except _java_errors() as exc:
            raise _wrap(exc) from exc
        finally:
            self._closed = True


_executor: Any = None


def _direct_executor() -> Any:
    # setNetworkTimeout wants an Executor for aborting the connection. A thread pool would be
    # a non-daemon Java thread that keeps the JVM (and this process) alive at exit; running the
    # abort in the calling thread needs none.
    import jpype

    global _executor
    if _executor is None:
        _executor = jpype.JProxy("java.util.concurrent.Executor", dict={"execute": _run})
    return _executor


def _run(runnable: Any) -> None:
    runnable.run()


def connect(
    url: str,
    driver_class: str,
    classpath: Sequence[str],
    properties: Mapping[str, str],
    *,
    timeout_ms: int,
) -> JdbcConnection:
    """Open a JDBC connection (autocommit off) through the driver ``driver_class``.

    ``timeout_ms`` bounds every statement (``setQueryTimeout``, whole seconds, at least one)
    and, where the driver supports it, the socket (``setNetworkTimeout``); 0 means none.
    Returns the connection. Raises ConfigError when the driver is missing or does not accept
    the URL, a DB-API ``Error`` when the database refuses the connection.
    """
    import jpype

    from store.errors import ConfigError

    driver = load_driver(driver_class, classpath)
    info = jpype.java.util.Properties()
    for name, value in properties.items():
        info.setProperty(name, value)
    try:
        jconn = driver.connect(url, info)
    except _java_errors() as exc:
        raise _wrap(exc) from exc
    if jconn is None:
        raise ConfigError(
            f"jdbc-driver-class-name: {driver_class!r} does not accept the configured URL",
            key="jdbc-driver-class-name",
            value=driver_class,
            allowed="the driver class of the jdbc-connection-url's database",
        )
    try:
        jconn.setAutoCommit(False)
        if timeout_ms > 0:
            # Embedded drivers (Derby) have no network and refuse this; the query timeout set
            # on every statement still bounds them.
            with contextlib.suppress(*_java_errors()):
                jconn.setNetworkTimeout(_direct_executor(), timeout_ms)
    except _java_errors() as exc:
        jconn.close()
        raise _wrap(exc) from exc
    seconds = math.ceil(timeout_ms / 1000) if timeout_ms > 0 else 0
    return JdbcConnection(jconn, query_timeout=seconds)
