"""The database store: the bindings and messages journals in tables, through SQLAlchemy 2
(docs/db.md; reference §4).

Open it through :func:`store.open_store` with a ``database-store`` configuration, which calls
:func:`store.opening.database.open_database_store`: that assembles the store (large messages
and page stores too) on the journals this package's entry point, :func:`open_database_journals`,
opens. This package imports none of the packages above it (docs/architecture.md#layers): the
HA lease table (``store.db.lease``, its SQL in ``store.db.lease_sql``) lives here, below the
node managers of ``store.ha`` that take and renew it, and :func:`refuse_live_lease` reads it::

    journals = open_database_journals(config)      # locks the store, checks (or creates) its schema
    loaded = journals.messages.load()
    journals.messages.append_add(7, 45, b"body", sync=True)
    journals.close()

Modules, one concern each:

- :mod:`~store.db.urls` — ``jdbc-connection-url`` → database, driver, SQLAlchemy URL;
- :mod:`~store.db.engine` — the engine: timeouts, pool, per-database session settings;
- :mod:`~store.db.schema` — every ``Table``, built from the configured names;
- :mod:`~store.db.dialects` — per-database statements and fast paths (COPY, multi-row INSERT…);
- :mod:`~store.db.jdbc_dialect`, :mod:`~store.db.jdbc_dbapi`, :mod:`~store.db.jvm` — JDBC
  databases (Derby, H2, …) through JayDeBeApi and JPype;
- :mod:`~store.db.rows` — which rows hold what, so deletes and transaction cleanup are exact;
- :mod:`~store.db.row_replay` — what each row means to a load: the one row dispatch, shared by
  the load and ``store data verify``;
- :mod:`~store.db.writer` — group commit, and the one function that builds a batch's
  transaction;
- :mod:`~store.db.journal` — :class:`DatabaseJournal`, the journal contract on a table;
- :mod:`~store.db.maintenance` — compaction's scan and statistics;
- :mod:`~store.db.lock` — one writer per store;
- :mod:`~store.db.migrate` — alembic glue (``store db upgrade|current|sql``).

Thread-safety: :class:`DatabaseJournals` and its journals may be shared between threads;
``close`` is idempotent.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from store.db.dialects import journal_sql_for
from store.db.engine import create_store_engine, dispose_store_engine, read_only_sessions
from store.db.jdbc_dialect import register_dialects
from store.db.journal import DatabaseJournal, JournalOptions
from store.db.lease import PRIMARY_ROW, LeaseTable
from store.db.lock import StoreLock, acquire_store_lock
from store.db.migrate import ensure_schema, head_revision
from store.db.schema import StoreSchema, TableNames
from store.db.settle import revision_check
from store.db.sqlstates import booted_elsewhere
from store.db.urls import DatabaseTarget
from store.db.writer import BacklogLimits, Fence
from store.errors import ConfigError, StoreError, StoreLockedError, StoreUnavailableError

if TYPE_CHECKING:
    from store.config import DatabaseStoreConfig, StoreConfig

__all__ = [
    "BacklogLimits",
    "DatabaseJournal",
    "DatabaseJournals",
    "StoreSchema",
    "TableNames",
    "open_database_journals",
    "refuse_live_lease",
]

_log = logging.getLogger(__name__)


class DatabaseJournals:
    """The two journals of an open database store, and what they share (engine, lock).

    ``schema`` has every table of the store (large messages, page store and node manager too),
    ``engine`` is the pool the other database parts should use. Thread-safety: shareable;
    :meth:`close` is idempotent.
    """

    def __init__(
        self,
        *,
        bindings: DatabaseJournal,
        messages: DatabaseJournal,
        engine: Engine,
        lock: StoreLock | None,
        schema: StoreSchema,
        target: DatabaseTarget,
    ) -> None:
        self.bindings = bindings
        self.messages = messages
        self.engine = engine
        self.schema = schema
        self.target = target
        self._lock = lock
        self._closed = False

    def close(self) -> None:
        """Close both journals (committing what was appended), release the store lock, dispose
        of the engine. Idempotent. Raises the first journal's close error, after releasing."""
        if self._closed:
            return
        self._closed = True
        errors: list[StoreError] = []
        for journal in (self.messages, self.bindings):
            try:
                journal.close()
            except StoreError as exc:
                errors.append(exc)
        if self._lock is not None:
            self._lock.release()
        dispose_store_engine(self.engine)
        if errors:
            raise errors[0]

    def __repr__(self) -> str:
        return f"DatabaseJournals({self.target.display!r}, closed={self._closed})"


