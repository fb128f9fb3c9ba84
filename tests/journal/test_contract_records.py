"""Contract: non-transactional records and reloads (reference behaviours J-18..J-36, J-46), on
every back-end. Zero persistence accepts every call and loads nothing."""

from __future__ import annotations

import random

import pytest

from store.errors import RecordTooLargeError, UnknownRecordError
from store.journal.api import MAX_ID, MIN_ID
from tests.journal.contract import (
    ModelledJournal,
    expect_load,
    open_loaded,
    raises_if_persistent,
)
from tests.support.backends import FILE_JOURNAL_SIZE, BackendSpec
from tests.support.model import JournalModel


def modelled(backend: BackendSpec, store_factory) -> ModelledJournal:
    journal, result = open_loaded(store_factory)
    model = JournalModel()
    expect_load(backend, result, model.expected_load())
    return ModelledJournal(backend, journal, model)


def test_single_add_survives_restart(backend: BackendSpec, store_factory) -> None:
    """J-18: add(1); restart -> exactly that record."""
    mj = modelled(backend, store_factory)
    mj.add(1, 1, b"one", sync=True)
    mj.restart(store_factory)


@pytest.mark.parametrize(
    "ids",
    [
        pytest.param(list(range(1, 11)), id="contiguous-1-10"),
        pytest.param([1, 3, 5, 7, 10, 13, 56, 100, 102, 200, 201, 202, 203], id="non-contiguous"),
    ],
)
def test_several_adds_reload_in_order(backend: BackendSpec, store_factory, ids) -> None:
    """J-19: several adds -> the same records in the same order after restart."""
    mj = modelled(backend, store_factory)
    for i in ids:
        mj.add(i, 1, f"record {i}".encode())
    mj.restart(store_factory)


def test_user_type_and_one_byte_payload(backend: BackendSpec, store_factory) -> None:
    """J-20: add id 13, user type 14, payload [15] -> reloaded exactly."""
    mj = modelled(backend, store_factory)
    mj.add(13, 14, bytes([15]))
    mj.restart(store_factory)


def test_updates_follow_adds_each_as_its_own_entry(backend: BackendSpec, store_factory) -> None:
    """J-21/J-22: adds then two updates of every id -> 3 entries per id, updates flagged."""
    mj = modelled(backend, store_factory)
    for i in range(1, 11):
        mj.add(i, 1, b"a%d" % i)
    for round_ in (1, 2):
        for i in range(1, 11):
            mj.update(i, 2, b"u%d.%d" % (i, round_))
    mj.restart(store_factory)
    assert len(mj.model.expected_load().records) == 30


def test_duplicate_adds_both_load_and_one_delete_removes_both(
    backend: BackendSpec, store_factory
) -> None:
    """J-23: add 13 ids, add 9 of them again -> both entries; a delete removes both."""
    ids = [1, 3, 5, 7, 10, 13, 56, 100, 102, 200, 201, 202, 203]
    mj = modelled(backend, store_factory)
    for i in ids:
        mj.add(i, 1, b"first")
    for i in ids[:9]:
        mj.add(i, 1, b"second")
    mj.restart(store_factory)
    for i in ids[:4]:
        mj.delete(i)
    mj.restart(store_factory)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_deletes_remove_every_entry_whatever_the_order(
    backend: BackendSpec, store_factory, seed: int
) -> None:
    """J-24: deleting an id removes its add and updates in any order; deleting all -> empty."""
    rng = random.Random(seed)
    ids = list(range(20))
    mj = modelled(backend, store_factory)
    for i in ids:
        mj.add(i, 1, b"a")
    for i in rng.sample(ids, 12):
        mj.update(i, 1, b"u")
    deleted = rng.sample(ids, 10)
    for i in deleted:
        mj.delete(i)
    mj.restart(store_factory)
    for i in rng.sample(sorted(set(ids) - set(deleted)), 10):
        mj.delete(i)
    mj.restart(store_factory)
    assert mj.model.expected_load().records == []


