"""``PageStore.read_pages`` (what a load calls to read every page): each page exactly as
``read_page`` gives it, in the order asked, on every back-end; the database store reads
several pages per query and still raises a page's error at that page's turn."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from store.errors import CorruptionError, UnknownRecordError
from store.paging import database
from store.paging.api import PageStore
from store.paging.format import page_file_name
from tests.paging.contract import PagingFactory
from tests.support.backends import BackendSpec

PAGE = 300  # bytes: a record of 40 bytes is 50 framed, so six to a page


def _fill(ps: PageStore, count: int) -> None:
    for i in range(count):
        ps.append(b"%04d" % i + b"r" * 36)
    ps.flush()


def test_read_pages_gives_each_page_as_read_page_does(
    persistent_backend: BackendSpec, paging_factory: PagingFactory
) -> None:
    ps = paging_factory.open(page_size=PAGE).store("orders")
    _fill(ps, 40)
    pages = ps.pages()
    assert len(pages) >= 6
    expected = [(page, ps.read_page(page)) for page in pages]
    assert list(ps.read_pages(pages)) == expected
    assert list(ps.read_pages(pages[::-2])) == expected[::-2]
    assert list(ps.read_pages([])) == []
    ps = paging_factory.reopen().store("orders")
    assert list(ps.read_pages(ps.pages())) == expected
    with pytest.raises(UnknownRecordError):
        list(ps.read_pages([pages[0], max(pages) + 5]))


def test_the_database_reads_several_pages_per_query_in_order(
    paging: PagingFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    ps = paging.open(page_size=PAGE).store("orders")
    _fill(ps, 40)
    pages = ps.pages()
    expected = [(page, ps.read_page(page)) for page in pages]
    queries: list[str] = []
    sa.event.listen(
        paging.manager.backend.engine,  # type: ignore[attr-defined]
        "before_cursor_execute",
        lambda _c, _cur, statement, *_: queries.append(statement),
    )
    for per_query in (1, 2, 3, 256):
        monkeypatch.setattr(database, "_READ_MANY_PAGES", per_query)
        queries.clear()
        assert list(ps.read_pages(pages)) == expected, per_query
        reads = [q for q in queries if " IN " in q.upper()]
        assert len(reads) == -(-len(pages) // per_query), (per_query, queries)


def test_a_damaged_row_fails_at_its_pages_turn(paging: PagingFactory, monkeypatch) -> None:
    ps = paging.open(page_size=PAGE).store("orders")
    _fill(ps, 40)
    first = ps.read_page(1)
    table = paging.schema.page_table(1)
    with paging.side_engine.begin() as conn:
        row = conn.execute(
            sa.select(sa.func.min(table.c.id)).where(table.c.filename == page_file_name(2))
        ).scalar_one()
        conn.execute(table.update().where(table.c.id == row).values(data=None))
    monkeypatch.setattr(database, "_READ_MANY_PAGES", 256)  # pages 1 and 2 in one query
    reader = ps.read_pages(ps.pages())
    assert next(reader) == (1, first)
    with pytest.raises(CorruptionError) as info:
        next(reader)
    assert (info.value.path, info.value.offset) == (table.name, row)
