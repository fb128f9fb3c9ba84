"""Reclaim counts of the file journal (store/file/index.py): where a committed transactional
delete books its negative, and that reclaim therefore never brings a deleted record back.

The rule (index module docstring): on commit, each delete of the transaction counts as a
negative of the file the delete record was written in, aimed at the file of the deleted
record. That file must outlive the deleted record: booked anywhere else (the commit's file,
or nowhere), the delete's file looks dead once the commit unpins it, reclaim reuses it, and
the next load finds the deleted record with nothing deleting it.
"""

from __future__ import annotations

from store.file.index import ENTRY_SHIFT, ENTRY_SIZE, LiveIndex, reclaimable
from store.file.journal import FileJournal
from store.file.options import FileJournalOptions
from store.file.segments import Segment
from store.journal.replay import OP_DELETE
from tests.support.faultfs import FaultFileSystem

DIRECTORY = "/store/journal"
FILE_SIZE = 4096

X, Y, Z = 1, 2, 3  # X deleted in a transaction; Y stays live beside it; Z fills file D
TX = 9


def _seg(name: str, file_id: int) -> Segment:
    return Segment(name, file_id, FILE_SIZE, None)


def test_commit_books_a_tx_delete_as_a_negative_of_the_delete_records_file() -> None:
    """X and Y in F, X deleted by a transaction in D, committed in C: D holds the negative
    aimed at F, so D cannot be reclaimed while F (Y live) stays."""
    f, d, c = _seg("F", 1), _seg("D", 2), _seg("C", 3)
    index = LiveIndex()
    for seg in (f, d, c):
        index.enter(seg)
    index.add(X, f, 100)
    index.add(Y, f, 100)
    index.tx_record(TX, OP_DELETE, X, d, 60)
    index.commit(TX, c)
    assert d.neg == {f: 1}
    assert c.neg == {d: 1}  # only the unpin of the transaction's file
    assert not index.is_live(X) and index.is_live(Y)
    assert reclaimable([f, d], c) == []


def _journal(fs: FaultFileSystem) -> FileJournal:
    return FileJournal(
        FileJournalOptions(
            directory=DIRECTORY,
            fs=fs,
            file_size=FILE_SIZE,
            buffer_timeout_ns=0,
            compact_min_files=0,
        )
    )


def test_a_committed_tx_delete_stays_deleted_after_reclaim_and_restart() -> None:
    """File F holds X and Y (Y live), X is deleted by append_delete_tx in a later file D, the
    commit lands in a still later file C. After reclaim and a restart X must stay deleted."""
    fs = FaultFileSystem()
    fs.makedirs(DIRECTORY)
    journal = _journal(fs)
    journal.load()
    # 32-byte header, 60 bytes per record: F = 32 + 1060 + 2960 = 4052 bytes, full. A file
    # the writer rolls into starts with a FILES marker (60 + 16 + 24 per data file listed).
    journal.append_add(X, 1, b"x" * 1000)
    journal.append_add(Y, 1, b"y" * 2900)
    journal.append_delete_tx(TX, X)  # does not fit F: opens D (marker listing F: 100 bytes)
    journal.append_add(Z, 1, b"z" * 3800)  # fills D (32 + 100 + 60 + 3860 = 4052)
    journal.append_commit(TX)  # does not fit D: opens C
    journal.append_delete(Z, sync=True)  # Z, in D, is dead: only the rule keeps D
    index = journal.index
    assert journal.writer is not None
    f = index.files_of(Y)[0]
    d = next(seg for seg in journal.data_files if seg is not f)
    c = journal.writer.current
    assert len({f, d, c}) == 3 and journal.data_files == [f, d], journal.data_files

    journal.reclaim()
    journal.close()

    reopened = _journal(fs)
    try:
        ids = [r.id for r in reopened.load().records]
    finally:
        reopened.close()
    assert ids == [Y], f"X came back after reclaim and restart: {ids}"


def _index_state(journal: FileJournal) -> tuple[object, ...]:
    """The live index as comparable values: entries by id (file id and size), the update-only
    ids, and each data file's positive count, live bytes and negatives by file id."""
    index = journal.index
    entries = {
        rid: [(e >> ENTRY_SHIFT, e & ENTRY_SIZE) for e in ([w] if isinstance(w, int) else w)]
        for rid, w in index.records.items()
    }
    assert journal.writer is not None
    files = [*journal.data_files, journal.writer.current]
    counts = {
        f.file_id: (f.pos, f.live_bytes, {t.file_id: n for t, n in f.neg.items()})
        for f in files
        if f.pos or f.neg
    }
    return entries, set(index.updated_only), counts


def test_the_live_index_appends_build_is_the_one_a_load_rebuilds() -> None:
    """Adds (an id added twice too), updates, deletes and a committed transaction over several
    files: the index the appends kept (entries, update-only ids, per-file counts and live
    bytes) is the one a load of the same files rebuilds, record for record."""
    import random

    fs = FaultFileSystem()
    fs.makedirs(DIRECTORY)
    journal = _journal(fs)
    journal.load()
    rng = random.Random(11)
    live: list[int] = []
    for i in range(120):
        journal.append_add(i, 1, rng.randbytes(rng.choice([0, 10, 300])))
        live.append(i)
        if i % 5 == 0:
            journal.append_update(rng.choice(live), 2, rng.randbytes(20))
        if i % 7 == 0 and len(live) > 3:
            journal.append_delete(live.pop(rng.randrange(len(live))))
        if i % 30 == 0:
            journal.append_add(i, 3, b"again")  # a second add of the same id
    journal.append_add_tx(TX, 1000, 1, b"tx")
    journal.append_update_tx(TX, 2000, 1, b"update only")
    journal.append_commit(TX, sync=True)
    assert len(journal.data_files) > 3
    appended = _index_state(journal)
    journal.close()

    reopened = _journal(fs)
    try:
        reopened.load()
        assert _index_state(reopened) == appended
    finally:
        reopened.close()