def test_records_of_random_sizes_spanning_files(backend: BackendSpec, store_factory) -> None:
    """J-26: 100 adds of 1500-10000 random bytes and 100 bigger updates roll across files;
    reload exact; delete all without sync -> restart empty."""
    rng = random.Random(26)
    mj = modelled(backend, store_factory)
    for i in range(100):
        mj.add(i, 1, rng.randbytes(rng.randint(1500, 10000)))
    for i in range(100):
        mj.update(i, 1, rng.randbytes(rng.randint(1510, 10010)))
    mj.restart(store_factory)
    for i in range(100):
        mj.delete(i, sync=False)
    mj.restart(store_factory)


def test_restart_and_continue(backend: BackendSpec, store_factory) -> None:
    """J-27: three phases of adds/updates/deletes, each followed by a restart -> {7, 8}."""
    mj = modelled(backend, store_factory)
    for i in (1, 2, 3):
        mj.add(i, 1, b"p1")
    mj.update(1, 1, b"u")
    mj.update(2, 1, b"u")
    mj.restart(store_factory)
    for i in (4, 5, 6):
        mj.add(i, 1, b"p2")
    mj.update(5, 1, b"u")
    mj.delete(3)
    mj.restart(store_factory)
    mj.add(7, 1, b"p3")
    mj.add(8, 1, b"p3")
    for i in (1, 2, 4, 5, 6):
        mj.delete(i)
    mj.restart(store_factory)
    assert mj.model.live_ids() == [7, 8]


def test_user_type_and_data_per_record_after_updates(backend: BackendSpec, store_factory) -> None:
    """J-28: 50 adds (id i*100, type i, 5 bytes of i), updates of 4000..4900 -> exact reload."""
    mj = modelled(backend, store_factory)
    for i in range(50):
        mj.add(i * 100, i, bytes([i]) * 5)
    mj.restart(store_factory)
    for i in range(40, 50):
        mj.update(i * 100, i, b"x" * 10)
    mj.restart(store_factory)


def test_big_records_and_a_re_added_id_across_restarts(backend: BackendSpec, store_factory) -> None:
    """J-29: records of about half a file each, restarts between, id 4 added twice."""
    size = FILE_JOURNAL_SIZE // 2 - 1024
    mj = modelled(backend, store_factory)
    for batch in ((1, 2), (3, 4), (4, 5, 6, 7, 8, 9, 10)):
        for i in batch:
            mj.add(i, 1, bytes([i]) * size)
        mj.restart(store_factory)


def test_partial_delete_across_files(backend: BackendSpec, store_factory) -> None:
    """J-30: 50 adds spread over files, delete 10..49 -> ids 0..9 after restart."""
    mj = modelled(backend, store_factory)
    for i in range(50):
        mj.add(i, 1, bytes([i]) * 3000)
    for i in range(10, 50):
        mj.delete(i)
    mj.restart(store_factory)
    assert mj.model.live_ids() == list(range(10))


def test_delete_everything_then_one_more(backend: BackendSpec, store_factory) -> None:
    """J-31: 50 adds, delete all, add 1000 -> only 1000 after restart."""
    mj = modelled(backend, store_factory)
    for i in range(50):
        mj.add(i, 1, b"r" * 1000)
    for i in range(50):
        mj.delete(i)
    mj.add(1000, 1, b"last")
    mj.restart(store_factory)


def test_many_adds_updates_deletes(backend: BackendSpec, store_factory) -> None:
    """J-32 (performance variant): 1000 adds, 500 updates, 300 deletes -> load equals model."""
    rng = random.Random(32)
    mj = modelled(backend, store_factory)
    for i in range(1000):
        mj.add(i, i % 256, rng.randbytes(rng.randint(0, 300)))
    for i in rng.sample(range(1000), 500):
        mj.update(i, 7, rng.randbytes(rng.randint(0, 300)))
    for i in rng.sample(range(1000), 300):
        mj.delete(i)
    mj.restart(store_factory)


