"""Contract: transactions — commit, rollback, isolation, failure at restart (reference behaviours
J-37..J-54, DB-4, DB-5, DB-7), on every back-end. Zero persistence accepts every call and loads
nothing."""

from __future__ import annotations

import random

import pytest

from store.errors import UnknownTransactionError
from tests.journal.contract import (
    ModelledJournal,
    expect_load,
    open_loaded,
    raises_if_persistent,
    restart,
)
from tests.support.backends import FILE_JOURNAL_SIZE, BackendSpec
from tests.support.model import JournalModel


def modelled(backend: BackendSpec, store_factory) -> ModelledJournal:
    journal, result = open_loaded(store_factory)
    model = JournalModel()
    expect_load(backend, result, model.expected_load())
    return ModelledJournal(backend, journal, model)


def test_simple_committed_tx_survives_restart(backend: BackendSpec, store_factory) -> None:
    """J-37: addTx(1, id 1), commit, restart -> 1 record."""
    mj = modelled(backend, store_factory)
    mj.add_tx(1, 1, 1, b"tx record")
    mj.commit(1)
    mj.restart(store_factory)


def test_tx_entries_load_at_the_commit_position(backend: BackendSpec, store_factory) -> None:
    """Rule 6: a tx's entries appear where it commits, in the order written inside it."""
    mj = modelled(backend, store_factory)
    mj.add_tx(5, 10, 1, b"tx first written")
    mj.add(1, 1, b"plain before commit")
    mj.update_tx(5, 1, 1, b"tx update of 1")
    mj.add(2, 1, b"plain also before commit")
    mj.commit(5)
    mj.add(3, 1, b"after commit")
    mj.restart(store_factory)


def test_partial_delete_inside_a_tx(backend: BackendSpec, store_factory) -> None:
    """J-39: a delete inside a tx removes the tx's own earlier entries:
    add 1,2,3; update 1,2; delete 1; commit -> [add 2, add 3, update 2]."""
    mj = modelled(backend, store_factory)
    for i in (1, 2, 3):
        mj.add_tx(1, i, 1, b"add %d" % i)
    mj.update_tx(1, 1, 1, b"upd 1")
    mj.update_tx(1, 2, 1, b"upd 2")
    mj.delete_tx(1, 1)
    mj.commit(1)
    mj.restart(store_factory)


@pytest.mark.parametrize("interleaved", [False, True], ids=["sequential", "interleaved"])
def test_several_txs_that_delete_what_they_add(
    backend: BackendSpec, store_factory, interleaved: bool
) -> None:
    """J-42: three txs each add 6 ids, update 3 and delete all 6 -> empty load."""
    mj = modelled(backend, store_factory)
    steps = []
    for tx in (1, 2, 3):
        ids = range(tx * 10, tx * 10 + 6)
        ops = [("add", tx, i) for i in ids] + [("update", tx, i) for i in list(ids)[:3]]
        ops += [("delete", tx, i) for i in ids] + [("commit", tx, 0)]
        steps.append(ops)
    order = (
        [op for group in zip(*steps, strict=True) for op in group]
        if interleaved
        else [op for ops in steps for op in ops]
    )
    for kind, tx, i in order:
        if kind == "add":
            mj.add_tx(tx, i, 1, b"a")
        elif kind == "update":
            mj.update_tx(tx, i, 1, b"u")
        elif kind == "delete":
            mj.delete_tx(tx, i)
        else:
            mj.commit(tx)
    mj.restart(store_factory)
    assert mj.model.expected_load().records == []


@pytest.mark.parametrize("seed", [44, 45])
def test_mixed_tx_and_non_tx_traffic(backend: BackendSpec, store_factory, seed: int) -> None:
    """J-44: non-tx adds/updates/deletes of 13 ids interleaved with a tx that adds 5 ids,
    updates 2 and deletes 2; deletes in shuffled order -> correct survivors."""
    rng = random.Random(seed)
    ids = [1, 3, 5, 7, 10, 13, 56, 100, 102, 200, 201, 202, 203]
    mj = modelled(backend, store_factory)
    tx_ids = [1000, 1001, 1002, 1003, 1004]
    for n, i in enumerate(ids):
        mj.add(i, 1, b"plain %d" % i)
        if n < len(tx_ids):
            mj.add_tx(77, tx_ids[n], 2, b"tx %d" % tx_ids[n])
    for i in rng.sample(ids, 6):
        mj.update(i, 1, b"plain update")
    mj.update_tx(77, ids[0], 2, b"tx update")
    mj.update_tx(77, tx_ids[1], 2, b"tx update of own")
    mj.delete_tx(77, ids[1])
    mj.delete_tx(77, tx_ids[2])
    for i in rng.sample(ids[2:], 5):
        mj.delete(i)
    mj.commit(77)
    mj.restart(store_factory)


