"""Contract: flush(), sync_future(), stats() and compact() (docs/journal.md), on every back-end.
Zero persistence: flush and futures complete at once, stats count nothing, compact is a no-op."""

from __future__ import annotations

import asyncio
import concurrent.futures
import random

import pytest

from tests.journal.contract import ModelledJournal, expect_load, open_loaded, restart
from tests.support.backends import FILE_JOURNAL_SIZE, BackendSpec
from tests.support.model import JournalModel


def modelled(backend: BackendSpec, store_factory) -> ModelledJournal:
    journal, result = open_loaded(store_factory)
    model = JournalModel()
    expect_load(backend, result, model.expected_load())
    return ModelledJournal(backend, journal, model)


def test_flush_returns_and_everything_before_it_loads(backend: BackendSpec, store_factory) -> None:
    """flush() returns once everything appended so far is durable; with nothing pending it
    returns at once."""
    mj = modelled(backend, store_factory)
    mj.journal.flush()
    for i in range(100):
        mj.add(i, 1, b"f" * 100)
    mj.journal.flush()
    mj.journal.flush()
    restart(store_factory, mj.model)


def test_sync_future_completes_with_none(backend: BackendSpec, store_factory) -> None:
    """sync_future() is a concurrent.futures.Future that completes (result None) once what was
    appended before it is durable; it also completes with nothing pending."""
    mj = modelled(backend, store_factory)
    idle = mj.journal.sync_future()
    assert isinstance(idle, concurrent.futures.Future)
    assert idle.result(timeout=10) is None
    futures = []
    for i in range(50):
        mj.add(i, 1, b"x", sync=False)
        futures.append(mj.journal.sync_future())
    for f in futures:
        assert f.result(timeout=10) is None
        assert f.done() and f.exception() is None
    restart(store_factory, mj.model)


def test_sync_future_wraps_into_asyncio(backend: BackendSpec, store_factory) -> None:
    """asyncio.wrap_future(journal.sync_future()) can be awaited (callers that must not block)."""
    mj = modelled(backend, store_factory)

    async def produce() -> list[None]:
        waits = []
        for i in range(20):
            mj.add(i, 1, b"async", sync=False)
            waits.append(asyncio.wrap_future(mj.journal.sync_future()))
        return await asyncio.wait_for(asyncio.gather(*waits), timeout=10)

    assert asyncio.run(produce()) == [None] * 20
    restart(store_factory, mj.model)


def test_stats_records_live_follows_adds_and_deletes(backend: BackendSpec, store_factory) -> None:
    """stats().records_live counts live records: 0 when empty, +1 per add of a new id, -1 per
    delete, unchanged by a rollback, rebuilt by a load. Zero persistence counts nothing."""
    mj = modelled(backend, store_factory)

    def live() -> int:
        return mj.journal.stats().records_live

    def expect(n: int) -> None:
        assert live() == (n if backend.persistent else 0)

    expect(0)
    for i in range(30):
        mj.add(i, 1, b"s")
    expect(30)
    for i in range(10):
        mj.delete(i)
    expect(20)
    mj.add_tx(1, 100, 1, b"t")
    mj.add_tx(1, 101, 1, b"t")
    mj.commit(1)
    expect(22)
    mj.add_tx(2, 102, 1, b"t")
    mj.delete_tx(2, 10)
    mj.rollback(2)
    expect(22)
    mj.journal = restart(store_factory, mj.model)
    expect(22)
    stats = mj.journal.stats()
    if backend.persistent:
        assert stats.files > 0 and 0 < stats.bytes_live <= stats.bytes_total


def _churn(mj: ModelledJournal, rng: random.Random, ids: range) -> None:
    for i in ids:
        mj.add(i, 1, rng.randbytes(rng.randint(100, 3000)))
    for i in ids:
        if rng.random() < 0.5:
            mj.update(i, 2, rng.randbytes(rng.randint(100, 3000)))
    for i in ids:
        if rng.random() < 0.8:
            mj.delete(i)


def test_compact_keeps_the_load_identical(backend: BackendSpec, store_factory) -> None:
    """compact() reclaims dead space without changing what loads: records, a prepared tx and
    an open tx that commits only after the compaction all survive as the model says."""
    rng = random.Random(5)
    mj = modelled(backend, store_factory)
    _churn(mj, rng, range(0, 300))
    mj.add_tx(1, 5000, 1, b"prepared" * 100)
    mj.delete_tx(1, mj.model.live_ids()[0])
    mj.prepare(1, b"xid-1")
    mj.add_tx(2, 6000, 1, b"open across compaction")
    mj.add_tx(3, 7000, 1, b"left open: fails at restart")
    _churn(mj, rng, range(300, 600))
    mj.journal.compact()
    mj.update_tx(2, 6000, 1, b"after compaction")
    mj.commit(2)
    mj.add(9000, 1, b"after compaction")
    mj.restart(store_factory)
    mj.journal.compact()
    mj.commit(1)
    mj.restart(store_factory)


def test_compact_reclaims_space_of_deleted_records(
    persistent_backend: BackendSpec, store_factory
) -> None:
    """After deleting most records, compact() leaves bytes_total no larger than before and
    the load unchanged (a store that only grows would fill the disk)."""
    rng = random.Random(6)
    mj = modelled(persistent_backend, store_factory)
    for i in range(200):
        mj.add(i, 1, rng.randbytes(FILE_JOURNAL_SIZE // 8))
    for i in range(190):
        mj.delete(i)
    mj.journal.flush()
    before = mj.journal.stats()
    mj.journal.compact()
    after = mj.journal.stats()
    assert after.records_live == before.records_live == 10
    assert after.bytes_total <= before.bytes_total
    assert after.bytes_live <= after.bytes_total
    restart(store_factory, mj.model)


@pytest.mark.parametrize("rounds", [3])
def test_compact_repeatedly_between_restarts(
    backend: BackendSpec, store_factory, rounds: int
) -> None:
    """Compaction is repeatable: churn, compact, restart, several times -> model each time."""
    rng = random.Random(rounds)
    mj = modelled(backend, store_factory)
    for r in range(rounds):
        _churn(mj, rng, range(r * 200, r * 200 + 200))
        mj.journal.compact()
        mj.journal.compact()
        mj.restart(store_factory)
