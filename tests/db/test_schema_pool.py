"""The suite's reuse of emptied schemas (tests/support/schema_pool.py) hands the next test a
store as new as one ``store db upgrade`` made, and never a schema a test changed."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from store import StoreConfig, open_store
from store.db.engine import create_store_engine, dispose_store_engine
from store.db.migrate import current, head_revision
from store.db.schema import StoreSchema, TableNames
from tests.support import schema_pool
from tests.support.backends import unique_prefix
from tests.support.db_backends import db_backend

SERVERS = ["postgresql", "mariadb", "derby"]


def _tables(config: StoreConfig) -> set[str]:
    """Which of the store's tables (and its page table 7) the database holds."""
    db = config.database_store
    assert db is not None
    engine = create_store_engine(db)[0]
    try:
        with engine.connect() as conn:
            names = TableNames.from_config(db)
            return {n.lower() for n in sa.inspect(conn).get_table_names()} & {
                *names.all(),
                f"{names.page_store}7",
            }
    finally:
        dispose_store_engine(engine)


@pytest.mark.parametrize("which", SERVERS)
def test_a_kept_schema_comes_back_empty_at_the_head_revision(tmp_path: Path, which: str) -> None:
    spec = db_backend(which)
    prefix, config = schema_pool.start(spec, tmp_path, unique_prefix())
    store = open_store(config)
    store.messages.load()
    store.bindings.load()
    store.messages.append_add(1, 1, b"left by the first test", sync=True)
    store.bindings.append_add(2, 1, b"a binding", sync=True)
    store.close()
    db = config.database_store
    assert db is not None
    page = StoreSchema(TableNames.from_config(db)).page_table(7)
    engine = create_store_engine(db)[0]
    with engine.begin() as conn:
        page.create(conn)
    dispose_store_engine(engine)

    schema_pool.finish(spec, prefix, config, config)
    again, reused = schema_pool.start(spec, tmp_path, unique_prefix())
    try:
        assert (again, reused) == (prefix, config)
        assert f"{TableNames.from_config(db).page_store}7" not in _tables(reused)
        assert current(reused).current == head_revision()
        store = open_store(reused)
        try:
            assert store.messages.load().records == []
            assert store.bindings.load().records == []
        finally:
            store.close()
    finally:
        schema_pool.finish(spec, again, reused, reused)


@pytest.mark.parametrize("which", SERVERS)
def test_a_schema_a_test_changed_is_dropped_not_kept(tmp_path: Path, which: str) -> None:
    spec = db_backend(which)
    prefix, config = schema_pool.start(spec, tmp_path, unique_prefix())
    db = config.database_store
    assert db is not None
    names = TableNames.from_config(db)
    engine = create_store_engine(db)[0]
    with engine.begin() as conn:
        sa.Table(names.large_messages, sa.MetaData()).drop(conn)
    dispose_store_engine(engine)

    schema_pool.finish(spec, prefix, config, config)
    assert _tables(config) == set()
    taken = schema_pool.pool(spec.name).take()
    if taken is not None:  # an earlier test's schema, not this one
        assert taken[0] != prefix
        schema_pool.finish(spec, *taken, taken[1])