def test_rollback_leaves_earlier_data_unchanged(backend: BackendSpec, store_factory) -> None:
    """J-45: non-tx add 1,2,3; tx1 deletes them, tx2 adds 4,5,6; roll back both -> 1,2,3."""
    mj = modelled(backend, store_factory)
    for i in (1, 2, 3):
        mj.add(i, 1, b"keep")
    for i in (1, 2, 3):
        mj.delete_tx(1, i)
    for i in (4, 5, 6):
        mj.add_tx(2, i, 1, b"discard")
    mj.rollback(1)
    mj.rollback(2, sync=False)
    mj.restart(store_factory)
    assert mj.model.live_ids() == [1, 2, 3]


def test_txs_spread_over_small_files(backend: BackendSpec, store_factory) -> None:
    """J-47: records of a third of a file each; tx1 adds 1..6 and updates 1,3,5; tx2 deletes
    1..6; tx3 adds 11; tx4 adds 31 and never commits -> only 11, tx4 failed."""
    big = FILE_JOURNAL_SIZE // 3
    mj = modelled(backend, store_factory)
    for i in range(1, 7):
        mj.add_tx(1, i, 1, bytes([i]) * big)
    for i in (1, 3, 5):
        mj.update_tx(1, i, 1, bytes([i + 100]) * big)
    mj.commit(1)
    for i in range(1, 7):
        mj.delete_tx(2, i)
    mj.commit(2)
    mj.add_tx(3, 11, 1, b"x" * big)
    mj.add_tx(4, 31, 1, b"y" * big)
    mj.commit(3)
    mj.restart(store_factory)


def test_mixed_workload_with_repeated_restarts_down_to_empty(
    backend: BackendSpec, store_factory
) -> None:
    """J-49: 100 add+update pairs, 100 committed txs each followed by a non-tx update; restart;
    delete 0..99, a tx updating 100..199, a tx updating then deleting them -> empty, twice."""
    mj = modelled(backend, store_factory)
    for i in range(100):
        mj.add(i, 1, b"r" * 500)
        mj.update(i, 1, b"u" * 500)
    for i in range(100, 200):
        mj.add_tx(i, i, 1, b"t" * 500)
        mj.commit(i, sync=False)
        mj.update(i, 1, b"v" * 500)
    mj.restart(store_factory)
    for i in range(100):
        mj.delete(i)
    for i in range(100, 200):
        mj.update_tx(1000, i, 1, b"w")
    mj.commit(1000)
    for i in range(100, 200):
        mj.update_tx(1001, i, 1, b"x")
        mj.delete_tx(1001, i)
    mj.commit(1001)
    mj.restart(store_factory)
    assert mj.model.expected_load().records == []
    mj.restart(store_factory)


def test_uncommitted_tx_is_forgotten_and_a_late_commit_fails(
    backend: BackendSpec, store_factory
) -> None:
    """J-50: addTx(1, id 1) with no commit; restart -> nothing, tx 1 failed; commit(1) now
    raises UnknownTransactionError; restart -> still empty."""
    mj = modelled(backend, store_factory)
    mj.add_tx(1, 1, 1, b"never committed")
    mj.restart(store_factory)
    with raises_if_persistent(backend, UnknownTransactionError):
        mj.journal.append_commit(1)
    mj.restart(store_factory)


