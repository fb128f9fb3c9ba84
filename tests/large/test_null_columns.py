"""NULLs and garbage in the large-message table's nullable columns (docs/large.md, store.large.
database): each is a CorruptionError naming the table and the row's id, never a TypeError or
an AttributeError, and nothing is deleted because of it.

- ``filename`` or ``extension`` NULL or not ours: the store refuses to open (the sweep of
  incomplete bodies cannot tell whose the row is), ``path`` the table, ``offset`` the row id;
- ``data`` NULL or not bytes: the store opens; reading the body (its descriptor: ``open`` and
  ``size``; a chunk: the read of that chunk) raises CorruptionError naming the body and the
  row id.

On every database back-end (the file store has no columns).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from store import open_store
from store.db.engine import create_store_engine, dispose_store_engine
from store.errors import CorruptionError
from store.large.database import DatabaseLargeMessages, chunk_name, msg_name
from tests.large.support import body_bytes, chunk_size_of, cli_case, stored_names
from tests.support.backends import BackendSpec, StoreFactory
from tests.support.cli import run_store
from tests.support.db_backends import drop_schema

MID = 31


def _db_store(body_backend: BackendSpec, factory: StoreFactory) -> DatabaseLargeMessages:
    if body_backend.name.startswith("file-"):
        pytest.skip("the file store has no table")
    lm = factory.open().large_messages
    assert isinstance(lm, DatabaseLargeMessages)
    return lm


def _row_id(lm: DatabaseLargeMessages, filename: str) -> int:
    t = lm.table
    with lm.engine.connect() as conn:
        rid = conn.execute(sa.select(t.c.id).where(t.c.filename == filename)).scalar_one()
        conn.rollback()
    return int(rid)


def _set(lm: DatabaseLargeMessages, row_id: int, column: str, value: Any) -> None:
    t = lm.table
    with lm.engine.begin() as conn:
        conn.execute(sa.update(t).where(t.c.id == row_id).values({column: value}))


def _set_closed(
    factory: StoreFactory, table: sa.Table, row_id: int, column: str, value: Any
) -> int:
    """Set a column of a row while no store is open (an engine of the test's own: a closed
    store's engine is disposed, and embedded Derby shuts down with it); returns the rows."""
    config = factory.config.database_store
    assert config is not None
    engine, _target = create_store_engine(config)
    try:
        with engine.begin() as conn:
            conn.execute(sa.update(table).where(table.c.id == row_id).values({column: value}))
            return int(conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())
    finally:
        dispose_store_engine(engine)


def _text_data(body_backend: BackendSpec) -> Any:
    """A text literal for ``data``: SQLite stores it as a string (its columns take any
    type); elsewhere the test is SQLite's alone (PostgreSQL and MariaDB make bytes of it,
    caught by the descriptor's and the chunks' checks; Derby refuses it)."""
    if body_backend.name != "sqlite":
        pytest.skip("only SQLite stores a string in a BLOB column")
    return sa.text("'abc'")


def _write(lm: DatabaseLargeMessages) -> int:
    cs = chunk_size_of(lm)
    with lm.create(MID) as w:
        w.write(body_bytes(MID, 2 * cs + 10))
    return cs


@pytest.mark.parametrize(
    ("row", "column", "value"),
    [
        ("chunk", "filename", None),
        ("msg", "filename", None),
        ("chunk", "extension", None),
        ("msg", "extension", None),
        ("chunk", "filename", "garbage"),
        ("msg", "filename", "x1.msg"),
        ("chunk", "extension", "zz"),
        ("msg", "extension", "chunk"),
    ],
    ids=[
        "chunk-filename-null",
        "msg-filename-null",
        "chunk-extension-null",
        "msg-extension-null",
        "chunk-filename-garbage",
        "msg-filename-garbage",
        "chunk-extension-garbage",
        "msg-extension-of-a-chunk",
    ],
)
def test_bad_name_column_refuses_open_naming_table_and_row(
    body_backend: BackendSpec,
    body_store_factory: StoreFactory,
    row: str,
    column: str,
    value: str | None,
) -> None:
    """A row whose ``filename`` / ``extension`` is NULL or not ours: open_store raises
    CorruptionError with the table as ``path`` and the row id as ``offset``; every row is
    still there afterwards (nothing swept), and a repaired row opens again."""
    lm = _db_store(body_backend, body_store_factory)
    _write(lm)
    name = chunk_name(MID, 1) if row == "chunk" else msg_name(MID)
    rid = _row_id(lm, name)
    before = len(stored_names(lm))
    original = {"filename": name, "extension": row}[column]
    table = lm.table
    body_store_factory.close()
    _set_closed(body_store_factory, table, rid, column, value)
    with pytest.raises(CorruptionError) as caught:
        body_store_factory.open()
    assert (caught.value.path, caught.value.offset) == (table.name, rid)
    assert f"row id {rid}" in str(caught.value)
    assert _set_closed(body_store_factory, table, rid, column, original) == before
    again = body_store_factory.open().large_messages
    assert again.ids() == [MID]
    with again.open(MID) as r:
        assert r.read() == body_bytes(MID, 2 * chunk_size_of(again) + 10)


@pytest.mark.parametrize("value", [None, "text"], ids=["null", "text"])
def test_bad_descriptor_data_is_corruption_naming_the_row(
    body_backend: BackendSpec, body_store_factory: StoreFactory, value: Any
) -> None:
    """The descriptor row's ``data`` NULL, or a text value (SQLite keeps it a string): the
    store opens; open and size raise CorruptionError naming the body, offset 0 and the row
    id; delete still removes every row of the body."""
    if value == "text":
        value = _text_data(body_backend)
    lm = _db_store(body_backend, body_store_factory)
    _write(lm)
    rid = _row_id(lm, msg_name(MID))
    _set(lm, rid, "data", value)
    lm = body_store_factory.reopen().large_messages
    assert isinstance(lm, DatabaseLargeMessages)
    assert lm.ids() == [MID]
    for call in (lm.open, lm.size):
        with pytest.raises(CorruptionError) as caught:
            call(MID)
        assert (caught.value.path, caught.value.offset) == (f"{lm.table.name}/{msg_name(MID)}", 0)
        assert f"row id {rid}" in caught.value.reason
    lm.delete(MID)
    assert stored_names(lm) == []


@pytest.mark.parametrize("index", [0, 1], ids=["chunk-0", "chunk-1"])
@pytest.mark.parametrize("value", [None, "text"], ids=["null", "text"])
def test_bad_chunk_data_is_corruption_at_the_chunk(
    body_backend: BackendSpec, body_store_factory: StoreFactory, value: Any, index: int
) -> None:
    """A chunk row's ``data`` NULL or a text value: the body opens (chunk 0 comes with the
    descriptor, chunk 1 by its own select), and the read of that chunk raises CorruptionError
    naming the body, the chunk's offset and the row id; the chunks before it read."""
    if value == "text":
        value = _text_data(body_backend)
    lm = _db_store(body_backend, body_store_factory)
    cs = _write(lm)
    rid = _row_id(lm, chunk_name(MID, index))
    _set(lm, rid, "data", value)
    lm = body_store_factory.reopen().large_messages
    assert isinstance(lm, DatabaseLargeMessages)
    got = bytearray()
    with lm.open(MID) as r, pytest.raises(CorruptionError) as caught:
        while piece := r.read(65536):
            got += piece
    assert bytes(got) == body_bytes(MID, 2 * cs + 10)[: index * cs]
    assert caught.value.path == f"{lm.table.name}/{msg_name(MID)}"
    assert caught.value.offset == index * cs
    assert f"row id {rid}" in caught.value.reason


def test_store_data_exp_of_a_null_filename_is_one_line_naming_table_and_row(
    tmp_path: Path,
) -> None:
    """``store data exp`` on a store whose large-message table has a row with a NULL
    filename: a non-zero exit and one line naming the table and the row id, no traceback
    (it was an AttributeError from open_store)."""
    case = cli_case(tmp_path, "sqlite")
    try:
        with open_store(case.config) as store:
            lm = store.large_messages
            assert isinstance(lm, DatabaseLargeMessages)
            _write(lm)
            rid = _row_id(lm, chunk_name(MID, 0))
            _set(lm, rid, "filename", None)
            table = lm.table.name
        done = run_store("data", "exp", *case.args, timeout=120)
        assert done.returncode != 0
        assert "Traceback" not in done.stderr, done.stderr
        assert f"{table} at offset {rid}" in done.stderr and f"row id {rid}" in done.stderr
    finally:
        drop_schema(case.config)
