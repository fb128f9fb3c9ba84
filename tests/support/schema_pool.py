"""Emptied database schemas kept for the next test of the same process.

Creating a store's tables is DDL: about 0.25 s on MariaDB (InnoDB creates and syncs a file per
table), 0.3-0.5 s on embedded Derby, and dropping them costs about as much again, while most
contract tests run for less than that. So the :class:`tests.support.backends.StoreFactory` of
a test on a database server (PostgreSQL, MariaDB) or on the session's shared Derby database
does not drop its schema at teardown: it empties it (a ``DELETE`` of every row, a ``TRUNCATE``
on PostgreSQL; the per-address page tables dropped) and hands it to the next test of the same
worker, which then starts from exactly what ``store db upgrade`` leaves: every fixed table at
the head revision, no rows.

A schema is kept only when it still is that schema: its fixed tables all there with the
columns :class:`store.db.schema.StoreSchema` defines, the version table at the head revision,
and the emptying committed. Anything else (a test that dropped a table, altered a column,
left a connection holding a lock past :data:`LOCK_WAIT_SECONDS`, or killed the server's
connections) is dropped as before and the next test gets a new one. The one difference a test
could see is a file table's generated ``id`` on MariaDB and Derby, which goes on counting from
the previous test's rows instead of starting again (no test, and no code of the store, relies
on where it starts).

At the end of the session :func:`drain` drops every schema still kept (``tests/conftest.py``
calls it), so a run leaves no tables behind; a worker that dies leaks what it kept, as a test
that dies leaks its tables.

Thread-safety: a pool belongs to one process and is used from the test thread only.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa

from store import StoreConfig
from store.db.engine import create_store_engine, dispose_store_engine
from store.db.migrate import drop_schema, head_revision
from store.db.schema import StoreSchema, TableNames

if TYPE_CHECKING:
    from tests.support.backends import BackendSpec

__all__ = ["LOCK_WAIT_SECONDS", "SchemaPool", "drain", "finish", "pool", "start"]

_log = logging.getLogger(__name__)

#: How long the emptying waits for a row lock a broken store of the test may still hold.
LOCK_WAIT_SECONDS = 5

_LOCK_WAIT = {
    "postgresql": f"SET LOCAL lock_timeout = '{LOCK_WAIT_SECONDS}s'",
    "mysql": f"SET SESSION innodb_lock_wait_timeout = {LOCK_WAIT_SECONDS}",
    "mariadb": f"SET SESSION innodb_lock_wait_timeout = {LOCK_WAIT_SECONDS}",
}


@dataclass
class SchemaPool:
    """The kept schemas of one back-end: (prefix, configuration) pairs, last kept first out."""

    name: str
    kept: list[tuple[str, StoreConfig]] = field(default_factory=list)

    def take(self) -> tuple[str, StoreConfig] | None:
        """An emptied schema and its store configuration, or None when none is kept."""
        return self.kept.pop() if self.kept else None

    def give_back(self, prefix: str, config: StoreConfig) -> bool:
        """Empties the store's schema and keeps it; True when kept, False when the caller must
        drop it (it is not the schema ``store db upgrade`` makes, or emptying it failed)."""
        try:
            emptied = _empty(config)
        except sa.exc.SQLAlchemyError as exc:
            _log.info("schema %s not kept: %s", prefix, exc)
            return False
        if emptied:
            self.kept.append((prefix, config))
        return emptied

    def drain(self) -> None:
        """Drops every kept schema. Raises what drop_schema raises."""
        while self.kept:
            drop_schema(self.kept.pop()[1])


_POOLS: dict[str, SchemaPool] = {}


def pool(name: str) -> SchemaPool:
    """This process's pool of the back-end ``name`` (made on first use)."""
    return _POOLS.setdefault(name, SchemaPool(name))


def start(spec: BackendSpec, tmp_path: Path, prefix: str) -> tuple[str, StoreConfig]:
    """The (prefix, configuration) of a new test's store on ``spec``: a kept schema when the
    back-end reuses them and one is kept, else ``spec.make_config(tmp_path, prefix)``'s."""
    taken = pool(spec.name).take() if spec.reuse_schemas else None
    return taken or (prefix, spec.make_config(tmp_path, prefix))


def finish(spec: BackendSpec, prefix: str, made: StoreConfig, current: StoreConfig) -> None:
    """Ends a test's store: ``made`` is the configuration :func:`start` gave, ``current`` what
    the test holds at the end (it may have changed other settings). The schema is kept for the
    next test when the back-end reuses schemas and the test still names the same tables; else
    the back-end's cleanup drops what ``current`` names. Raises what the cleanup raises."""
    same = spec.reuse_schemas and _tables(current) == _tables(made)
    if not (same and pool(spec.name).give_back(prefix, made)):
        spec.cleanup(current)


def _tables(config: StoreConfig) -> object:
    """What names a database store's tables: its URL and table names (None for files)."""
    db = config.database_store
    if db is None:
        return None
    return (
        db.jdbc_connection_url,
        db.bindings_table_name,
        db.message_table_name,
        db.large_message_table_name,
        db.page_store_table_name,
        db.node_manager_store_table_name,
    )


def drain() -> None:
    """Drops the kept schemas of every back-end. Raises what drop_schema raises."""
    for each in _POOLS.values():
        each.drain()


def _empty(config: StoreConfig) -> bool:
    assert config.database_store is not None
    db = config.database_store
    names = TableNames.from_config(db)
    schema = StoreSchema(names)
    engine = create_store_engine(db)[0]
    try:
        with engine.begin() as conn:
            wait = _LOCK_WAIT.get(conn.dialect.name)
            if wait:
                conn.exec_driver_sql(wait)
            if not _intact(conn, names, schema):
                return False
            existing = {n.lower() for n in sa.inspect(conn).get_table_names()}
            prefix = names.page_store
            for page in sorted(existing):
                if page.startswith(prefix) and page[len(prefix) :].isdigit():
                    schema.page_table(int(page[len(prefix) :])).drop(conn)
            tables = list(reversed(schema.metadata.sorted_tables))
            if conn.dialect.name == "postgresql":
                # A DELETE leaves dead rows that the next test's scans read until autovacuum
                # runs; TRUNCATE gives the tables new, empty files (and restarts the ids).
                quoted = ", ".join(conn.dialect.identifier_preparer.format_table(t) for t in tables)
                conn.exec_driver_sql(f"TRUNCATE {quoted} RESTART IDENTITY")
            else:
                for table in tables:
                    conn.execute(table.delete())
        return True
    finally:
        dispose_store_engine(engine)


def _intact(conn: sa.Connection, names: TableNames, schema: StoreSchema) -> bool:
    existing = {n.lower() for n in sa.inspect(conn).get_table_names()}
    if not set(names.all()) <= existing:
        return False
    for table in schema.metadata.sorted_tables:
        # The columns as a query sees them: one round trip, where reflection takes several.
        empty = sa.select(sa.literal_column("*")).select_from(table).where(sa.false())
        found = conn.execute(empty).keys()
        if {c.lower() for c in found} != {c.name for c in table.columns}:
            return False
    version = sa.Table(names.version_table, sa.MetaData(), sa.Column("version_num", sa.String))
    revisions = [row[0] for row in conn.execute(sa.select(version.c.version_num))]
    return revisions == [head_revision()]