def test_interrupted_txs_are_reported_failed_in_order(backend: BackendSpec, store_factory) -> None:
    """J-51: tx 77 adds 10 records over many files, tx 78 adds 1, no commits; restart ->
    0 records, failed [77, 78] in that order; commit(77) raises; next restart: still empty
    and nothing reported again."""
    mj = modelled(backend, store_factory)
    for i in range(10):
        mj.add_tx(77, i, 1, b"z" * (FILE_JOURNAL_SIZE // 4))
    mj.add_tx(78, 100, 1, b"one")
    journal, result = open_loaded(store_factory)
    expect_load(backend, result, mj.model.restart(), failed_order=True)
    mj.journal = journal
    with raises_if_persistent(backend, UnknownTransactionError):
        journal.append_commit(77)
    with raises_if_persistent(backend, UnknownTransactionError):
        journal.append_rollback(78)
    mj.restart(store_factory)


def test_committed_tx_spread_over_many_files(backend: BackendSpec, store_factory) -> None:
    """J-52/J-54: a tx whose records fill several files commits whole; a later tx deletes part
    of it across files -> the rest survives, then a plain add after it."""
    big = FILE_JOURNAL_SIZE // 3
    mj = modelled(backend, store_factory)
    for i in range(10):
        mj.add_tx(1, i, 1, bytes([i]) * big)
    mj.commit(1)
    mj.restart(store_factory)
    for i in range(5):
        mj.delete_tx(2, i)
    mj.commit(2)
    mj.add(100, 1, b"a")
    mj.add(101, 1, b"b")
    mj.restart(store_factory)
    assert mj.model.live_ids() == [5, 6, 7, 8, 9, 100, 101]


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda j: j.append_commit(404), id="commit-never-opened"),
        pytest.param(lambda j: j.append_rollback(404), id="rollback-never-opened"),
        pytest.param(lambda j: j.append_commit(1), id="commit-after-commit"),
        pytest.param(lambda j: j.append_rollback(1), id="rollback-after-commit"),
        pytest.param(lambda j: j.append_commit(2), id="commit-after-rollback"),
        pytest.param(lambda j: j.append_rollback(2), id="rollback-after-rollback"),
    ],
)
def test_commit_or_rollback_of_a_tx_that_is_not_open_raises(
    backend: BackendSpec, store_factory, call
) -> None:
    """Rule 4: commit/rollback of a transaction that is not open raise UnknownTransactionError
    and change nothing."""
    mj = modelled(backend, store_factory)
    mj.add_tx(1, 1, 1, b"committed")
    mj.commit(1)
    mj.add_tx(2, 2, 1, b"rolled back")
    mj.rollback(2)
    with raises_if_persistent(backend, UnknownTransactionError):
        call(mj.journal)
    mj.restart(store_factory)


def test_tx_with_only_a_delete_of_a_missing_id(backend: BackendSpec, store_factory) -> None:
    """DB-4: tx 1 deletes id 1 (which does not exist), commit -> nothing, no error."""
    mj = modelled(backend, store_factory)
    mj.delete_tx(1, 1)
    mj.commit(1)
    mj.restart(store_factory)


def test_tx_add_then_tx_delete_leaves_nothing(backend: BackendSpec, store_factory) -> None:
    """DB-5: tx 152 adds 154, commit; tx 236 deletes 154, commit -> empty (paging pattern)."""
    mj = modelled(backend, store_factory)
    mj.add_tx(152, 154, 13, b"page")
    mj.commit(152)
    mj.restart(store_factory)
    mj.delete_tx(236, 154)
    mj.commit(236)
    mj.restart(store_factory)


def test_tx_update_of_a_never_added_id_loads_as_an_update(
    backend: BackendSpec, store_factory
) -> None:
    """J-61 model: a transactional update of an id never added is accepted and returned after
    the commit as an update entry."""
    mj = modelled(backend, store_factory)
    mj.add_tx(1, 1, 1, b"add 1")
    mj.update_tx(1, 2, 1, b"up 2")
    mj.commit(1)
    mj.restart(store_factory)


def test_load_after_mixed_traffic_with_prepared_then_committed_txs(
    backend: BackendSpec, store_factory
) -> None:
    """DB-7: 100 non-tx adds (id i, type i, i bytes); 10 txs of 100 adds each prepared with an
    empty XID then committed -> 1100 committed records in order."""
    mj = modelled(backend, store_factory)
    for i in range(100):
        mj.add(i, i, bytes(i))
    for tx in range(1000, 1010):
        for n in range(100):
            rid = tx * 1000 + n
            mj.add_tx(tx, rid, 5, b"%d" % rid)
        mj.prepare(tx, b"")
        mj.commit(tx)
    mj.restart(store_factory)
    assert len(mj.model.expected_load().records) == 1100


def test_non_sync_commits_and_rollbacks_behave_like_sync_ones(
    backend: BackendSpec, store_factory
) -> None:
    """Rule 2: sync changes only whether the caller waits, never what is written."""
    mj = modelled(backend, store_factory)
    for tx in range(1, 21):
        mj.add_tx(tx, tx, 1, b"t%d" % tx)
        if tx % 2:
            mj.commit(tx, sync=False)
        else:
            mj.rollback(tx, sync=False)
    mj.journal.flush()
    restart(store_factory, mj.model)


