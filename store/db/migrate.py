"""Schema management with alembic: the glue between ``migrations/`` and the configured table
names (docs/db.md).

The migration scripts in ``migrations/versions`` create tables whose names come from the
configuration, so one database can hold several stores. Each store records its revision in its
own version table (:attr:`TableNames.version_table`, ``<bindings-table-name>_version``), so the
stores never see each other's migrations.

Library calls, each one of ``store db``'s subcommands:

- :func:`upgrade` — apply migrations up to ``head`` (``store db upgrade``);
- :func:`current` — the store's revision and the code's head (``store db current``);
- :func:`render_sql` — the DDL for a DBA, without a database (``store db sql --dialect …``);
- :func:`check` — differences between the database and :mod:`store.db.schema`
  (``alembic check``), for tests and operators;
- :func:`ensure_schema` — what opening a store does: create the schema of a new store (one
  with none of its tables), and otherwise raise :class:`~store.errors.SchemaError` naming what
  fixes it (see below).

``migrations/env.py`` only calls :func:`run_env`; the plain ``alembic`` command works too
(``alembic -x config=broker.xml upgrade head``).

A new store creates its schema when it is first opened, as Artemis creates its tables at
start-up (docs/db.md). What :func:`ensure_schema` decides, from the version table and which of
the store's tables exist:

======================================  ==============================================
the database holds                      opening the store
======================================  ==============================================
the schema at the code's head           opens
none of the store's tables              creates the schema (alembic ``upgrade head``)
an older revision                       SchemaError naming ``store db upgrade``; never
                                        upgraded implicitly
a revision this code does not know      SchemaError: the code is older than the schema
some tables, not all (or no version     SchemaError listing present and missing tables;
table beside them)                      never created over
======================================  ==============================================

When the database refuses DDL to the configured user, the SchemaError names ``store db sql``,
whose output a DBA can run.

Schema changes (that creation, and :func:`upgrade`) run under the store's **schema lock**
(:func:`store.db.lock.schema_lock`: a waiting lock, separate from the store lock, which never
waits) and look at the schema again once they hold it, so two nodes starting together, or a
start and a ``store db upgrade``, create it once. The first look, without the lock, only
decides that nothing needs doing (a complete schema at head); anything else it saw may be a
creation committing between its reads, and is judged again under the lock. On a server
reached through JDBC, which has no such lock across processes, a creation that fails because
another session got there first is accepted once the schema is found complete. On MySQL,
whose DDL is not transactional, a creation that fails half-way drops what it made, so the
store stays new.

Thread-safety: every function opens its own connection; they may run in parallel on different
stores, and on one store (serialised by the schema lock).
"""

from __future__ import annotations

import functools
import io
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection, Engine

from store.config import DatabaseStoreConfig, StoreConfig, load_config
from store.db.lock import SCHEMA_LOCK_WAIT, schema_lock
from store.db.schema import StoreSchema, TableNames
from store.errors import (
    ConfigError,
    SchemaError,
    StoreError,
    StoreLockedError,
    StoreUnavailableError,
)

__all__ = [
    "DIALECTS",
    "MIGRATIONS",
    "SchemaStatus",
    "alembic_config",
    "check",
    "current",
    "drop_schema",
    "ensure_schema",
    "head_revision",
    "render_sql",
    "run_env",
    "upgrade",
]

_log = logging.getLogger(__name__)

#: The folder of the alembic environment (the repository's ``migrations/``).
MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations"
#: Dialects ``store db sql`` renders DDL for.
DIALECTS = ("postgresql", "mysql", "sqlite", "derby", "h2")

_ATTR_NAMES = "store_table_names"
_ATTR_CONNECTION = "connection"
_ATTR_DIALECT = "store_dialect"
# Driver error codes of "this user may not do that" (PyMySQL: 1044 database access denied,
# 1142 command denied on a table, 1227 missing privilege); SQLSTATE class 42, subclass 5xx is
# the standard's insufficient privilege (PostgreSQL 42501, Derby 42500-42509, H2 42501).
_MYSQL_DENIED = frozenset({1044, 1142, 1227})


@dataclass(frozen=True, slots=True)
class SchemaStatus:
    """Where a store's schema stands: ``current`` (None when there is none) and ``head``.

    Thread-safety: immutable.
    """

    current: str | None
    head: str

    @property
    def up_to_date(self) -> bool:
        """True when the schema is at the code's head revision."""
        return self.current == self.head


