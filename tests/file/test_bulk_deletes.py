"""``FileJournal.append_deletes_tx`` (a page's completion deletes every cursor ack of its
queue in one call) writes what ``append_delete_tx`` per id writes: the same live records,
files and bytes, before and after a reopen, across file rolls, buffer hand-overs and more
records than one hold of the append lock takes; a rollback keeps them all."""

from __future__ import annotations

from pathlib import Path

import pytest

from store.errors import JournalClosedError
from store.file import journal as file_journal
from store.file.journal import FileJournal
from store.file.options import FileJournalOptions
from store.journal.api import Journal

#: More than two holds of the append lock, and several 64 KiB files of delete records.
COUNT = 2 * file_journal._BULK_HOLD + 300


def _journal(directory: Path, timeout_ns: int = 1_000_000) -> FileJournal:
    """Small files and buffer; ``timeout_ns`` 0: no write buffering (each run handed over)."""
    return FileJournal(
        FileJournalOptions(
            directory=str(directory), file_size=64 * 1024, buffer_size=8 * 1024,
            buffer_timeout_ns=timeout_ns, compact_min_files=0,
        )
    )  # fmt: skip


def _acks(journal: FileJournal) -> list[int]:
    """COUNT live records, as cursor acks are: ids 1..COUNT."""
    ids = list(range(1, COUNT + 1))
    for rid in ids:
        journal.append_add(rid, 40, b"ack %d" % rid)
    return ids


def _state(journal: FileJournal) -> tuple[object, ...]:
    s = journal.stats()
    return s.records_live, s.files, s.bytes_live, s.bytes_total, sorted(journal.index.records)


@pytest.mark.parametrize("timeout_ns", [1_000_000, 0], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize("finish", ["commit", "rollback"])
def test_bulk_deletes_equal_one_call_per_id(tmp_path: Path, finish: str, timeout_ns: int) -> None:
    states, loaded = [], []
    for name, bulk in (("bulk", True), ("each", False)):
        with _journal(tmp_path / name, timeout_ns) as journal:
            journal.load()
            ids = _acks(journal)
            doomed = ids[::3]
            journal.append_add_tx(1_000_000, 999_999, 41, b"complete")
            if bulk:
                journal.append_deletes_tx(1_000_000, doomed)
            else:
                Journal.append_deletes_tx(journal, 1_000_000, doomed)  # the per-id loop
            getattr(journal, f"append_{finish}")(1_000_000, sync=True)
            states.append(_state(journal))
        with _journal(tmp_path / name) as journal:
            loaded.append(sorted(r.id for r in journal.load().records))
            states.append(_state(journal))
    assert states[0] == states[2] and states[1] == states[3]
    assert loaded[0] == loaded[1]
    kept = set(range(1, COUNT + 1))
    if finish == "commit":
        kept = kept - set(range(1, COUNT + 1, 3)) | {999_999}
    assert loaded[0] == sorted(kept)
    assert states[0][1] > 3  # the deletes rolled over files  # type: ignore[operator]


def test_bulk_deletes_after_close_are_refused(tmp_path: Path) -> None:
    journal = _journal(tmp_path / "j")
    journal.load()
    ids = _acks(journal)
    journal.close()
    with pytest.raises(JournalClosedError):
        journal.append_deletes_tx(7, ids)


def test_a_bad_id_is_refused_and_the_journal_reopens_whole(tmp_path: Path) -> None:
    """An id past 64 bits is refused as ``append_delete_tx`` refuses it; what was appended
    before it stays a well-formed journal (the transaction rolled back: nothing deleted)."""
    with _journal(tmp_path / "j") as journal:
        journal.load()
        ids = _acks(journal)
        journal.append_add_tx(5, 10**6, 41, b"complete")  # (opens the transaction)
        with pytest.raises(ValueError, match="64-bit"):
            journal.append_deletes_tx(5, [*ids[:10], 2**64])
        journal.append_rollback(5, sync=True)
    with _journal(tmp_path / "j") as journal:
        assert sorted(r.id for r in journal.load().records) == ids
