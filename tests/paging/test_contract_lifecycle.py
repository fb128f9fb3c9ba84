"""Contract: what survives a reopen, durability of flush and sync=True, concurrent appends,
and the closed state, on every back-end (store.paging.api rules 1, 2 and 5). Zero
persistence keeps nothing across a reopen."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from store.errors import JournalClosedError
from store.paging.api import PagePosition, PageStore, PagingManager
from tests.paging.contract import PagingFactory
from tests.support.backends import BackendSpec

P = PagePosition


def test_addresses_are_rediscovered_after_reopen(backend, paging_factory) -> None:
    pm = paging_factory.open()
    for address in ("b", "a", "c"):
        pm.store(address).append(address.encode())
    assert pm.addresses() == ["a", "b", "c"]
    pm = paging_factory.reopen()
    assert pm.addresses() == (["a", "b", "c"] if backend.persistent else [])
    if backend.persistent:
        assert [pm.store(a).read_page(1) for a in ("a", "b", "c")] == [[b"a"], [b"b"], [b"c"]]


def test_current_page_continues_after_reopen_under_the_same_rule(
    backend: BackendSpec, paging_factory: PagingFactory
) -> None:
    """Rule 1: at open the current page is the highest present; appends continue it and roll
    where they would have rolled without the reopen (page size 100: 3 records of 20+10)."""
    ps = paging_factory.open(page_size=100).store("orders")
    assert [ps.append(b"%020d" % i) for i in range(4)] == [P(1, 0), P(1, 1), P(1, 2), P(2, 0)]
    pm = paging_factory.reopen()
    ps = pm.store("orders")
    if not backend.persistent:
        assert ps.current_page == 1 and ps.pages() == []
        return
    assert ps.current_page == 2
    assert [ps.append(b"%020d" % i) for i in range(4, 7)] == [P(2, 1), P(2, 2), P(3, 0)]
    assert ps.pages() == [1, 2, 3]
    assert ps.read_page(2) == [b"%020d" % i for i in (3, 4, 5)]
    ps = paging_factory.reopen().store("orders")
    assert ps.append(b"%020d" % 7) == P(3, 1)


def test_a_store_without_records_reopens_at_page_1(backend, paging_factory) -> None:
    paging_factory.open().store("empty")
    pm = paging_factory.reopen()
    if backend.persistent and "empty" in pm.addresses():
        ps = pm.store("empty")
        assert ps.current_page == 1 and ps.pages() == []
        assert ps.append(b"x") == P(1, 0)


@pytest.mark.parametrize(
    "make_durable",
    [
        pytest.param(lambda ps: ps.flush(), id="flush"),
        pytest.param(lambda ps: ps.append(b"last", sync=True), id="sync-append"),
    ],
)
def test_flush_and_sync_append_make_records_durable(
    persistent_backend: BackendSpec,
    paging_factory: PagingFactory,
    make_durable: Callable[[PageStore], object],
) -> None:
    """Rule 2: once flush() / append(sync=True) returns, every record appended before it is
    in the storage, read without the manager (which stays open: a clean close would make
    them durable anyway). The sync timeout is a minute, so only the call writes them."""
    ps = paging_factory.open(sync_timeout_ns=60 * 10**9).store("orders")
    records = [b"r%d" % i for i in range(20)]
    for r in records:
        ps.append(r)
    assert paging_factory.durable_records("orders", 1) == []  # nothing written yet
    make_durable(ps)
    durable = paging_factory.durable_records("orders", 1)
    assert durable[: len(records)] == records


def test_clean_close_makes_everything_durable(persistent_backend, paging_factory) -> None:
    """Rule 5."""
    ps = paging_factory.open().store("orders")
    for i in range(200):
        ps.append(b"r%d" % i)
    ps = paging_factory.reopen().store("orders")
    assert ps.read_page(1) == [b"r%d" % i for i in range(200)]


def _check_dense(positions: list[PagePosition]) -> None:
    """Positions unique, pages consecutive from 1, indexes 0..n-1 on each page."""
    assert len(set(positions)) == len(positions)
    by_page: dict[int, list[int]] = {}
    for p in positions:
        by_page.setdefault(p.page, []).append(p.index)
    assert sorted(by_page) == list(range(1, len(by_page) + 1))
    for indexes in by_page.values():
        assert sorted(indexes) == list(range(len(indexes)))


def _hammer(pm: PagingManager, addresses: list[str], threads: int, per_thread: int, sync: bool):
    """Each thread appends ``per_thread`` records to its address; returns per address the
    positions and records, as appended."""
    results: dict[str, list[tuple[PagePosition, bytes]]] = {a: [] for a in addresses}
    lock = threading.Lock()
    errors: list[BaseException] = []
    barrier = threading.Barrier(threads)

    def work(t: int) -> None:
        address = addresses[t % len(addresses)]
        ps = pm.store(address)
        mine = []
        barrier.wait()
        try:
            for i in range(per_thread):
                record = b"t%d-%d-" % (t, i) + bytes(i % 50)
                mine.append((ps.append(record, sync=sync and i % 10 == 0), record))
        except BaseException as exc:
            errors.append(exc)
        with lock:
            results[address].extend(mine)

    pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert not errors, errors
    return results


@pytest.mark.parametrize("addresses", [["one"], ["a", "b", "c"]], ids=["one", "several"])
def test_concurrent_appends_get_unique_dense_positions(
    backend: BackendSpec, paging_factory: PagingFactory, addresses: list[str]
) -> None:
    pm = paging_factory.open(page_size=2000)
    results = _hammer(pm, addresses, threads=6, per_thread=150, sync=True)
    for address, appended in results.items():
        _check_dense([p for p, _ in appended])
        ps = pm.store(address)
        stored = {}
        for page in ps.pages():
            for index, record in enumerate(ps.read_page(page)):
                stored[P(page, index)] = record
        assert stored == dict(appended)
    if backend.persistent:
        pm = paging_factory.reopen()
        for address, appended in results.items():
            ps = pm.store(address)
            last = max(p for p, _ in appended)
            assert ps.read_page(last.page)[last.index] == dict(appended)[last]


def test_every_call_after_close_raises_journal_closed(backend, paging_factory) -> None:
    """Rule 5, and close is idempotent."""
    pm = paging_factory.open()
    ps = pm.store("orders")
    ps.append(b"x")
    pm.close()
    pm.close()
    calls: list[Callable[[], object]] = [
        lambda: pm.store("orders"),
        lambda: pm.store("new"),
        pm.addresses,
        lambda: pm.remove("orders"),
        lambda: ps.append(b"y"),
        lambda: ps.append(b"y", sync=True),
        ps.flush,
        ps.pages,
        lambda: ps.read_page(1),
        lambda: ps.delete_page(1),
    ]
    for call in calls:
        with pytest.raises(JournalClosedError):
            call()