def _database(config: StoreConfig | DatabaseStoreConfig) -> DatabaseStoreConfig:
    if isinstance(config, DatabaseStoreConfig):
        return config
    if config.database_store is None:
        raise ConfigError(
            "the configuration has no database-store section",
            key="database-store",
            value=None,
            allowed="a database-store section with jdbc-connection-url",
            hint="store db commands manage the database store only",
        )
    return config.database_store


@functools.cache
def _scripts() -> ScriptDirectory:
    return ScriptDirectory.from_config(_config_for(TableNames()))


def head_revision() -> str:
    """The newest revision the code knows. Returns it; raises SchemaError if there is none."""
    head = _scripts().get_current_head()
    if head is None:
        raise SchemaError(f"no migrations found in {MIGRATIONS}")
    return head


def _config_for(names: TableNames, **attributes: Any) -> Config:
    if not (MIGRATIONS / "env.py").is_file():
        raise SchemaError(
            f"alembic migrations not found at {MIGRATIONS}",
            hint="run from a source checkout or an editable install (pip install -e .)",
        )
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes[_ATTR_NAMES] = names
    cfg.attributes.update(attributes)
    return cfg


def alembic_config(config: StoreConfig | DatabaseStoreConfig, *, connection: Any = None) -> Config:
    """An alembic ``Config`` for the configured store, for any ``alembic.command`` (history,
    downgrade, check …) run on ``connection`` (a SQLAlchemy connection to the store's
    database; None for offline commands).

    Returns the Config. Raises ConfigError for a configuration without a database store,
    SchemaError when the migrations folder is missing.
    """
    names = TableNames.from_config(_database(config))
    extra = {} if connection is None else {_ATTR_CONNECTION: connection}
    return _config_for(names, **extra)


def _engine(db: DatabaseStoreConfig) -> Engine:
    from store.db.engine import create_store_engine

    return create_store_engine(db)[0]


def _dispose(engine: Engine) -> None:
    from store.db.engine import dispose_store_engine

    dispose_store_engine(engine)


def upgrade(
    config: StoreConfig | DatabaseStoreConfig,
    *,
    revision: str = "head",
    engine: Engine | None = None,
) -> SchemaStatus:
    """Apply the migrations of the configured store up to ``revision``, under the store's
    schema lock (see the module docstring).

    Returns the status after the upgrade. Raises ConfigError for a configuration without a
    database store, StoreUnavailableError when the database cannot be reached or refuses DDL,
    StoreLockedError when another schema change holds the lock for SCHEMA_LOCK_WAIT seconds.
    """
    db = _database(config)
    names = TableNames.from_config(db)
    own = engine is None
    engine = engine or _engine(db)
    try:
        with schema_lock(engine, names, _where(db)) as conn:
            command.upgrade(_config_for(names, **{_ATTR_CONNECTION: conn}), revision)
        return _status(engine, names)
    except sa.exc.SQLAlchemyError as exc:
        raise _database_error("schema upgrade failed", exc) from exc
    finally:
        if own:
            _dispose(engine)


def _where(db: DatabaseStoreConfig) -> str:
    from store.db.urls import resolve_target

    return resolve_target(db).display


def _database_error(what: str, exc: BaseException) -> StoreError:
    from store.db.sqlstates import booted_elsewhere

    if booted_elsewhere(exc):
        return StoreLockedError(
            f"{what}: the embedded database is open in another process",
            holder="another process (the embedded database's own lock)",
        )
    return StoreUnavailableError(f"{what}: {type(exc).__name__}: {exc}")


def current(
    config: StoreConfig | DatabaseStoreConfig, *, engine: Engine | None = None
) -> SchemaStatus:
    """The configured store's revision and the code's head.

    Returns the :class:`SchemaStatus`. Raises StoreUnavailableError when the database cannot be
    reached.
    """
    db = _database(config)
    own = engine is None
    engine = engine or _engine(db)
    try:
        return _status(engine, TableNames.from_config(db))
    except sa.exc.SQLAlchemyError as exc:
        raise _database_error("cannot read the schema revision", exc) from exc
    finally:
        if own:
            _dispose(engine)


def _status(engine: Engine, names: TableNames) -> SchemaStatus:
    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"version_table": names.version_table})
        return SchemaStatus(ctx.get_current_revision(), head_revision())


