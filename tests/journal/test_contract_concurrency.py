"""Contract: concurrent appenders (reference behaviours J-25, J-61, J-62), on every back-end.
Every Journal method may be called from any number of threads (api.py). Zero persistence
accepts every call and loads nothing."""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Callable

import pytest

from store.errors import UnknownRecordError
from store.journal.api import LoadResult, RecordInfo
from tests.journal.contract import EMPTY, expect_load, open_loaded
from tests.support.backends import BackendSpec
from tests.support.model import JournalModel, assert_load_equal


def run_threads(count: int, work: Callable[[int], None], *, timeout: float) -> None:
    """Runs ``work(i)`` on ``count`` threads released together; returns None.

    Raises AssertionError if a thread is still running after ``timeout`` seconds (a hang) and
    re-raises the first exception a thread raised.
    """
    barrier = threading.Barrier(count)
    errors: list[BaseException] = []

    def body(i: int) -> None:
        try:
            barrier.wait()
            work(i)
        except BaseException as exc:  # reported to the test thread below
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(count)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    stuck = sum(t.is_alive() for t in threads)
    assert stuck == 0, f"{stuck} of {count} threads still running after {timeout}s"
    if errors:
        raise errors[0]


def test_concurrent_double_delete_exactly_one_succeeds(backend: BackendSpec, store_factory) -> None:
    """J-25: add 1 and 2; 100 threads released together each delete 2: exactly one succeeds,
    99 get UnknownRecordError, all finish within 10 s; restart -> only record 1. Zero
    persistence keeps no records: all 100 deletes are accepted."""
    journal, _ = open_loaded(store_factory)
    journal.append_add(1, 1, b"kept", sync=True)
    journal.append_add(2, 1, b"deleted", sync=True)
    outcomes: list[str] = []
    lock = threading.Lock()

    def delete(_i: int) -> None:
        try:
            journal.append_delete(2, sync=True)
            outcome = "ok"
        except UnknownRecordError:
            outcome = "refused"
        with lock:
            outcomes.append(outcome)

    run_threads(100, delete, timeout=10)
    if backend.persistent:
        assert outcomes.count("ok") == 1, outcomes
        assert outcomes.count("refused") == 99
    else:
        assert outcomes == ["ok"] * 100
    model = JournalModel()
    model.add(1, 1, b"kept")
    _journal, result = open_loaded(store_factory)
    expect_load(backend, result, model.restart())


def _tx_groups_are_contiguous(records: list[RecordInfo], group_of: Callable[[int], int]) -> None:
    """Asserts each transaction's entries are adjacent in the load (applied at its commit)."""
    seen: set[int] = set()
    previous: int | None = None
    for r in records:
        group = group_of(r.id)
        if group != previous:
            assert group not in seen, f"entries of tx {group} are split in the load"
            seen.add(group)
            previous = group


def test_10000_sync_commits_from_several_threads(backend: BackendSpec, store_factory) -> None:
    """J-61: 10,000 txs, each an add ("add <id>") and an update of a never-added id
    ("up <id>"), committed with sync=True from 8 threads: every commit returns exactly once,
    nothing hangs; restart -> 20,000 records, each payload matching its id and kind, each tx's
    two entries adjacent, 0 failed, 0 prepared."""
    journal, _ = open_loaded(store_factory)
    threads, per_thread = 8, 1250
    returned = [0] * (threads * per_thread)
    up_base = 10_000_000

    def work(t: int) -> None:
        for n in range(per_thread):
            k = t * per_thread + n
            journal.append_add_tx(k, k, 1, b"add %d" % k)
            journal.append_update_tx(k, up_base + k, 1, b"up %d" % (up_base + k))
            journal.append_commit(k, sync=True)
            returned[k] += 1

    run_threads(threads, work, timeout=240)
    assert returned == [1] * len(returned)
    _journal, result = open_loaded(store_factory)
    if not backend.persistent:
        expect_load(backend, result, EMPTY)
        return
    assert result.failed == [] and result.prepared == []
    assert len(result.records) == 2 * len(returned)
    for r in result.records:
        kind, is_update = (b"up", True) if r.id >= up_base else (b"add", False)
        assert r == RecordInfo(r.id, 1, b"%s %d" % (kind, r.id), is_update)
    assert {r.id for r in result.records} == set(range(len(returned))) | {
        up_base + k for k in range(len(returned))
    }
    _tx_groups_are_contiguous(result.records, lambda rid: rid % up_base)
    first: dict[int, tuple[int, bool]] = {}
    for pos, r in enumerate(result.records):
        first.setdefault(r.id % up_base, (pos, r.is_update))
    assert all(not is_update for _pos, is_update in first.values()), "add must precede update"


