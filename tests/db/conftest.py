"""Fixtures of the database store's own tests: one store per test on each database, with its
own table prefix, and a side connection to look at the rows directly.

- ``db_name``: parametrised over postgresql, mariadb, sqlite, derby (``--backends`` narrows it
  like the contract suite's option does);
- ``db``: a :class:`DbStore` for that database, dropped at teardown (or emptied for the next
  test, :mod:`tests.support.schema_pool`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from store import Store, StoreConfig, open_store
from store.db.engine import create_store_engine, dispose_store_engine
from store.db.schema import StoreSchema, TableNames
from tests.support import schema_pool
from tests.support.backends import unique_prefix
from tests.support.db_backends import DB_BACKENDS, db_backend

DB_NAMES = [spec.name for spec in DB_BACKENDS]


class DbStore:
    """One test's database store: configuration, open/reopen, and direct looks at its rows.

    Thread-safety: the test's thread only.
    """

    def __init__(self, name: str, tmp_path: Path) -> None:
        self.name = name
        self.tmp_path = tmp_path
        self.spec = db_backend(name)
        # A schema an earlier test emptied, where the database reuses them (schema_pool).
        self.prefix, self.config = schema_pool.start(self.spec, tmp_path, unique_prefix())
        self._made: StoreConfig = self.config
        self.store: Store | None = None
        self._opened: list[Store] = []
        self._engine: Any = None

    def with_config(self, **database_store: Any) -> StoreConfig:
        """The store's configuration with some database-store fields replaced (snake_case)."""
        assert self.config.database_store is not None
        db = self.config.database_store.replace(**database_store)
        self.config = self.config.replace(database_store=db)
        return self.config

    def open(self, *, load: bool = True) -> Store:
        """Close the previous store, open this one (and load both journals)."""
        self.close()
        store = open_store(self.config)
        self.store = store
        self._opened.append(store)
        if load:
            store.bindings.load()
        return store

    def close(self) -> None:
        store, self.store = self.store, None
        if store is not None:
            store.close()

    @property
    def schema(self) -> StoreSchema:
        assert self.config.database_store is not None
        return StoreSchema(TableNames.from_config(self.config.database_store))

    @property
    def engine(self) -> Any:
        """A separate engine for looking at the tables (not the store's)."""
        if self._engine is None:
            assert self.config.database_store is not None
            self._engine = create_store_engine(self.config.database_store)[0]
        return self._engine

    def rows(self, journal: str = "messages") -> list[tuple[Any, ...]]:
        """Every row of a journal table as (seq, id, recordtype, txid), in seq order."""
        t = self.schema.journal(journal)
        with self.engine.connect() as conn:
            query = sa.select(t.c.seq, t.c.id, t.c.recordtype, t.c.txid).order_by(t.c.seq)
            return [tuple(r) for r in conn.execute(query)]

    def count(self, journal: str = "messages") -> int:
        return len(self.rows(journal))

    def execute(self, statement: Any) -> None:
        """Run a statement on the side connection and commit."""
        with self.engine.begin() as conn:
            conn.execute(statement)

    def teardown(self) -> None:
        for store in reversed(self._opened):
            try:
                store.close()
            except Exception:
                pass
        if self._engine is not None:
            dispose_store_engine(self._engine)
        schema_pool.finish(self.spec, self.prefix, self._made, self.config)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "db_name" in metafunc.fixturenames:
        raw = str(metafunc.config.getoption("--backends")).strip()
        chosen = DB_NAMES if raw in ("", "all") else [n for n in raw.split(",") if n in DB_NAMES]
        metafunc.parametrize("db_name", chosen)


@pytest.fixture
def db(db_name: str, tmp_path: Path) -> Iterator[DbStore]:
    """A fresh database store on ``db_name`` (tables dropped at teardown)."""
    store = DbStore(db_name, tmp_path)
    try:
        yield store
    finally:
        store.teardown()