def render_sql(dialect: str, names: TableNames | None = None) -> str:
    """The DDL that creates a store's schema on ``dialect`` (one of :data:`DIALECTS`), as a DBA
    would run it, with Artemis's default table names unless ``names`` are given.

    Returns the SQL text. Raises ConfigError for an unknown dialect.
    """
    if dialect not in DIALECTS:
        raise ConfigError(
            f"--dialect: {dialect!r} is not allowed: expected one of {', '.join(DIALECTS)}",
            key="dialect",
            value=dialect,
            allowed=", ".join(DIALECTS),
        )
    from store.db.jdbc_dialect import register_dialects

    register_dialects()
    names = names or TableNames.defaults(dialect)
    buffer = io.StringIO()
    cfg = _config_for(names, **{_ATTR_DIALECT: dialect})
    cfg.output_buffer = buffer
    command.upgrade(cfg, "head", sql=True)
    header = (
        f"-- The store's schema on {dialect}, tables {', '.join(names.all())}.\n"
        f"-- Generated by: store db sql --dialect {dialect}  (alembic revision {head_revision()})\n"
    )
    body = "\n".join(line.rstrip() for line in buffer.getvalue().splitlines())
    return header + "\n" + body.strip() + "\n"


def check(config: StoreConfig | DatabaseStoreConfig, *, engine: Engine | None = None) -> list[Any]:
    """Differences between the store's tables in the database and :mod:`store.db.schema`
    (what ``alembic check`` reports). Returns the list of differences (empty when clean).
    Raises StoreUnavailableError when the database cannot be reached.
    """
    from alembic.autogenerate import compare_metadata

    db = _database(config)
    names = TableNames.from_config(db)
    own = engine is None
    engine = engine or _engine(db)
    schema = StoreSchema(names)
    ours = set(names.all())
    try:
        with engine.connect() as conn:
            ctx = MigrationContext.configure(
                conn,
                opts={
                    "version_table": names.version_table,
                    "include_name": _only(ours),
                    "compare_type": True,
                },
            )
            return list(compare_metadata(ctx, schema.metadata))
    except sa.exc.SQLAlchemyError as exc:
        raise StoreUnavailableError(f"schema check failed: {exc}") from exc
    finally:
        if own:
            _dispose(engine)


def drop_schema(
    config: StoreConfig | DatabaseStoreConfig, *, engine: Engine | None = None
) -> list[str]:
    """Drop every table of the configured store: journals, file tables, node manager, the
    per-address page tables (``<page-store-table-name><digits>``) and the version table.
    Tables of other stores in the same database are never touched (DB-20).

    Returns the names dropped. Raises StoreUnavailableError when the database fails.
    """
    db = _database(config)
    names = TableNames.from_config(db)
    own = engine is None
    engine = engine or _engine(db)
    try:
        with engine.begin() as conn:
            return _drop_tables(conn, names)
    except sa.exc.SQLAlchemyError as exc:
        raise StoreUnavailableError(f"dropping the store's tables failed: {exc}") from exc
    finally:
        if own:
            _dispose(engine)


def _drop_tables(conn: Connection, names: TableNames) -> list[str]:
    """Drop the store's tables that exist, page tables first. Returns their names."""
    schema = StoreSchema(names)
    existing = {n.lower() for n in sa.inspect(conn).get_table_names()}
    pages = sorted(_page_tables(existing, names))
    dropped: list[str] = []
    for page in pages:
        schema.page_table(int(page[len(names.page_store) :])).drop(conn)
        dropped.append(page)
    for table in reversed(schema.metadata.sorted_tables):
        if table.name in existing:
            table.drop(conn)
            dropped.append(table.name)
    if names.version_table in existing:
        sa.Table(names.version_table, sa.MetaData()).drop(conn)
        dropped.append(names.version_table)
    return dropped


def _page_tables(existing: set[str], names: TableNames) -> set[str]:
    """The per-address page tables (``<page-store-table-name><digits>``) among ``existing``."""
    prefix = names.page_store
    return {n for n in existing if n.startswith(prefix) and n[len(prefix) :].isdigit()}


def _only(tables: set[str]) -> Any:
    def include_name(name: str | None, type_: str, parent: Any) -> bool:
        if type_ == "table":
            return name is not None and name.lower() in tables
        return True

    return include_name


@dataclass(frozen=True, slots=True)
class _Found:
    """What of a store's schema the database holds: the revision, and which of its tables
    (fixed tables, version table, per-address page tables) exist."""

    current: str | None
    present: frozenset[str]
    missing: tuple[str, ...]

    @property
    def new(self) -> bool:
        return self.current is None and not self.present


def _found(conn: Connection, names: TableNames) -> _Found:
    # The revision is read before the tables: a creation committing between the two reads
    # then looks like tables without a revision (in progress: looked at again under the
    # schema lock), never like a revision without its tables (a partial schema).
    ctx = MigrationContext.configure(conn, opts={"version_table": names.version_table})
    current = ctx.get_current_revision()
    existing = {n.lower() for n in sa.inspect(conn).get_table_names()}
    pages = _page_tables(existing, names)
    ours = set(names.all())
    return _Found(
        current=current,
        present=frozenset((ours & existing) | pages),
        missing=tuple(n for n in names.all() if n not in existing),
    )


