"""Contract: positions, the roll rule, reading, deleting pages and removing stores, on every
back-end (file NIO/MAPPED/ASYNCIO, zero, PostgreSQL, MariaDB, SQLite, Derby) — docs/paging.md,
store.paging.api rules 1-4."""

from __future__ import annotations

import os

import pytest

from store.errors import JournalClosedError, UnknownRecordError
from store.paging.api import PagePosition
from store.paging.format import FRAMING
from tests.paging.contract import PagingFactory
from tests.support.backends import BackendSpec

P = PagePosition

# (page size, payload sizes appended in order, expected positions). FRAMING = 10 bytes.
ROLL_RULE = [
    pytest.param(100, [40, 40], [P(1, 0), P(1, 1)], id="two-fill-the-page-exactly"),
    pytest.param(100, [40, 41], [P(1, 0), P(2, 0)], id="one-byte-over-rolls"),
    pytest.param(100, [0] * 11, [P(1, i) for i in range(10)] + [P(2, 0)], id="empty-records"),
    pytest.param(100, [500], [P(1, 0)], id="first-record-bigger-than-a-page-stays-on-page-1"),
    pytest.param(
        100, [10, 500, 10], [P(1, 0), P(2, 0), P(3, 0)], id="big-record-gets-a-page-of-its-own"
    ),
    pytest.param(100, [90, 0], [P(1, 0), P(2, 0)], id="full-page-then-empty-record"),
    pytest.param(
        50,
        [1, 1, 1, 1, 1, 100, 1],
        [P(1, 0), P(1, 1), P(1, 2), P(1, 3), P(2, 0), P(3, 0), P(4, 0)],
        id="small-then-big-then-small",
    ),
]


def _payload(tag: int, size: int) -> bytes:
    return bytes((tag + i) % 256 for i in range(size))


def test_positions_start_at_page_1_index_0(backend: BackendSpec, paging_factory: PagingFactory):
    ps = paging_factory.open().store("orders")
    assert ps.current_page == 1
    assert [ps.append(b"a"), ps.append(b"b")] == [P(1, 0), P(1, 1)]
    assert ps.pages() == [1]


@pytest.mark.parametrize(("page_size", "sizes", "expected"), ROLL_RULE)
def test_roll_rule(
    backend: BackendSpec,
    paging_factory: PagingFactory,
    page_size: int,
    sizes: list[int],
    expected: list[PagePosition],
) -> None:
    """Rule 1: a new page when the current one holds a record and the next would pass the
    page size (encoded sizes, FRAMING included); each page holds what was placed on it."""
    ps = paging_factory.open(page_size=page_size).store("orders")
    positions = [ps.append(_payload(i, n)) for i, n in enumerate(sizes)]
    assert positions == expected
    assert ps.current_page == expected[-1].page
    assert ps.pages() == sorted({p.page for p in expected})
    for page in ps.pages():
        placed = enumerate(zip(sizes, expected, strict=True))
        want = [_payload(i, n) for i, (n, p) in placed if p.page == page]
        assert ps.read_page(page) == want


def test_framing_is_ten_bytes() -> None:
    """The roll table above is written for 10 bytes of framing per record."""
    assert FRAMING == 10


def test_read_page_returns_the_records_in_order(backend, paging_factory: PagingFactory) -> None:
    ps = paging_factory.open(page_size=1000).store("orders")
    records = [b"", "été ✓".encode(), bytes(range(256)), b"\x7b\x7d" * 50, b"x" * 300]
    positions = [ps.append(r) for r in records]
    assert [p.page for p in positions] == [1, 1, 1, 1, 1]
    assert ps.read_page(1) == records
    more = [ps.append(bytes([i]) * 200) for i in range(5)]
    assert more[-1].page == 2
    assert ps.read_page(1) == records + [
        bytes([i]) * 200 for i in range(len(more)) if more[i].page == 1
    ]


def test_read_page_sees_records_appended_without_sync(backend, paging_factory) -> None:
    """Rule 2: read_page sees every record appended before it was called (the sync timeout
    is a minute: the read itself must get them written or read them pending)."""
    ps = paging_factory.open(page_size=10_000, sync_timeout_ns=60 * 10**9).store("orders")
    for i in range(50):
        ps.append(b"r%d" % i)
        assert ps.read_page(1)[-1] == b"r%d" % i


@pytest.mark.parametrize("page", [0, 2, 99, -1])
def test_read_page_of_a_missing_page_raises_unknown_record(backend, paging_factory, page) -> None:
    ps = paging_factory.open().store("orders")
    ps.append(b"x")
    with pytest.raises(UnknownRecordError):
        ps.read_page(page)


