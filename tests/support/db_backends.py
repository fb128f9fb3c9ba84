"""The database back-ends of the contract suite: PostgreSQL, MariaDB, SQLite and Derby.

Each test gets its own table-name prefix (``t<8 hex>_``) in front of every table, so tests
share a server (and other people's test runs) without seeing each other; ``cleanup`` drops
exactly the tables of that prefix (:func:`store.db.migrate.drop_schema`).

Where the servers are (override with environment variables):

- ``STORE_TEST_POSTGRESQL_URL`` (default ``jdbc:postgresql://127.0.0.1:5432/test``, user
  ``STORE_TEST_POSTGRESQL_USER``, default ``postgres``);
- ``STORE_TEST_MYSQL_URL`` (default ``jdbc:mariadb://127.0.0.1:3306/test``, user
  ``STORE_TEST_MYSQL_USER``, default ``root``, password ``STORE_TEST_MYSQL_PASSWORD``);
- SQLite: a file under the test's ``tmp_path`` (its schema is created on first open, as every
  new store's is; the server databases get theirs from ``store db upgrade`` here, so an
  unreachable server fails in ``make_config``);
- Derby: embedded, jars from ``STORE_TEST_DERBY_CLASSPATH`` (default Debian's
  ``/usr/share/java/derby.jar``), one database per pytest session in the session's base
  temporary folder (creating a Derby database takes a second; tables are per test).

An unreachable server is an error, never a skip: ``make_config`` runs the schema migration,
which fails when the database does not answer (and must, in CI).

Thread-safety: specs are immutable; functions here are called from the test's thread.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from store import StoreConfig
from store.db.migrate import drop_schema, upgrade
from store.errors import StoreLockedError
from tests.support.backends import BackendSpec

__all__ = [
    "DB_BACKENDS",
    "DERBY_CLASSPATH",
    "db_backend",
    "derby_url",
    "mysql_url",
    "new_store_mapping",
    "postgresql_url",
    "store_mapping",
]

DERBY_CLASSPATH = os.environ.get("STORE_TEST_DERBY_CLASSPATH", "/usr/share/java/derby.jar")


def postgresql_url() -> tuple[str, str | None, str | None]:
    """(URL, user, password) of the PostgreSQL test server."""
    return (
        os.environ.get("STORE_TEST_POSTGRESQL_URL", "jdbc:postgresql://127.0.0.1:5432/test"),
        os.environ.get("STORE_TEST_POSTGRESQL_USER", "postgres"),
        os.environ.get("STORE_TEST_POSTGRESQL_PASSWORD"),
    )


def mysql_url() -> tuple[str, str | None, str | None]:
    """(URL, user, password) of the MariaDB / MySQL test server."""
    return (
        os.environ.get("STORE_TEST_MYSQL_URL", "jdbc:mariadb://127.0.0.1:3306/test"),
        os.environ.get("STORE_TEST_MYSQL_USER", "root"),
        os.environ.get("STORE_TEST_MYSQL_PASSWORD"),
    )


def derby_url(tmp_path: Path) -> str:
    """The session's shared embedded Derby database (see module docstring)."""
    return f"jdbc:derby:{tmp_path.parent / 'derby-shared' / 'store'};create=true"


def store_mapping(
    url: str, prefix: str, *, user: str | None = None, password: str | None = None, **extra: Any
) -> dict[str, Any]:
    """A ``StoreConfig.from_mapping`` mapping for a database store whose tables all start
    with ``prefix``; ``extra`` adds database-store keys (kebab-case)."""
    section: dict[str, Any] = {
        "jdbc-connection-url": url,
        "bindings-table-name": f"{prefix}BINDINGS",
        "message-table-name": f"{prefix}MESSAGES",
        "large-message-table-name": f"{prefix}LARGE_MESSAGES",
        "page-store-table-name": f"{prefix}PS",
        "node-manager-store-table-name": f"{prefix}NODE_MANAGER",
        "jdbc-network-timeout": 20000,
    }
    if user is not None:
        section["jdbc-user"] = user
    if password is not None:
        section["jdbc-password"] = password
    section.update(extra)
    return {"database-store": section}


def new_store_mapping(
    tmp_path: Path, prefix: str, which: str, *, derby: str | None = None
) -> dict[str, Any]:
    """The ``from_mapping`` mapping of a store on ``which`` whose tables do not exist yet (what
    ``make_config`` builds before it runs the upgrade); ``derby`` replaces the shared Derby
    database's URL (e.g. one of the test's own, for other processes to boot)."""
    if which == "postgresql":
        url, user, password = postgresql_url()
        return store_mapping(url, prefix, user=user, password=password)
    if which == "mariadb":
        url, user, password = mysql_url()
        return store_mapping(url, prefix, user=user, password=password)
    if which == "sqlite":
        return store_mapping(f"jdbc:sqlite:{tmp_path / 'store.db'}", prefix)
    return store_mapping(
        derby or derby_url(tmp_path), prefix, **{"jdbc-driver-classpath": DERBY_CLASSPATH}
    )


def _config(tmp_path: Path, prefix: str, which: str) -> StoreConfig:
    return StoreConfig.from_mapping(new_store_mapping(tmp_path, prefix, which))


def _make(which: str) -> Any:
    def make_config(tmp_path: Path, prefix: str) -> StoreConfig:
        config = _config(tmp_path, prefix, which)
        if which != "sqlite":  # checks the server; opening would create the schema too
            try:
                upgrade(config)
            except StoreLockedError:
                # Derby: another process has the database booted (the lock tests' child).
                # Opening the store reports that; the schema exists already.
                if which != "derby":
                    raise
        return config

    return make_config


def _cleanup(config: StoreConfig) -> None:
    drop_schema(config)


def db_backend(which: str) -> BackendSpec:
    """The spec of one database back-end ("postgresql", "mariadb", "sqlite", "derby")."""
    return BackendSpec(
        name=which,
        persistent=True,
        make_config=_make(which),
        cleanup=_cleanup,
        too_large_record_size=None,
        stateful_max_examples=4 if which == "derby" else 8,
        # SQLite's database file lives in the test's own folder: nothing to hand on.
        reuse_schemas=which != "sqlite",
    )


DB_BACKENDS: list[BackendSpec] = [
    db_backend(which) for which in ("postgresql", "mariadb", "sqlite", "derby")
]


def kill_mysql_connections(admin: Any, user: str) -> int:
    """Kills every connection of ``user`` through the PyMySQL connection ``admin`` (what a
    server does to a client it drops); returns how many. Raises what PyMySQL raises."""
    with admin.cursor() as cur:
        cur.execute("SELECT ID FROM information_schema.PROCESSLIST WHERE USER = %s", (user,))
        ids = [r[0] for r in cur.fetchall()]
        for conn_id in ids:
            cur.execute("KILL %s", (conn_id,))
    return len(ids)
