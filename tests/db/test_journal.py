"""The database journal's rows: what each append writes, that deletes and transaction cleanup
leave nothing behind (reference §4.6, behaviours DB-3..DB-8), that a restart cleans what a
crash left, and the group-commit policy. The journal contract itself is
tests/journal/test_contract_*.py, run on these back-ends too."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from store.errors import UnknownRecordError, UnknownTransactionError
from store.journal.api import RecordInfo
from tests.db.conftest import DbStore

ADD, UPDATE, ADD_TX, UPDATE_TX, DELETE_TX, PREPARE, COMMIT = 11, 12, 13, 14, 15, 17, 18


def kinds(db) -> list[tuple[int, int, int]]:
    """(id, recordtype, txid) of every messages row, in seq order."""
    return [(r[1], r[2], r[3]) for r in db.rows()]


def test_db3_non_transactional_adds_are_one_row_each(db) -> None:
    """DB-3: ten sync adds (empty bodies) are ten rows, committed when the call returns."""
    s = db.open()
    s.messages.load()
    for i in range(10):
        s.messages.append_add(i, 1, b"", sync=True)
        assert db.count() == i + 1  # visible to another connection: committed
    assert kinds(db) == [(i, ADD, 0) for i in range(10)]


def test_db4_transaction_deleting_a_missing_id_leaves_no_row(db) -> None:
    """DB-4: tx 1 deletes id 1 (which does not exist) and commits: zero rows."""
    s = db.open()
    s.messages.load()
    s.messages.append_delete_tx(1, 1)
    s.messages.append_commit(1, sync=True)
    assert db.count() == 0


def test_db5_tx_add_then_tx_delete_leaves_nothing(db) -> None:
    """DB-5 (the paging add/depage pattern): tx 152 adds 154 and commits → the record and the
    commit row; tx 236 deletes 154 and commits → no row at all (record, tx 152's commit and
    tx 236's own rows all gone)."""
    s = db.open()
    s.messages.load()
    s.messages.append_add_tx(152, 154, 13, b"page")
    s.messages.append_commit(152, sync=True)
    assert kinds(db) == [(154, ADD_TX, 152), (-1, COMMIT, 152)]
    s.messages.append_delete_tx(236, 154)
    s.messages.append_commit(236, sync=True)
    assert db.count() == 0
    s.messages.append_add(1, 1, b"after", sync=True)
    assert db.count() == 1


def test_db7_mixed_traffic_loads_everything(db) -> None:
    """DB-7: 100 plain adds (id i, type i, i bytes) and 10 transactions of 100 adds, each
    prepared with an empty XID and committed → 1100 records at load."""
    s = db.open()
    s.messages.load()
    for i in range(100):
        s.messages.append_add(i, i, bytes(i), sync=False)
    for tx in range(1000, 1010):
        for j in range(100):
            s.messages.append_add_tx(tx, tx * 1000 + j, 1, b"x")
        s.messages.append_prepare(tx, b"")
        s.messages.append_commit(tx)
    s = db.open()
    loaded = s.messages.load()
    assert len(loaded.records) == 1100
    assert loaded.records[5] == RecordInfo(5, 5, bytes(5), False)
    assert not loaded.prepared and not loaded.failed


def test_delete_removes_every_row_of_the_id_and_nothing_else(db) -> None:
    """A delete removes the add, its updates and committed tx rows carrying the id; the
    transaction's commit row goes with its last live record."""
    s = db.open()
    j = s.messages
    j.load()
    j.append_add(1, 1, b"a")
    j.append_update(1, 2, b"u")
    j.append_update_tx(7, 1, 3, b"tx-update")
    j.append_commit(7)
    j.append_add(2, 1, b"other", sync=True)
    assert len(db.rows()) == 5
    j.append_delete(1, sync=True)
    assert kinds(db) == [(2, ADD, 0)]


def test_delete_and_add_again_in_one_batch_keeps_the_new_row(db) -> None:
    """Unlike Artemis (inserts first, then DELETE WHERE id=?), a record deleted and added
    again within one batch keeps its new row: deletes are bounded by seq."""
    s = db.open()
    j = s.messages
    j.load()
    j.append_add(5, 1, b"first", sync=True)
    j.append_delete(5)
    j.append_add(5, 1, b"second")
    j.flush()
    assert kinds(db) == [(5, ADD, 0)]
    assert db.open().messages.load().records == [RecordInfo(5, 1, b"second", False)]


def test_non_tx_delete_never_touches_a_prepared_transactions_rows(db) -> None:
    """A prepared transaction updating id 9 keeps that update when 9 is deleted outside it
    (Artemis's DELETE WHERE id=? would lose it)."""
    s = db.open()
    j = s.messages
    j.load()
    j.append_add(9, 1, b"live", sync=True)
    j.append_update_tx(3, 9, 2, b"prepared update")
    j.append_prepare(3, b"xid-3")
    j.append_delete(9, sync=True)
    assert kinds(db) == [(9, UPDATE_TX, 3), (-1, PREPARE, 3)]
    loaded = db.open().messages.load()
    assert loaded.records == []
    assert [(p.tx_id, p.xid, p.records) for p in loaded.prepared] == [
        (3, b"xid-3", [RecordInfo(9, 2, b"prepared update", True)])
    ]


def test_rollback_deletes_the_transaction_rows_and_stores_no_rollback_row(db) -> None:
    """A rollback (of an open or a prepared transaction) deletes its rows at once."""
    s = db.open()
    j = s.messages
    j.load()
    j.append_add_tx(1, 10, 1, b"a")
    j.append_delete_tx(1, 11)
    j.append_prepare(1, b"x")
    j.flush()
    assert len(db.rows()) == 3
    j.append_rollback(1, sync=True)
    assert db.count() == 0


def test_reused_transaction_id_keeps_the_earlier_instance_rows(db) -> None:
    """tx 5 commits a live record; tx id 5 is used again and rolled back: only the second
    instance's rows go."""
    s = db.open()
    j = s.messages
    j.load()
    j.append_add_tx(5, 50, 1, b"first instance")
    j.append_commit(5)
    j.append_add_tx(5, 51, 1, b"second instance")
    j.append_rollback(5, sync=True)
    assert kinds(db) == [(50, ADD_TX, 5), (-1, COMMIT, 5)]
    assert db.open().messages.load().records == [RecordInfo(50, 1, b"first instance", False)]


def test_restart_deletes_rows_of_transactions_that_never_completed(db) -> None:
    """A transaction left open at close is reported failed once, and its rows are deleted by
    the first batch after the load (reference §4.6: Artemis keeps them forever)."""
    s = db.open()
    j = s.messages
    j.load()
    j.append_add(1, 1, b"kept")
    j.append_add_tx(8, 80, 1, b"never committed")
    j.append_update_tx(8, 1, 1, b"never committed")
    j.close()
    assert len(db.rows()) == 3
    s = db.open()
    loaded = s.messages.load()
    assert loaded.failed == [8]
    assert loaded.records == [RecordInfo(1, 1, b"kept", False)]
    s.messages.flush()
    assert kinds(db) == [(1, ADD, 0)]
    with pytest.raises(UnknownTransactionError):
        s.messages.append_commit(8)
    assert db.open().messages.load().failed == []


def test_restart_deletes_rows_artemis_leaves_behind(db) -> None:
    """Rows written by Artemis's leak paths (a commit row whose records were deleted by id, a
    rollback row) are deleted after the next load; live rows stay."""
    s = db.open()
    s.messages.load()
    s.messages.append_add(1, 1, b"live", sync=True)
    s.close()
    t = db.schema.messages
    for seq, rt, tx in ((100, COMMIT, 42), (101, 19, 43)):
        db.execute(
            sa.insert(t).values(
                id=-1, recordtype=rt, txid=tx, userrecordtype=-1, variablesize=0, seq=seq
            )
        )
    s = db.open()
    assert s.messages.load().records == [RecordInfo(1, 1, b"live", False)]
    s.messages.flush()
    assert kinds(db) == [(1, ADD, 0)]
    s.messages.append_add(2, 1, b"next seq is past the stray rows", sync=True)
    assert [r[0] for r in db.rows()][-1] == 102


def test_compact_deletes_rows_no_load_needs(db) -> None:
    """A row of an id that is not live (written behind the journal's back, before the
    journal's last seq) is deleted by compact(); stats count it as dead before and not
    after."""
    s = db.open()
    j = s.messages
    j.load()
    j.append_add(1, 1, b"live", sync=True)
    t = db.schema.messages
    db.execute(
        sa.insert(t).values(
            id=77, recordtype=ADD, txid=0, userrecordtype=1, variablesize=4, record=b"dead", seq=-2
        )
    )
    assert j.stats().extra["rows_dead"] == 1
    j.compact()
    assert kinds(db) == [(1, ADD, 0)]
    assert j.stats().extra["rows_dead"] == 0


def test_unknown_record_and_transaction_rules(db) -> None:
    """Non-tx update/delete of an id that is not live, commit/rollback of a transaction that
    is not open: refused, and nothing is written."""
    s = db.open()
    j = s.messages
    j.load()
    with pytest.raises(UnknownRecordError):
        j.append_update(1, 1, b"x")
    with pytest.raises(UnknownRecordError):
        j.append_delete(1)
    with pytest.raises(UnknownTransactionError):
        j.append_commit(1)
    j.flush()
    assert db.count() == 0


def test_sync_append_waits_for_commit_and_others_within_the_sync_period(db) -> None:
    """A sync append is visible to another connection when it returns; a non-sync one within
    jdbc-journal-sync-period (200 ms here) plus slack, without anyone flushing."""
    db.with_config(jdbc_journal_sync_period=200)
    s = db.open()
    j = s.messages
    j.load()
    j.append_add(1, 1, b"no sync")
    j.append_add(2, 1, b"sync", sync=True)
    assert db.count() == 2  # the sync commit carried the earlier append too
    started = time.monotonic()
    j.append_add(3, 1, b"no sync")
    while db.count() < 3:
        assert time.monotonic() - started < 5, "non-sync append never committed"
        time.sleep(0.02)
    assert time.monotonic() - started >= 0.15  # it waited for the period


def test_sync_non_transactional_false_does_not_wait(db) -> None:
    """journal-sync-non-transactional = false: sync=True plain appends return before the
    commit (sync period 2 s here), prepare/commit still wait."""
    db.config = db.config.replace(journal_sync_non_transactional=False)
    db.with_config(jdbc_journal_sync_period=2000)
    s = db.open()
    j = s.messages
    j.load()
    started = time.monotonic()
    j.append_add(1, 1, b"x", sync=True)
    assert time.monotonic() - started < 1.0
    j.append_add_tx(2, 2, 1, b"tx")
    j.append_commit(2, sync=True)
    assert db.count() == 3


def test_concurrent_sync_appends_share_commits(db) -> None:
    """16 threads appending with sync=True share commits: far fewer batches than appends."""
    s = db.open()
    j = s.messages
    j.load()
    per_thread = 50

    def work(t: int) -> None:
        for i in range(per_thread):
            j.append_add(t * 1000 + i, 1, b"x" * 100, sync=True)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    extra = j.stats().extra
    assert db.count() == 16 * per_thread
    assert extra["batched_operations"] == 16 * per_thread
    assert extra["batches"] < 16 * per_thread / 2


def test_sync_future_is_one_object_per_pending_batch(db) -> None:
    """Callers before the same commit get the same Future; it completes with None."""
    db.with_config(jdbc_journal_sync_period=1000)
    s = db.open()
    j = s.messages
    j.load()
    j.append_add(1, 1, b"x")
    first = j.sync_future()
    second = j.sync_future()
    if first is not second:  # the writer took the batch between the two calls
        assert first.result(timeout=5) is None
        second = first
    assert first is second
    assert first.result(timeout=5) is None
    assert db.count() == 1


def test_bindings_and_messages_are_separate_tables(db) -> None:
    """The two journals write to their own tables."""
    s = db.open()
    s.messages.load()
    s.bindings.append_add(1, 21, b"queue", sync=True)
    s.messages.append_add(1, 45, b"message", sync=True)
    assert kinds(db) == [(1, ADD, 0)]
    assert [(r[1], r[2]) for r in db.rows("bindings")] == [(1, ADD)]


def test_the_compiled_load_loop_and_the_python_loop_agree(db, monkeypatch) -> None:
    """A load replays runs of ADD and UPDATE rows in C (``replay_rows``) where the module is
    built, and every other row in Python: the same mixed history (empty and non-empty bodies,
    an id updated twice, deletes, committed, rolled-back and prepared transactions between
    the runs) loads to the same records, prepared transactions and failed ids both ways, and
    the ids replayed in C are in the row index (a delete of one is accepted and reaches the
    table); the records made in C are not tracked by the cyclic collector (a load makes
    millions, and the first collection after it walked them all)."""
    import gc

    import store.db.journal as journal_module
    from store.speedups import SPEEDUPS

    s = db.open()
    m = s.messages
    m.load()
    for i in range(1, 40):
        m.append_add(i, i % 7, bytes([i]) * (i % 5), sync=False)
    m.append_update(3, 9, b"three-a")
    m.append_update(3, 9, b"three-b")
    m.append_delete(5)
    m.append_add_tx(100, 200, 1, b"committed")
    m.append_update_tx(100, 4, 2, b"")
    m.append_commit(100)
    m.append_add_tx(101, 201, 1, b"rolled back")
    m.append_rollback(101)
    for i in range(40, 60):
        m.append_add(i, 1, b"after", sync=False)
    m.append_add_tx(102, 202, 1, b"prepared")
    m.append_prepare(102, b"xid")
    m.append_update(41, 3, b"")
    m.append_add(60, 1, b"last", sync=True)

    calls: list[int] = []
    compiled = journal_module._replay_rows
    if compiled is not None:

        def counting(*args: object) -> int:
            calls.append(1)
            return compiled(*args)  # type: ignore[misc]

        monkeypatch.setattr(journal_module, "_replay_rows", counting)
    with_c = db.open().messages.load()
    assert (SPEEDUPS is None) == (not calls)
    if calls:  # kept out of the cyclic collector's sight: nothing in them can form a cycle
        assert not gc.is_tracked(with_c.records[0])
    monkeypatch.setattr(journal_module, "_replay_rows", None)
    in_python = db.open().messages.load()
    assert with_c.records == in_python.records
    assert with_c.prepared == in_python.prepared
    assert with_c.failed == in_python.failed
    assert [r.id for r in with_c.records if r.id == 3] == [3, 3, 3]
    assert 5 not in {r.id for r in with_c.records}

    monkeypatch.setattr(journal_module, "_replay_rows", compiled)
    s = db.open()
    s.messages.load()
    s.messages.append_delete(7, sync=True)  # UnknownRecordError if 7 were not indexed
    assert 7 not in {r.id for r in db.open().messages.load().records}


def test_a_delete_finds_its_rows_by_id_alone_in_a_young_postgresql_table(
    tmp_path: Path,
) -> None:
    """The delete of a record bounds ``seq`` by every row before it; PostgreSQL, with no
    statistics for a young table, used that bound as a second index scan (over every row of
    the table, ANDed with the scan of ``id``): 0.65 ms per deleted message at 26,000 rows,
    3,000 messages/s where 19,000 go now. The plan must find the rows by ``id`` only. (A
    question of PostgreSQL's planner; the other databases run the same statement.)"""
    db = DbStore("postgresql", tmp_path)
    try:
        _explain_a_young_delete(db)
    finally:
        db.teardown()


def _explain_a_young_delete(db: DbStore) -> None:
    s = db.open()
    j = s.messages
    j.load()
    for i in range(1, 20_001):
        j.append_add(i, 45, b"x" * 100)
    j.append_delete(5, sync=True)
    sql = s.messages._sql.del_records.sql  # type: ignore[attr-defined]
    raw = db.engine.raw_connection()
    try:
        cursor = raw.cursor()
        cursor.execute("EXPLAIN " + sql, (7, 30_000))
        plan = "\n".join(row[0] for row in cursor.fetchall())
        raw.rollback()
    finally:
        raw.close()
    assert "_idx" in plan and "pkey" not in plan, plan
