"""Deleted and aborted bodies leave no storage (docs/db.md, docs/large.md): no file, no row and,
on PostgreSQL, no large object (``pg_largeobject_metadata``; the server is shared with other
test runs, so its count is compared before and after, never expected to be zero)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import sqlalchemy as sa

from store.large.api import LargeMessageStore
from store.large.database import DatabaseLargeMessages
from tests.large.support import chunk_size_of, stored_names, write_body
from tests.support.backends import BackendSpec, StoreFactory


def _large_objects(lm: LargeMessageStore) -> Callable[[], int | None]:
    """A counter of PostgreSQL large objects (None elsewhere)."""
    if not (isinstance(lm, DatabaseLargeMessages) and lm.engine.dialect.name == "postgresql"):
        return lambda: None

    def count() -> int:
        with lm.engine.connect() as conn:
            n = conn.execute(sa.text("select count(*) from pg_largeobject_metadata")).scalar_one()
            conn.rollback()
        return int(n)

    return count


def test_deleting_every_body_leaves_no_file_row_or_large_object(
    body_backend: BackendSpec, body_store_factory: StoreFactory
) -> None:
    """Bodies of every shape (empty, one byte, exactly 2 chunks, 2 chunks + 1) plus an
    aborted one, all deleted, before and after a reopen: the directory / table is empty and
    PostgreSQL holds as many large objects as before."""
    lm = body_store_factory.open().large_messages
    large_objects = _large_objects(lm)
    before = large_objects()
    cs = chunk_size_of(lm)
    sizes = {1: 0, 2: 1, 3: 2 * cs, 4: 2 * cs + 1}
    for mid, size in sizes.items():
        write_body(lm, mid, size)
    with pytest.raises(KeyError), lm.create(5) as w:
        w.write(b"z" * (cs + 10))
        raise KeyError("aborted")
    assert stored_names(lm) != []
    lm.delete(1)
    lm.delete(3)
    lm = body_store_factory.reopen().large_messages
    lm.delete(2)
    lm.delete(4)
    assert lm.ids() == []
    assert stored_names(lm) == []
    assert large_objects() == before
