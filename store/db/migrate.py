"""Schema management with alembic: the glue between ``migrations/`` and the configured table
names (DESIGN §6).

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
- :func:`ensure_schema` — what opening a store does: raise :class:`~store.errors.SchemaError`
  naming the command that fixes a missing or old schema, or create the schema of a new
  embedded SQLite store.

``migrations/env.py`` only calls :func:`run_env`; the plain ``alembic`` command works too
(``alembic -x config=broker.xml upgrade head``).

Thread-safety: every function opens its own connection; they may run in parallel on different
stores. Two upgrades of one store at the same time are serialised by the database (DDL locks)
where it has them; do not run them concurrently on SQLite.
"""

from __future__ import annotations

import functools
import io
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Engine

from store.config import DatabaseStoreConfig, StoreConfig, load_config
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
    """Apply the migrations of the configured store up to ``revision``.

    Returns the status after the upgrade. Raises ConfigError for a configuration without a
    database store, StoreUnavailableError when the database cannot be reached or refuses DDL.
    """
    db = _database(config)
    names = TableNames.from_config(db)
    own = engine is None
    engine = engine or _engine(db)
    try:
        with engine.begin() as conn:
            command.upgrade(_config_for(names, **{_ATTR_CONNECTION: conn}), revision)
        return _status(engine, names)
    except sa.exc.SQLAlchemyError as exc:
        raise _database_error("schema upgrade failed", exc) from exc
    finally:
        if own:
            _dispose(engine)


def _database_error(what: str, exc: BaseException) -> StoreError:
    from store.db.jdbc_dbapi import booted_elsewhere

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
    schema = StoreSchema(names)
    try:
        existing = {n.lower(): n for n in sa.inspect(engine).get_table_names()}
        pages = sorted(
            n
            for n in existing
            if n.startswith(names.page_store) and n[len(names.page_store) :].isdigit()
        )
        dropped: list[str] = []
        with engine.begin() as conn:
            for suffix in pages:
                schema.page_table(int(suffix[len(names.page_store) :])).drop(conn)
                dropped.append(suffix)
            for table in reversed(schema.metadata.sorted_tables):
                if table.name in existing:
                    table.drop(conn)
                    dropped.append(table.name)
            if names.version_table in existing:
                sa.Table(names.version_table, sa.MetaData()).drop(conn)
                dropped.append(names.version_table)
        return dropped
    except sa.exc.SQLAlchemyError as exc:
        raise StoreUnavailableError(f"dropping the store's tables failed: {exc}") from exc
    finally:
        if own:
            _dispose(engine)


def _only(tables: set[str]) -> Any:
    def include_name(name: str | None, type_: str, parent: Any) -> bool:
        if type_ == "table":
            return name is not None and name.lower() in tables
        return True

    return include_name


def ensure_schema(
    engine: Engine, names: TableNames, *, create: bool = False, config_hint: str = "<config>"
) -> None:
    """Make sure the store's schema is at the code's head before it is used.

    With ``create`` (a new embedded SQLite store) a missing schema is created. Returns None.
    Raises SchemaError naming ``store db upgrade --config …`` when the schema is missing or
    behind, or when it is newer than this code; StoreUnavailableError when the database fails.
    """
    try:
        status = _status(engine, names)
    except sa.exc.SQLAlchemyError as exc:
        raise _database_error("cannot read the schema revision", exc) from exc
    if status.up_to_date:
        return
    fix = f"store db upgrade --config {config_hint}"
    if status.current is None:
        if create:
            _log.info("creating the schema of a new store (tables %s)", ", ".join(names.all()))
            with engine.begin() as conn:
                command.upgrade(_config_for(names, **{_ATTR_CONNECTION: conn}), "head")
            return
        raise SchemaError(
            f"the database has no store schema for tables {names.bindings}, {names.messages}, "
            f"… (version table {names.version_table} is missing)",
            hint=f"create it with: {fix}",
        )
    known = {rev.revision for rev in _scripts().walk_revisions()}
    if status.current not in known:
        raise SchemaError(
            f"the store schema is at revision {status.current}, newer than this version of "
            f"store knows (head {status.head})",
            hint="upgrade the store package, or use the version that created the schema",
        )
    raise SchemaError(
        f"the store schema is at revision {status.current}, this version needs {status.head}",
        hint=f"upgrade it with: {fix}",
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
