"""The engine a store runs on: jdbc-network-timeout bounds statements, secrets stay out of
logs and errors."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import sqlalchemy as sa

from store import StoreConfig, open_store
from store.db.engine import create_store_engine, dispose_store_engine
from store.errors import StoreUnavailableError
from tests.support.backends import unique_prefix
from tests.support.db_backends import db_backend, mysql_url, postgresql_url, store_mapping


def _engine(mapping: dict):
    config = StoreConfig.from_mapping(mapping)
    assert config.database_store is not None
    return create_store_engine(config.database_store)[0]


def test_postgresql_statements_are_bounded_by_the_network_timeout() -> None:
    """jdbc-network-timeout = 500 ms: statement_timeout is 500 ms on every connection, and a
    statement running longer is cancelled by the server."""
    url, user, password = postgresql_url()
    engine = _engine(
        store_mapping(
            url, unique_prefix(), user=user, password=password, **{"jdbc-network-timeout": 500}
        )
    )
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SHOW statement_timeout").scalar() == "500ms"
            with pytest.raises(sa.exc.OperationalError, match="statement timeout"):
                conn.exec_driver_sql("SELECT pg_sleep(2)")
    finally:
        dispose_store_engine(engine)


def test_mariadb_reads_are_bounded_by_the_network_timeout() -> None:
    """jdbc-network-timeout = 500 ms: a statement whose answer takes longer fails on the
    client's read timeout instead of waiting."""
    url, user, password = mysql_url()
    engine = _engine(
        store_mapping(
            url, unique_prefix(), user=user, password=password, **{"jdbc-network-timeout": 500}
        )
    )
    try:
        with engine.connect() as conn, pytest.raises(sa.exc.OperationalError):
            conn.exec_driver_sql("SELECT SLEEP(3)")
    finally:
        dispose_store_engine(engine)


def test_sqlite_waits_for_a_busy_database_no_longer_than_the_timeout(tmp_path: Path) -> None:
    """jdbc-network-timeout is SQLite's busy timeout: a writer blocked by another's write
    transaction gives up after it."""
    mapping = store_mapping(
        f"jdbc:sqlite:{tmp_path / 'busy.db'}", "t_", **{"jdbc-network-timeout": 300}
    )
    first, second = _engine(mapping), _engine(mapping)
    try:
        with first.connect() as a:
            a.exec_driver_sql("CREATE TABLE t (x INTEGER)")
            a.commit()
            a.exec_driver_sql("INSERT INTO t VALUES (1)")  # holds the write lock
            with second.connect() as b, pytest.raises(sa.exc.OperationalError, match="locked"):
                b.exec_driver_sql("INSERT INTO t VALUES (2)")
    finally:
        dispose_store_engine(first)
        dispose_store_engine(second)


def test_passwords_never_reach_logs_or_errors(tmp_path: Path, caplog) -> None:
    """A store opened, used and closed with a password logs nothing of it (DEBUG included);
    a connection that fails names the database, never the password."""
    secret = "pw-" + unique_prefix()
    _, user, _ = postgresql_url()
    config = db_backend("postgresql").make_config(tmp_path, unique_prefix())
    assert config.database_store is not None
    config = config.replace(database_store=config.database_store.replace(jdbc_password=secret))
    with caplog.at_level(logging.DEBUG):
        with open_store(config) as s:  # trust authentication: the password is not checked
            s.bindings.load()
            s.messages.load()
            s.messages.append_add(1, 1, b"x", sync=True)
        bad = StoreConfig.from_mapping(
            store_mapping(
                "jdbc:postgresql://127.0.0.1:1/nowhere",
                unique_prefix(),
                user=user,
                password=secret,
                **{"jdbc-network-timeout": 2000},
            )
        )
        with pytest.raises(StoreUnavailableError) as err:
            open_store(bad)
    assert secret not in caplog.text
    assert secret not in str(err.value) and secret not in repr(err.value)
    assert "127.0.0.1" in str(err.value)
    db_backend("postgresql").cleanup(config)