def open_database_journals(
    config: StoreConfig,
    *,
    fence: Fence | None = None,
    backlog: BacklogLimits | None = None,
    store_lock: bool = True,
    seq_floor: int = 0,
    read_only: bool = False,
) -> DatabaseJournals:
    """Open the database store ``config`` describes: lock it, check its schema (creating it
    when none of the store's tables exist, as Artemis does at start-up; see
    :func:`store.db.migrate.ensure_schema`), and build its two journals (which then need
    ``load()``).

    ``fence`` runs inside every batch's transaction (the HA lease check); ``backlog`` bounds
    each journal's appended, not yet committed operations (default: :class:`BacklogLimits`'s
    defaults; see :mod:`store.db.writer`, "Back-pressure"). ``store_lock=False`` (a store opened
    with an HA node manager, whose live lock replaces it) skips the store lock; with it, a
    live HA lease held by another process (unexpired by the database clock) is refused too.
    ``seq_floor``: the least ``seq`` of this open's appends (see :class:`~store.db.journal.
    JournalOptions`). ``read_only``: :mod:`store.opening.read_only`. Returns the
    DatabaseJournals.
    Raises ConfigError for a configuration without a database store or with an unusable URL
    or driver, StoreLockedError when another process holds the store, SchemaError when the
    schema is old (naming ``store db upgrade``), partial, or cannot be created by this user
    (naming ``store db sql``), StoreUnavailableError when the database cannot be reached."""
    db = config.database_store
    if db is None:
        raise ConfigError(
            "the configuration has no database-store section",
            key="database-store",
            value=None,
            allowed="a database-store section with jdbc-connection-url",
        )
    names = TableNames.from_config(db)
    engine, target = create_store_engine(db)
    if read_only:  # every connection refuses writes; a missing schema is never created
        read_only_sessions(engine)
    lock: StoreLock | None = None
    try:
        if store_lock:
            lock = acquire_store_lock(engine, target, names)
        ensure_schema(
            engine,
            names,
            create=not read_only,
            config_hint="<your broker.xml or .toml>",
            where=target.display,
        )
        schema = StoreSchema(names)
        if store_lock:
            refuse_live_lease(engine, schema, db)
        journals = _journals(config, engine, schema, fence, backlog or BacklogLimits(), seq_floor)
    except StoreError:
        _abandon(engine, lock)
        raise
    except sa.exc.SQLAlchemyError as exc:
        _abandon(engine, lock)
        if booted_elsewhere(exc):
            raise StoreLockedError(
                f"the database of {target.display} is open in another process",
                holder="another process (the embedded database's own lock)",
                hint="only one process may write a store",
            ) from exc
        raise StoreUnavailableError(
            f"cannot open the database store at {target.display}: {type(exc).__name__}: "
            f"{exc.__cause__ or exc}"
        ) from exc
    except BaseException:
        _abandon(engine, lock)
        raise
    _log.info("opened database store %s (tables %s)", target.display, ", ".join(names.all()))
    return DatabaseJournals(
        bindings=journals[0],
        messages=journals[1],
        engine=engine,
        lock=lock,
        schema=schema,
        target=target,
    )


def refuse_live_lease(
    engine: Engine,
    schema: StoreSchema,
    db: DatabaseStoreConfig,
    *,
    hint: str = "open it through the HA node manager (store ha run), or stop that node",
) -> None:
    """Raise StoreLockedError naming the holder when an HA node holds an unexpired live
    lease on this store (docs/ha.md): a plain open must not write under a live primary, and
    the offline tools (``store data``) must not read or repair under one either. ``hint``
    says what the caller may do instead. Returns None when no node holds it."""
    table = LeaseTable(
        engine,
        schema.node_manager,
        expiration_ms=db.jdbc_lock_expiration,
        allowed_diff_ms=db.jdbc_allowed_time_diff,
    )
    row = table.read(PRIMARY_ROW)
    if row.held:
        raise StoreLockedError(
            f"store (tables {schema.names.bindings}, {schema.names.messages}) is live in an HA "
            f"pair: the live lock is held by {row.holder} (generation {row.generation}, "
            f"expires at {row.expires_at_ms} ms by the database clock)",
            holder=row.holder,
            hint=hint,
        )


def _abandon(engine: Engine, lock: StoreLock | None) -> None:
    if lock is not None:
        lock.release()
    dispose_store_engine(engine)


def _journals(
    config: StoreConfig,
    engine: Engine,
    schema: StoreSchema,
    fence: Fence | None,
    backlog: BacklogLimits,
    seq_floor: int,
) -> tuple[DatabaseJournal, DatabaseJournal]:
    db = config.database_store
    assert db is not None
    out = []
    # (ensure_schema made it the head, or refused the store)
    reconnected = revision_check(engine, schema.names.version_table, head_revision())
    conn = engine.raw_connection()
    try:
        for name, table in (("bindings", schema.bindings), ("messages", schema.messages)):
            sql = journal_sql_for(table, engine.dialect)
            options = JournalOptions(
                sync_period=db.jdbc_journal_sync_period / 1000,
                sync_transactional=config.journal_sync_transactional,
                sync_non_transactional=config.journal_sync_non_transactional,
                max_record_size=sql.max_record_size(conn.driver_connection),
                fence=fence,
                seq_floor=seq_floor,
                network_timeout=db.jdbc_network_timeout / 1000,
                reconnected=reconnected,
                backlog=backlog,
            )
            out.append(DatabaseJournal(name=name, engine=engine, sql=sql, options=options))
        conn.rollback()
    finally:
        conn.close()
    return out[0], out[1]


# Registering is lazy (module paths only): makes derby+jaydebeapi:// etc. resolvable anywhere.
register_dialects()