def test_sliding_window_of_adds_and_deletes(backend: BackendSpec, store_factory) -> None:
    """J-33: 1000 adds; from the 500th on, also delete id i-500 -> 500 live ids."""
    mj = modelled(backend, store_factory)
    for i in range(1000):
        mj.add(i, 1, b"w" * 100)
        if i >= 500:
            mj.delete(i - 500)
    mj.restart(store_factory)
    assert mj.model.live_ids() == list(range(500, 1000))


def test_record_larger_than_the_limit_is_refused_and_journal_carries_on(
    backend: BackendSpec, store_factory
) -> None:
    """J-35: a record bigger than a journal file raises RecordTooLargeError, plain and in a tx;
    nothing is written and the journal keeps working. Back-ends without a reachable limit
    (database blobs, zero persistence) accept a record of twice the file size instead."""
    mj = modelled(backend, store_factory)
    mj.add(1, 1, b"before", sync=True)
    limit = backend.too_large_record_size
    if limit is None:
        mj.add(2, 1, b"B" * (2 * FILE_JOURNAL_SIZE), sync=True)
        mj.add_tx(5, 3, 1, b"T" * (2 * FILE_JOURNAL_SIZE))
        mj.commit(5)
    else:
        with pytest.raises(RecordTooLargeError):
            mj.journal.append_add(2, 1, b"B" * limit, sync=True)
        with pytest.raises(RecordTooLargeError):
            mj.journal.append_add_tx(5, 3, 1, b"T" * limit)
        mj.journal.flush()
        mj.journal.sync_future().result(timeout=5)
    mj.add(4, 1, b"after", sync=True)
    mj.restart(store_factory)


def test_record_nearly_as_big_as_a_file_is_accepted(backend: BackendSpec, store_factory) -> None:
    """J-53: a record that nearly fills a journal file (8 KiB short) is stored, plain or in a
    tx."""
    size = FILE_JOURNAL_SIZE - 8192
    mj = modelled(backend, store_factory)
    mj.add(1, 1, b"a" * size, sync=True)
    mj.add_tx(2, 2, 1, b"b" * size)
    mj.commit(2)
    mj.update(1, 1, b"c" * size)
    mj.restart(store_factory)


@pytest.mark.parametrize(
    "id",
    [
        pytest.param(MIN_ID, id="min-int64"),
        pytest.param(MIN_ID + 1, id="min-int64-plus-1"),
        pytest.param(-1, id="minus-1"),
        pytest.param(0, id="zero"),
        pytest.param(2**31, id="2^31"),
        pytest.param(2**32 + 1, id="2^32+1"),
        pytest.param(MAX_ID, id="max-int64"),
    ],
)
def test_ids_over_the_signed_64_bit_range(backend: BackendSpec, store_factory, id: int) -> None:
    """docs/journal.md: record and transaction ids are any signed 64-bit int, limits included."""
    mj = modelled(backend, store_factory)
    mj.add(id, 1, b"add")
    mj.update(id, 1, b"update")
    mj.add_tx(id, 42, 1, b"tx add")
    mj.update_tx(id, id, 2, b"tx update")
    mj.commit(id)
    mj.restart(store_factory)
    mj.delete(id)
    mj.restart(store_factory)


@pytest.mark.parametrize("urt", [0, 1, 127, 128, 255])
def test_user_record_type_range(backend: BackendSpec, store_factory, urt: int) -> None:
    """docs/journal.md: user_record_type is 0..255, both ends kept through add, update and tx."""
    mj = modelled(backend, store_factory)
    mj.add(1, urt, b"a")
    mj.update(1, urt, b"u")
    mj.add_tx(9, 2, urt, b"t")
    mj.commit(9)
    mj.restart(store_factory)


def test_empty_bodies(backend: BackendSpec, store_factory) -> None:
    """DB-3: empty payloads are records like any other (add, update, tx add, tx update)."""
    mj = modelled(backend, store_factory)
    for i in range(10):
        mj.add(i, 1, b"", sync=True)
    mj.update(3, 1, b"")
    mj.add_tx(1, 20, 1, b"")
    mj.update_tx(1, 4, 1, b"")
    mj.commit(1)
    mj.restart(store_factory)


