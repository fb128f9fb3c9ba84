"""store.file.history: ``store data recover`` rebuilds a journal from retention history."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from store.errors import ConfigError
from store.file.history import recover_from_history
from store.file.journal import FileJournal
from store.file.options import FileJournalOptions, RetentionOptions
from store.journal.api import RecordInfo, RecordType
from tests.file.handbuilt import SIZE, A, B, Builder, ids, load


def _retained(tmp_path: Path) -> tuple[FileJournalOptions, Path]:
    history = tmp_path / "history"
    opts = FileJournalOptions(
        directory=str(tmp_path / "j"),
        file_size=SIZE,
        compact_min_files=0,
        retention=RetentionOptions(directory=str(history)),
    )
    return opts, history


def test_recover_writes_the_live_state_from_history_and_journal(tmp_path: Path) -> None:
    opts, history = _retained(tmp_path)
    j = FileJournal(opts)
    with j:
        j.load()
        for i in range(100):
            j.append_add(i, 45, f"message-{i}".encode())
        j.append_update(7, 46, b"seven-v2")
        for i in range(0, 60):
            j.append_delete(i)  # whole files become dead and are reclaimed
        j.append_add_tx(500, 1000, 45, b"prepared")
        j.append_delete_tx(500, 70)
        j.append_prepare(500, b"xid-500")
        j.append_add_tx(600, 2000, 45, b"never completed")
        j.append_event(9000, 49, b"an event")
        j.append_add(100, 45, b"message-100")
        j.flush()
        j.reclaim()
    report = recover_from_history(str(history), str(tmp_path / "t"), journal=opts.directory)
    expected = load(Path(opts.directory))
    assert expected.failed == [600]
    assert (report.records, report.prepared, report.deleted, report.events) == (
        len(expected.records),
        1,
        0,
        0,
    )
    assert report.failed == [600] and report.generations == 1
    assert {s.origin for s in report.sources} == {"history", "journal"}
    recovered = load(tmp_path / "t")
    assert recovered.records == expected.records
    assert recovered.prepared == expected.prepared
    assert recovered.failed == []


def test_recover_undelete_and_events_bring_back_what_was_deleted(tmp_path: Path) -> None:
    opts, history = _retained(tmp_path)
    with FileJournal(opts) as j:
        j.load()
        for i in range(60):
            j.append_add(i, 45, f"message-{i}".encode())
        j.append_update(3, 46, b"three-v2")
        for i in range(0, 60, 2):
            j.append_delete(i)
        j.append_event(9000, 49, b"an event")
    report = recover_from_history(
        str(history), str(tmp_path / "t"), journal=opts.directory, undelete=True, events=True
    )
    assert (report.records, report.deleted, report.events) == (31, 30, 1)
    got = load(tmp_path / "t").records
    live = [RecordInfo(i, 45, f"message-{i}".encode(), False) for i in range(1, 60, 2)]
    live.append(RecordInfo(3, 46, b"three-v2", True))
    deleted = [RecordInfo(i, 45, f"message-{i}".encode(), False) for i in range(0, 60, 2)]
    assert got == live + deleted + [RecordInfo(9000, 49, b"an event", False)]


def test_recover_restarts_the_replay_at_a_compaction_output(tmp_path: Path) -> None:
    """History: the original files (adds 1..4, delete 2). Journal: the compactor's output
    restating 1, 3, 4 (compact_count 1), then the current file deleting 3. Replaying the output
    after the originals must not count 1, 3, 4 twice; undelete finds 2 and 3."""
    hist = Builder().file(A).rec(id=1).rec(id=2).rec(id=3).rec(id=4)
    hist.rec(RecordType.DELETE, id=2, body=b"")
    history = tmp_path / "history"
    history.mkdir()
    for fid, _h, data, _o in hist.files:
        (history / f"data-20240101000000-{fid:020d}.jrn").write_bytes(bytes(data))
    out = Builder()
    out.lsn = hist.lsn
    out.file(A + 1).rec(id=1, cc=1).rec(id=3, cc=1)
    out.file(A + 2).rec(id=4, cc=1)
    out.file(B).rec(RecordType.DELETE, id=3, body=b"")
    out.write(tmp_path / "j")
    report = recover_from_history(
        str(history), str(tmp_path / "t"), journal=str(tmp_path / "j"), undelete=True
    )
    assert report.generations == 2
    assert [s.file_id for s in report.sources] == [A, A + 1, A + 2, B]
    got = load(tmp_path / "t").records
    assert [r.id for r in got] == [1, 4, 2, 3]  # live 1, 4; then deleted 2 (gen 1), 3 (gen 2)


def test_recover_refuses_a_target_that_is_not_empty(tmp_path: Path) -> None:
    Builder().file(A).adds(1).write(tmp_path / "j")
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "something").write_text("x")
    with pytest.raises(ConfigError, match="not empty"):
        recover_from_history(None, str(tmp_path / "t"), journal=str(tmp_path / "j"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="no journal files"):
        recover_from_history(str(tmp_path / "empty"), str(tmp_path / "t2"))
    assert not (tmp_path / "t2").exists()


def test_recover_refuses_a_history_folder_that_does_not_exist(tmp_path: Path) -> None:
    """Fails on the code that read a missing history folder as empty and recovered from the
    journal alone, silently."""
    Builder().file(A).adds(1).write(tmp_path / "j")
    missing = re.escape(f"no retention history in {tmp_path / 'nothing'}")
    with pytest.raises(ConfigError, match=missing):
        recover_from_history(
            str(tmp_path / "nothing"), str(tmp_path / "t"), journal=str(tmp_path / "j")
        )
    assert not (tmp_path / "t").exists() and not (tmp_path / "nothing").exists()


def test_recover_reads_around_damage_and_reports_it(
    corrupt_middle: tuple[Path, Builder], tmp_path: Path
) -> None:
    directory, _b = corrupt_middle
    report = recover_from_history(None, str(tmp_path / "t"), journal=str(directory))
    damaged = [s for s in report.sources if s.damage is not None]
    assert [s.file_id for s in damaged] == [A]
    assert ids(load(tmp_path / "t")) == [1, 2, 6, 7, 8, 9, 10]


def test_the_history_folder_exists_as_soon_as_a_journal_with_retention_opens(
    tmp_path: Path,
) -> None:
    # Not only once the first finished file has been copied in the background: a recovery
    # pointed at it before any file finished reads it (empty) and the journal.
    opts, history = _retained(tmp_path)
    with FileJournal(opts) as j:
        assert history.is_dir()
        j.load()
        j.append_add(1, 45, b"one", sync=True)
    report = recover_from_history(str(history), str(tmp_path / "t"), journal=opts.directory)
    assert report.records == 1