@pytest.mark.parametrize("seed", [7, 8, 9])
def test_random_mixed_transactional_workload(
    backend: BackendSpec, store_factory, seed: int
) -> None:
    """J-44/J-49 at random: many interleaved txs (commit, rollback, left open) and non-tx
    traffic over a small id space, with restarts -> every load equals the model."""
    rng = random.Random(seed)
    mj = modelled(backend, store_factory)
    next_tx = 1
    open_txs: list[int] = []
    for step in range(600):
        r = rng.random()
        rid = rng.randrange(40)
        data = rng.randbytes(rng.randrange(2000))
        if r < 0.2:
            mj.add(rid, 1, data)
        elif r < 0.3:
            if mj.model.is_live(rid):
                mj.update(rid, 1, data)
            else:
                mj.add(rid, 1, data)
        elif r < 0.4:
            if mj.model.is_live(rid):
                mj.delete(rid)
        elif r < 0.5 or not open_txs:
            open_txs.append(next_tx)
            mj.add_tx(next_tx, rid, 2, data)
            next_tx += 1
        elif r < 0.75:
            tx = rng.choice(open_txs)
            kind = rng.randrange(3)
            if kind == 0:
                mj.add_tx(tx, rid, 2, data)
            elif kind == 1:
                mj.update_tx(tx, rid, 2, data)
            else:
                mj.delete_tx(tx, rid)
        elif r < 0.92:
            tx = open_txs.pop(rng.randrange(len(open_txs)))
            mj.commit(tx, sync=rng.random() < 0.3)
        else:
            tx = open_txs.pop(rng.randrange(len(open_txs)))
            mj.rollback(tx, sync=rng.random() < 0.3)
        if step % 150 == 149:
            mj.restart(store_factory)
            open_txs.clear()  # the reopen failed every open tx
    mj.restart(store_factory)


@pytest.mark.parametrize("where", ["same-file", "earlier-files"])
def test_a_failed_tx_id_used_again_commits_in_full(
    backend: BackendSpec, store_factory, where: str
) -> None:
    """Issue 6.2, docs/journal.md: tx 77 is reported failed; the caller uses 77 again (add_tx,
    commit), so the commit is acknowledged: after a restart its record is there. The file store
    lost it when the failed records and the new ones shared a file (the commit's per-file
    record count went on counting the failed transaction's records)."""
    mj = modelled(backend, store_factory)
    size = FILE_JOURNAL_SIZE // 3 if where == "earlier-files" else 10
    for i in range(4):
        mj.add_tx(77, i, 1, bytes([i]) * size)
    mj.restart(store_factory)
    mj.add_tx(77, 100, 1, b"second life")
    mj.update_tx(77, 100, 2, b"updated")
    mj.commit(77)
    mj.restart(store_factory)
    assert mj.model.live_ids() == [100]


def test_a_failed_tx_id_used_again_can_be_prepared_then_committed(
    backend: BackendSpec, store_factory
) -> None:
    """Issue 6.2: a failed id reused for an XA transaction is prepared (only: never also
    failed) across a restart, then commits in full."""
    mj = modelled(backend, store_factory)
    mj.add_tx(77, 1, 1, b"never committed")
    mj.restart(store_factory)
    mj.add_tx(77, 2, 1, b"in doubt")
    mj.prepare(77, b"xid-77")
    mj.restart(store_factory)
    mj.commit(77)
    mj.restart(store_factory)
    assert mj.model.live_ids() == [2]


def test_a_completed_tx_id_used_again_in_the_same_file(backend: BackendSpec, store_factory) -> None:
    """A committed or rolled-back id used again is a new transaction that counts in full."""
    mj = modelled(backend, store_factory)
    mj.add_tx(5, 1, 1, b"first")
    mj.commit(5)
    mj.add_tx(5, 2, 1, b"second")
    mj.add_tx(5, 3, 1, b"second too")
    mj.commit(5)
    mj.add_tx(6, 4, 1, b"rolled back")
    mj.rollback(6)
    mj.add_tx(6, 5, 1, b"kept")
    mj.commit(6)
    mj.restart(store_factory)
    assert mj.model.live_ids() == [1, 2, 3, 5]


@pytest.mark.parametrize("restart_first", [False, True], ids=["running", "after-restart"])
def test_an_id_only_updated_in_a_committed_tx_is_not_live(
    backend: BackendSpec, store_factory, restart_first: bool
) -> None:
    """Issue 6.6 / docs/journal.md: update_tx(1, 3) of an id 3 never added, commit; a later
    non-transactional update or delete of 3 raises UnknownRecordError (Artemis refuses it);
    the load result itself is unchanged (the update entry)."""
    mj = modelled(backend, store_factory)
    mj.update_tx(1, 3, 1, b"update of nothing")
    mj.commit(1)
    mj.add(4, 1, b"live")
    if restart_first:
        mj.restart(store_factory)
    mj.update(3, 1, b"again")
    mj.delete(3)
    mj.update(4, 1, b"fine")
    mj.restart(store_factory)
    assert not mj.model.is_live(3) and mj.model.has_entries(3)
