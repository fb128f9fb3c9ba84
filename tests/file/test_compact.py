"""store.file.compact outside crashes (those are tests/file/test_crash_compaction.py): what a
compaction leaves on disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from store.file.journal import FileJournal
from store.file.options import FileJournalOptions

SIZE = 16 * 1024


def _files(directory: Path) -> int:
    return sum(1 for p in directory.iterdir() if p.suffix == ".jrn")


def _mostly_dead(journal: FileJournal, *, records: int = 2000) -> None:
    """Records over many files, 30% of each file's records still live."""
    for i in range(records):
        journal.append_add(i, 1, b"x" * 200)
    for i in range(records):
        if i % 10 >= 3:
            journal.append_delete(i)
    journal.flush()


@pytest.mark.parametrize(
    ("min_files", "pool_files"), [(2, -1), (2, 4), (40, -1)], ids=["default", "pool-4", "min-40"]
)
def test_compaction_never_leaves_the_store_bigger_than_it_found_it(
    tmp_path: Path, min_files: int, pool_files: int
) -> None:
    """Issue 7 item 6: with the default journal-pool-files (-1, unbounded) `store data compact`
    grew a 64-file store to 114 files: the output went into new files and every old file was
    kept in the pool. Free files beyond what the journal needs (journal-min-files in all, and
    the one pre-opened file) are now removed, and journal-pool-files still bounds the pool.

    Fails on the old code for the unbounded pool (the store grows by the output's size)."""
    directory = tmp_path / "j"
    opts = FileJournalOptions(
        directory=str(directory),
        file_size=SIZE,
        compact_min_files=0,
        min_files=min_files,
        pool_files=pool_files,
    )
    with FileJournal(opts) as journal:
        journal.load()
        _mostly_dead(journal)
        journal.segments.wait_idle()
        before = _files(directory)
        data_before = journal.stats().extra["data_files"]
        assert data_before > 20
        journal.compact()
        journal.segments.wait_idle()
        after = _files(directory)
        stats = journal.stats()
        live = [r for r in range(2000) if r % 10 < 3]
        assert sorted(journal.index.records) == live
    in_use = stats.extra["data_files"]
    assert in_use < data_before / 2
    assert after <= before, (before, after)
    assert after == max(min_files, in_use + 1), (before, after, in_use)
    assert stats.files == after