def _payload(rid: int, size: int) -> bytes:
    head = struct.pack(">q", rid)
    return head + bytes((rid + i) & 0xFF for i in range(size - len(head)))


def test_ten_threads_of_transactions_of_100_records(backend: BackendSpec, store_factory) -> None:
    """J-62: 10 threads x 1000 records of 1536 bytes (first 8 bytes = the id) in txs of 100
    with sync commits; restart -> 10,000 adds, payloads intact, txs contiguous, each thread's
    records in its order; no updates, deletes, failed or prepared."""
    journal, _ = open_loaded(store_factory)

    def work(t: int) -> None:
        for tx in range(10):
            tx_id = t * 100 + tx
            for n in range(100):
                rid = t * 1000 + tx * 100 + n
                journal.append_add_tx(tx_id, rid, 3, _payload(rid, 1536))
            journal.append_commit(tx_id, sync=True)

    run_threads(10, work, timeout=240)
    _journal, result = open_loaded(store_factory)
    if not backend.persistent:
        expect_load(backend, result, EMPTY)
        return
    _check_j62(result)


def _check_j62(result: LoadResult) -> None:
    assert result.failed == [] and result.prepared == []
    assert len(result.records) == 10_000
    assert sorted(r.id for r in result.records) == list(range(10_000))
    for r in result.records:
        assert not r.is_update and r.user_record_type == 3
        assert struct.unpack(">q", r.data[:8])[0] == r.id and r.data == _payload(r.id, 1536)
    _tx_groups_are_contiguous(result.records, lambda rid: rid // 100)
    for t in range(10):
        own = [r.id for r in result.records if r.id // 1000 == t]
        assert own == sorted(own), f"thread {t}'s transactions loaded out of order"


@pytest.mark.parametrize("sync", ["sync", "future", "flush"])
def test_concurrent_plain_appends_keep_each_threads_order(
    backend: BackendSpec, store_factory, sync: str
) -> None:
    """Rule 2 under concurrency: 16 threads append adds, updates and deletes (waiting with
    sync=True, sync_future() or flush()); restart -> the model of each thread's calls, each
    thread's entries in its own order."""
    journal, _ = open_loaded(store_factory)
    threads, per_thread = 16, 150
    lock = threading.Lock()
    model = JournalModel()

    def work(t: int) -> None:
        for n in range(per_thread):
            rid = t * 10_000 + n
            # One lock around journal and model: the model needs the journal's order.
            with lock:
                journal.append_add(rid, 1, b"%d" % rid, sync=False)
                model.add(rid, 1, b"%d" % rid)
                if n % 3 == 2:
                    journal.append_update(rid - 1, 2, b"u", sync=False)
                    model.update(rid - 1, 2, b"u")
                if n % 5 == 4:
                    journal.append_delete(rid - 2, sync=False)
                    model.delete(rid - 2)
            if sync == "sync":
                journal.append_add(rid + 5000, 1, b"s", sync=True)
                with lock:
                    model.add(rid + 5000, 1, b"s")
                    journal.append_delete(rid + 5000, sync=False)
                    model.delete(rid + 5000)
            elif sync == "future":
                assert journal.sync_future().result(timeout=30) is None
            else:
                journal.flush()

    run_threads(threads, work, timeout=240)
    _journal, result = open_loaded(store_factory)
    assert_load_equal(result, model.restart() if backend.persistent else EMPTY)


def test_sync_future_and_flush_from_many_threads_complete(
    backend: BackendSpec, store_factory
) -> None:
    """flush() and sync_future() called concurrently with appends all complete (no lost
    wake-ups), and the futures resolve to None."""
    journal, _ = open_loaded(store_factory)
    futures = []
    lock = threading.Lock()

    def work(t: int) -> None:
        for n in range(200):
            journal.append_add(t * 1000 + n, 1, b"x")
            if n % 10 == 0:
                future = journal.sync_future()
                with lock:
                    futures.append(future)
            if n % 50 == 0:
                journal.flush()

    run_threads(12, work, timeout=120)
    assert all(f.result(timeout=30) is None for f in futures)
    journal.flush()
    _journal, result = open_loaded(store_factory)
    if backend.persistent:
        assert len(result.records) == 12 * 200
    else:
        expect_load(backend, result, EMPTY)