def test_every_byte_value_survives(backend: BackendSpec, store_factory) -> None:
    """Payloads are opaque bytes: zeros, 0xff runs and every byte value reload unchanged."""
    mj = modelled(backend, store_factory)
    mj.add(1, 1, bytes(range(256)) * 4)
    mj.add(2, 1, b"\x00" * 5000)
    mj.add(3, 1, b"\xff" * 5000)
    mj.update(1, 1, bytes(reversed(range(256))))
    mj.restart(store_factory)


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda j: j.append_update(404, 1, b"x"), id="update-never-added"),
        pytest.param(lambda j: j.append_delete(404), id="delete-never-added"),
        pytest.param(lambda j: j.append_update(2, 1, b"x"), id="update-deleted"),
        pytest.param(lambda j: j.append_delete(2), id="delete-deleted"),
        pytest.param(lambda j: j.append_update(3, 1, b"x"), id="update-only-in-open-tx"),
        pytest.param(lambda j: j.append_delete(3), id="delete-only-in-open-tx"),
        pytest.param(lambda j: j.append_update(4, 1, b"x"), id="update-deleted-by-tx"),
        pytest.param(lambda j: j.append_delete(4), id="delete-deleted-by-tx"),
    ],
)
def test_update_or_delete_of_a_non_live_id_raises_unknown_record(
    backend: BackendSpec, store_factory, call
) -> None:
    """J-46, rule 3: non-tx update/delete of an id that is not live raises UnknownRecordError
    (never added, deleted, only inside an open tx, deleted by a committed tx), and writes
    nothing; the open tx is failed at restart."""
    mj = modelled(backend, store_factory)
    mj.add(1, 1, b"live")
    mj.add(2, 1, b"deleted")
    mj.delete(2)
    mj.add_tx(7, 3, 1, b"open")
    mj.add(4, 1, b"tx-deleted")
    mj.delete_tx(8, 4)
    mj.commit(8)
    with raises_if_persistent(backend, UnknownRecordError):
        call(mj.journal)
    mj.restart(store_factory)


def test_liveness_is_rebuilt_from_the_load(backend: BackendSpec, store_factory) -> None:
    """After a restart, ids loaded live can be updated/deleted and deleted ones cannot."""
    mj = modelled(backend, store_factory)
    mj.add(1, 1, b"a")
    mj.add(2, 1, b"b")
    mj.delete(2)
    mj.add_tx(3, 3, 1, b"c")
    mj.commit(3)
    mj.restart(store_factory)
    mj.update(1, 1, b"a2")
    mj.update(3, 1, b"c2")
    mj.delete(2)  # refused on a persistent back-end: the model knows
    mj.update(2, 1, b"b2")
    mj.delete(3)
    mj.delete(3)
    mj.restart(store_factory)


def test_the_two_journals_are_independent(backend: BackendSpec, store_factory) -> None:
    """docs/journal.md: bindings and messages are two journals; the same ids do not interact."""
    store = store_factory.open()
    messages = ModelledJournal(backend, store.messages, JournalModel())
    bindings = ModelledJournal(backend, store.bindings, JournalModel())
    expect_load(backend, store.messages.load(), messages.model.expected_load())
    expect_load(backend, store.bindings.load(), bindings.model.expected_load())
    for i in range(20):
        messages.add(i, 1, b"m%d" % i)
    for i in range(10, 30):
        bindings.add(i, 2, b"b%d" % i)
    messages.delete(15)
    bindings.update(15, 2, b"b15'")
    bindings.delete(25)
    messages.delete(25)  # live only in bindings: refused by the messages journal
    bindings.add_tx(1, 99, 2, b"btx")
    messages.add_tx(1, 98, 1, b"mtx")
    bindings.commit(1)
    messages.rollback(1)
    store = store_factory.reopen()
    for which, mj in (("messages", messages), ("bindings", bindings)):
        journal = store.messages if which == "messages" else store.bindings
        expect_load(backend, journal.load(), mj.model.restart())
