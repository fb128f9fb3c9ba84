"""Contract: prepared (XA) transactions (reference behaviours J-63..J-71), on every back-end.
Zero persistence accepts every call and loads nothing (no prepared transactions either)."""

from __future__ import annotations

import pytest

from store.errors import UnknownTransactionError
from tests.journal.contract import (
    ModelledJournal,
    expect_load,
    open_loaded,
    raises_if_persistent,
)
from tests.support.backends import FILE_JOURNAL_SIZE, BackendSpec
from tests.support.model import JournalModel

XID = b"p" * 10


def modelled(backend: BackendSpec, store_factory) -> ModelledJournal:
    journal, result = open_loaded(store_factory)
    model = JournalModel()
    expect_load(backend, result, model.expected_load())
    return ModelledJournal(backend, journal, model)


def test_prepared_tx_survives_restart(backend: BackendSpec, store_factory) -> None:
    """J-63: addTx(1, id 1); prepare with a 10-byte XID; restart -> 0 committed, 1 prepared
    with its record; still there after a second restart."""
    mj = modelled(backend, store_factory)
    mj.add_tx(1, 1, 1, b"prepared record")
    mj.prepare(1, XID)
    mj.restart(store_factory)
    mj.restart(store_factory)


def test_prepared_tx_lists_adds_updates_and_deletes(backend: BackendSpec, store_factory) -> None:
    """J-64: tx adds 1..9, updates 1,2,3,4,7,8, deletes 1..5; prepare -> restart: the entry
    lists the adds and updates in order and the 5 ids to delete."""
    mj = modelled(backend, store_factory)
    for i in range(1, 10):
        mj.add_tx(1, i, 1, b"add %d" % i)
    for i in (1, 2, 3, 4, 7, 8):
        mj.update_tx(1, i, 2, b"upd %d" % i)
    for i in range(1, 6):
        mj.delete_tx(1, i)
    mj.prepare(1, XID)
    mj.restart(store_factory)


@pytest.mark.parametrize("restart_between", [False, True], ids=["same-session", "after-restart"])
@pytest.mark.parametrize("outcome", ["commit", "rollback"])
def test_prepare_then_commit_or_rollback(
    backend: BackendSpec, store_factory, outcome: str, restart_between: bool
) -> None:
    """J-65: a prepared tx then committed shows its effect after restart; rolled back, none —
    also when the commit/rollback comes after a restart (docs/journal.md: after the load they can
    be committed or rolled back)."""
    mj = modelled(backend, store_factory)
    mj.add(50, 1, b"committed before")
    mj.add_tx(1, 1, 1, b"a")
    mj.update_tx(1, 50, 1, b"updated in tx")
    mj.delete_tx(1, 50)
    mj.add_tx(1, 2, 1, b"b")
    mj.prepare(1, XID)
    if restart_between:
        mj.restart(store_factory)
    if outcome == "commit":
        mj.commit(1)
    else:
        mj.rollback(1)
    mj.restart(store_factory)
    with raises_if_persistent(backend, UnknownTransactionError):
        mj.journal.append_commit(1)


@pytest.mark.parametrize("outcome", ["stay-prepared", "rollback", "commit"])
def test_prepared_changes_are_invisible_until_commit(
    backend: BackendSpec, store_factory, outcome: str
) -> None:
    """J-66: non-tx add 1..6; tx adds 7..10, updates 1,2,3,7,8,9, deletes 1..5; prepare;
    restart -> 1..6 unchanged, changes only in the prepared entry; after rollback still 1..6;
    after commit 6 plus 7..10 with their updates. Ids 1..5 stay live while prepared."""
    mj = modelled(backend, store_factory)
    for i in range(1, 7):
        mj.add(i, 1, b"base %d" % i)
    for i in range(7, 11):
        mj.add_tx(1, i, 1, b"new %d" % i)
    for i in (1, 2, 3, 7, 8, 9):
        mj.update_tx(1, i, 1, b"tx upd %d" % i)
    for i in range(1, 6):
        mj.delete_tx(1, i)
    mj.prepare(1, XID)
    mj.restart(store_factory)
    mj.update(1, 1, b"updated while prepared")
    if outcome == "rollback":
        mj.rollback(1)
    elif outcome == "commit":
        mj.commit(1)
    mj.restart(store_factory)


def test_several_prepared_txs_with_the_same_xid(backend: BackendSpec, store_factory) -> None:
    """J-67: three txs prepared with identical XID bytes; commit 1, roll back 2, commit 3 ->
    all accepted, each its own transaction."""
    mj = modelled(backend, store_factory)
    for n in range(10):
        mj.add_tx(1, 100 + n, 1, b"tx1")
    for n in range(7):
        mj.add_tx(2, 200 + n, 1, b"tx2")
        mj.update_tx(2, 100 + n, 1, b"tx2 updates tx1's")
    for n in range(8):
        mj.add_tx(3, 300 + n, 1, b"tx3")
        mj.delete_tx(3, 200 + n)
    for tx in (1, 2, 3):
        mj.prepare(tx, XID)
    mj.restart(store_factory)
    mj.commit(1)
    mj.rollback(2)
    mj.commit(3)
    mj.restart(store_factory)