def test_read_page_of_a_new_store_raises_unknown_record(backend, paging_factory) -> None:
    ps = paging_factory.open().store("orders")
    assert ps.pages() == []
    with pytest.raises(UnknownRecordError):
        ps.read_page(1)


def test_delete_page_removes_it(backend, paging_factory: PagingFactory) -> None:
    ps = paging_factory.open(page_size=30).store("orders")
    for i in range(3):
        ps.append(b"r%d" % i)  # 12 bytes each: two per page
    assert ps.pages() == [1, 2]
    ps.delete_page(1)
    assert ps.pages() == [2]
    with pytest.raises(UnknownRecordError):
        ps.read_page(1)
    with pytest.raises(UnknownRecordError):
        ps.delete_page(1)
    assert ps.read_page(2) == [b"r2"]
    if paging_factory.kind == "file":
        assert set(paging_factory.folders()) == {"orders"}
        folder = paging_factory.folders()["orders"]
        assert sorted(n for n in os.listdir(folder) if n.endswith(".page")) == ["000000002.page"]
    if backend.persistent:
        ps.flush()
        paging_factory.reopen()
        assert paging_factory.manager is not None
        assert paging_factory.manager.store("orders").pages() == [2]


def test_delete_page_of_a_missing_page_raises(backend, paging_factory) -> None:
    ps = paging_factory.open().store("orders")
    with pytest.raises(UnknownRecordError):
        ps.delete_page(1)


def test_deleting_the_current_page_moves_appends_to_the_next(backend, paging_factory) -> None:
    """Rule 4: a position is never handed out twice while the store is open."""
    ps = paging_factory.open(page_size=1000).store("orders")
    assert ps.append(b"a") == P(1, 0)
    ps.delete_page(1)
    assert ps.current_page == 2
    assert ps.append(b"b") == P(2, 0)
    assert ps.pages() == [2]
    assert ps.read_page(2) == [b"b"]


def test_remove_deletes_the_whole_store(backend, paging_factory: PagingFactory) -> None:
    pm = paging_factory.open(page_size=30)
    ps = pm.store("orders")
    keep = pm.store("invoices")
    for i in range(5):
        ps.append(b"r%d" % i, sync=True)
    keep.append(b"kept", sync=True)
    assert pm.addresses() == ["invoices", "orders"]
    pm.remove("orders")
    assert pm.addresses() == ["invoices"]
    with pytest.raises(JournalClosedError):
        ps.append(b"late")
    with pytest.raises(JournalClosedError):
        ps.read_page(1)
    fresh = pm.store("orders")
    assert fresh.pages() == [] and fresh.current_page == 1
    assert fresh.append(b"new") == P(1, 0)
    assert keep.read_page(1) == [b"kept"]
    pm.remove("never-had-a-store")  # a no-op
    if paging_factory.kind == "file":
        assert set(paging_factory.folders()) == {"invoices", "orders"}
    if backend.persistent:
        pm.remove("orders")
        pm = paging_factory.reopen()
        assert pm.addresses() == ["invoices"]
        assert pm.store("invoices").read_page(1) == [b"kept"]


def test_remove_of_a_store_with_pending_records(backend, paging_factory) -> None:
    """Records appended without sync and not yet written are dropped with their store."""
    pm = paging_factory.open()
    ps = pm.store("orders")
    for i in range(100):
        ps.append(b"r%d" % i)
    pm.remove("orders")
    assert pm.addresses() == []
    pm.store("other").append(b"x", sync=True)
    if backend.persistent:
        assert paging_factory.reopen().addresses() == ["other"]


ADDRESSES = [
    "ordres.été",
    "日本語/キュー",
    'a/b\\c:d*e?f"g<h>i|j',
    "..",
    ".",
    "line\nbreak",
    " leading and trailing ",
    "x" * 1000,
    "\u0000nul",
]


def test_unicode_and_file_name_hostile_addresses(backend, paging_factory) -> None:
    pm = paging_factory.open()
    for i, address in enumerate(ADDRESSES):
        pm.store(address).append(b"%d" % i, sync=True)
    assert pm.addresses() == sorted(ADDRESSES)
    if backend.persistent:
        pm = paging_factory.reopen()
        assert pm.addresses() == sorted(ADDRESSES)
        for i, address in enumerate(ADDRESSES):
            assert pm.store(address).read_page(1) == [b"%d" % i]


def test_empty_address_is_refused(backend, paging_factory) -> None:
    with pytest.raises(ValueError):
        paging_factory.open().store("")