def _read_found(engine: Engine, names: TableNames) -> Any:
    """What of the store's schema exists, read outside the schema lock.

    On SQLite a reader can meet "database is locked" past the busy timeout while another
    connection creates the schema or switches a new file to WAL (several nodes opening one new
    file at once, on a loaded machine): that is a schema change in progress, so the read is
    tried again until SCHEMA_LOCK_WAIT has passed, as the schema lock itself waits. Returns
    what ``_found`` returns. Raises StoreUnavailableError for every other failure.
    """
    deadline = time.monotonic() + SCHEMA_LOCK_WAIT
    while True:
        try:
            with engine.connect() as conn:
                return _found(conn, names)
        except sa.exc.OperationalError as exc:
            locked = engine.dialect.name == "sqlite" and "database is locked" in str(exc)
            if not locked or time.monotonic() > deadline:
                raise _database_error("cannot read the schema revision", exc) from exc
            time.sleep(0.05)
        except sa.exc.SQLAlchemyError as exc:
            raise _database_error("cannot read the schema revision", exc) from exc


def ensure_schema(
    engine: Engine,
    names: TableNames,
    *,
    create: bool = False,
    config_hint: str = "<config>",
    where: str = "",
) -> bool:
    """Make sure the store's schema is at the code's head before it is used (the table in the
    module docstring says what happens when it is not).

    With ``create``, the schema of a new store (none of its tables exist) is created under
    the schema lock, after looking again once the lock is held; ``where`` names the database
    for that lock (:attr:`store.db.urls.DatabaseTarget.display`). Returns True when this call
    created the schema, False when it was there. Raises SchemaError naming ``store db upgrade
    --config …`` when the schema is behind (or missing, without ``create``), ``store db sql``
    when the database refuses DDL to this user; SchemaError for a partial schema or one newer
    than this code; StoreUnavailableError when the database fails; StoreLockedError when
    another schema change holds the lock for SCHEMA_LOCK_WAIT seconds.
    """
    found = _read_found(engine, names)
    # What is seen without the lock may be another node's creation in progress (MySQL
    # commits each CREATE on its own; a catalogue read may run ahead of a commit): with
    # ``create``, anything but a complete schema at head is looked at again under the
    # schema lock before it is created or refused.
    settled = found.current == head_revision() and not found.missing
    if not create or settled:
        _check(found, names, config_hint, engine.dialect.name)
        return False
    try:
        return _create(engine, names, where, config_hint)
    except sa.exc.SQLAlchemyError as exc:
        if _ddl_denied(exc):
            raise _denied(engine, names, config_hint, exc) from exc
        # A server reached through JDBC has no schema lock across processes: another session
        # may have created the tables first. Accept its schema if it is complete.
        again: _Found | None = None
        try:
            with engine.connect() as conn:
                again = _found(conn, names)
        except sa.exc.SQLAlchemyError:
            pass
        if again is not None and again.current == head_revision() and not again.missing:
            _log.info("the schema of store %s was created by another session", names.bindings)
            return False
        raise _database_error("creating the store's schema failed", exc) from exc


def _create(engine: Engine, names: TableNames, where: str, config_hint: str) -> bool:
    with schema_lock(engine, names, where) as conn:
        found = _found(conn, names)  # again: another node may have created it meanwhile
        if not found.new:
            _check(found, names, config_hint, engine.dialect.name)
            return False
        _log.info("creating the schema of a new store (tables %s)", ", ".join(names.all()))
        try:
            command.upgrade(_config_for(names, **{_ATTR_CONNECTION: conn}), "head")
        except sa.exc.SQLAlchemyError:
            if engine.dialect.name in ("mysql", "mariadb"):
                _undo_create(conn, names)
            raise
        return True


def _undo_create(conn: Connection, names: TableNames) -> None:
    # MySQL commits each DDL statement: a creation refused half-way (CREATE allowed, INDEX
    # not) would leave a partial schema that every later open refuses. The store was new and
    # the schema lock is held, so what exists of it now is what this attempt made.
    try:
        dropped = _drop_tables(conn, names)
        _log.info("dropped the tables of the failed schema creation: %s", ", ".join(dropped))
    except sa.exc.SQLAlchemyError:
        _log.warning("could not drop the tables of a failed schema creation", exc_info=True)