def test_empty_prepared_tx(backend: BackendSpec, store_factory) -> None:
    """J-68: prepare tx 1 with no records -> restart: 1 prepared; commit; prepare tx 2 ->
    restart; roll it back -> restart: nothing."""
    mj = modelled(backend, store_factory)
    mj.prepare(1, XID)
    mj.restart(store_factory)
    mj.commit(1)
    mj.prepare(2, XID)
    mj.add(1, 1, b"plain record beside it")
    mj.restart(store_factory)
    mj.rollback(2)
    mj.delete(1)
    mj.restart(store_factory)


def test_prepared_delete_keeps_the_record_until_commit(backend: BackendSpec, store_factory) -> None:
    """J-69: add 10; tx 1 deletes 10; prepare with 10 bytes of 0x01 -> restart: 10 still
    committed, 1 prepared that deletes 10; commit -> restart: nothing."""
    mj = modelled(backend, store_factory)
    mj.add(10, 1, b"j" * 100)
    mj.delete_tx(1, 10)
    mj.prepare(1, b"\x01" * 10)
    mj.restart(store_factory)
    mj.commit(1)
    mj.restart(store_factory)


def test_prepared_tx_spanning_files_then_commit(backend: BackendSpec, store_factory) -> None:
    """J-70: tx 1 adds 10 records over several files; prepare -> restart: 1 prepared; commit
    -> 10 records; tx 2 deletes all 10, prepare with another XID -> restart; commit -> empty."""
    big = FILE_JOURNAL_SIZE // 3
    mj = modelled(backend, store_factory)
    for i in range(10):
        mj.add_tx(1, i, 1, bytes([i]) * big)
    mj.prepare(1, b"\x01" * 10)
    mj.restart(store_factory)
    mj.commit(1)
    mj.restart(store_factory)
    for i in range(10):
        mj.delete_tx(2, i)
    mj.prepare(2, b"\x02" * 15)
    mj.restart(store_factory)
    mj.commit(2)
    mj.restart(store_factory)


def test_prepare_and_commit_alone_in_a_later_file(backend: BackendSpec, store_factory) -> None:
    """J-71: 10 tx adds; enough plain traffic to move to a new file; prepare + commit; tx 2
    deletes all 10 + commit; add 100 -> only 100 (and the filler) after restart."""
    mj = modelled(backend, store_factory)
    for i in range(10):
        mj.add_tx(1, i, 1, b"r")
    for i in range(3):
        mj.add(1000 + i, 1, b"f" * (FILE_JOURNAL_SIZE // 2))
    mj.prepare(1, XID)
    mj.commit(1)
    for i in range(10):
        mj.delete_tx(2, i)
    mj.commit(2)
    for i in range(3):
        mj.delete(1000 + i)
    mj.add(100, 1, b"last")
    mj.restart(store_factory)


@pytest.mark.parametrize(
    "xid",
    [
        pytest.param(b"", id="empty"),
        pytest.param(bytes(range(64)), id="64-binary-bytes"),
        pytest.param(b"\x00" * 140, id="140-zero-bytes"),
    ],
)
def test_xid_bytes_are_kept_exactly(backend: BackendSpec, store_factory, xid: bytes) -> None:
    """J-63: the prepare's XID bytes come back unchanged (XA allows up to 140 bytes)."""
    mj = modelled(backend, store_factory)
    mj.add_tx(3, 1, 1, b"x")
    mj.prepare(3, xid)
    mj.restart(store_factory)


def test_recovered_prepared_tx_commit_makes_its_ids_live(
    backend: BackendSpec, store_factory
) -> None:
    """After a restart, committing a recovered prepared tx makes its adds live for non-tx
    updates and deletes, and its deletes take effect."""
    mj = modelled(backend, store_factory)
    mj.add(1, 1, b"old")
    mj.add_tx(5, 2, 1, b"new")
    mj.delete_tx(5, 1)
    mj.prepare(5, XID)
    mj.restart(store_factory)
    mj.commit(5)
    mj.update(2, 1, b"new'")
    mj.delete(1)  # gone with the commit: refused on a persistent back-end
    mj.restart(store_factory)


def test_prepared_and_failed_txs_side_by_side(backend: BackendSpec, store_factory) -> None:
    """A reopen keeps the prepared tx and fails the unprepared one, whatever their order."""
    mj = modelled(backend, store_factory)
    mj.add_tx(1, 1, 1, b"will fail")
    mj.add_tx(2, 2, 1, b"prepared")
    mj.add_tx(3, 3, 1, b"will fail too")
    mj.prepare(2, XID)
    mj.restart(store_factory)
    with raises_if_persistent(backend, UnknownTransactionError):
        mj.journal.append_commit(3)
    mj.commit(2)
    mj.restart(store_factory)