def _sql_command(dialect: str, config_hint: str) -> str:
    name = {"mariadb": "mysql"}.get(dialect, dialect)
    return f"store db sql --dialect {name if name in DIALECTS else '…'} --config {config_hint}"


def _check(found: _Found, names: TableNames, config_hint: str, dialect: str) -> None:
    """Raise the SchemaError ``found`` calls for; return when the schema is complete at head."""
    head = head_revision()
    fix = f"store db upgrade --config {config_hint}"
    tables = f"tables {names.bindings}, {names.messages}, …"
    if found.new:
        raise SchemaError(
            f"the database has no store schema for {tables} (version table "
            f"{names.version_table} is missing)",
            hint=f"create it with: {fix}",
        )
    if found.current == head and not found.missing:
        return
    if found.current is None or found.current == head:
        present = ", ".join(sorted(found.present)) or "none"
        revision = "no revision" if found.current is None else f"revision {found.current}"
        raise SchemaError(
            f"the store's schema is incomplete ({revision}): tables {present} exist, "
            f"{', '.join(found.missing)} missing; a partial schema is never created over",
            hint=f"restore the missing tables (their DDL: {_sql_command(dialect, config_hint)}), "
            "or drop the store's remaining tables to start a new store",
        )
    known = {rev.revision for rev in _scripts().walk_revisions()}
    if found.current not in known:
        raise SchemaError(
            f"the store schema is at revision {found.current}, newer than this version of "
            f"store knows (head {head})",
            hint="upgrade the store package, or use the version that created the schema",
        )
    raise SchemaError(
        f"the store schema is at revision {found.current}, this version needs {head}",
        hint=f"upgrade it with: {fix}",
    )


def _ddl_denied(exc: BaseException) -> bool:
    """True if ``exc`` (or the driver error it wraps) says the user may not run that DDL."""
    orig = getattr(exc, "orig", None) or exc
    state = getattr(orig, "sqlstate", None)
    if isinstance(state, str) and state.startswith("425"):
        return True
    args: tuple[Any, ...] = getattr(orig, "args", ())
    return type(orig).__module__.startswith("pymysql") and bool(args) and args[0] in _MYSQL_DENIED


def _denied(engine: Engine, names: TableNames, config_hint: str, exc: BaseException) -> SchemaError:
    sql = _sql_command(engine.dialect.name, config_hint)
    reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
    return SchemaError(
        f"the store's tables ({names.bindings}, {names.messages}, …) do not exist and the "
        f"database refuses to let this user create them: {reason}",
        hint=f"have a DBA create them with the DDL of: {sql}; or grant this user CREATE",
    )


def migration_names() -> TableNames:
    """The table names the running migration works on (for scripts in migrations/versions).

    Returns them. Raises SchemaError outside an alembic run.
    """
    from alembic import context

    names = context.config.attributes.get(_ATTR_NAMES)
    if not isinstance(names, TableNames):
        raise SchemaError("migration scripts must run through store.db.migrate")
    return names


def run_env(context: Any) -> None:
    """The body of ``migrations/env.py``: run the migrations offline (SQL text) or online on
    the connection :func:`upgrade` passes, or on the store of ``-x config=<file>`` when run by
    the plain ``alembic`` command. Returns None; raises what the migrations raise.
    """
    cfg = context.config
    names = cfg.attributes.get(_ATTR_NAMES)
    xargs = context.get_x_argument(as_dictionary=True)
    db: DatabaseStoreConfig | None = None
    if "config" in xargs:
        db = _database(load_config(xargs["config"]))
        names = TableNames.from_config(db)
        cfg.attributes[_ATTR_NAMES] = names
    if not isinstance(names, TableNames):
        raise SchemaError("no store configuration: pass -x config=<broker.xml or .toml>")
    schema = StoreSchema(names)
    common = {
        "target_metadata": schema.metadata,
        "version_table": names.version_table,
        "include_name": _only(set(names.all())),
        "compare_type": True,
    }
    if context.is_offline_mode():
        dialect = cfg.attributes.get(_ATTR_DIALECT) or (db.dialect if db else "postgresql")
        context.configure(dialect_name=dialect, literal_binds=True, **common)
        with context.begin_transaction():
            context.run_migrations()
        return
    connection = cfg.attributes.get(_ATTR_CONNECTION)
    if connection is not None:
        context.configure(connection=connection, **common)
        with context.begin_transaction():
            context.run_migrations()
        return
    if db is None:
        raise SchemaError("no database: pass -x config=<broker.xml or .toml>")
    engine = _engine(db)
    try:
        with engine.begin() as conn:
            context.configure(connection=conn, **common)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        _dispose(engine)
