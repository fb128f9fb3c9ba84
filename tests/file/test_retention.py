"""Journal retention (store.file.retention), after Artemis's JournalHistoryBackupTest (reference
behaviours J-129..J-134): history names, file ids from names, age- and size-based pruning that
keeps the newest copies, a journal copying every finished file before it can be reclaimed, and
events kept in history but never returned by a load."""

from __future__ import annotations

import calendar
import os
import threading
import time
from pathlib import Path

import pytest

from store.file import format as fmt
from store.file import survey
from store.file.journal import FileJournal
from store.file.options import FileJournalOptions, RetentionOptions
from store.file.retention import history_files, history_name, parse_history_name, prune
from store.file.segments import SegmentNaming
from store.fs import OsFileHandle, OsFileSystem
from store.journal.api import RecordType

SIZE = 4096


def _copies(history: Path) -> dict[int, list[str]]:
    """file id -> names of its copies in ``history``."""
    naming = SegmentNaming(str(history), "data")
    found: dict[int, list[str]] = {}
    for name in os.listdir(history):
        parsed = parse_history_name(naming, name)
        if parsed is not None:
            found.setdefault(parsed[1], []).append(name)
    return found


# -- J-129, J-131: names ---------------------------------------------------------------------


def test_history_name_format_and_its_date_parse_back() -> None:
    naming = SegmentNaming("/somewhere", "cleberts", ext="birthday")
    when = calendar.timegm((1972, 1, 19, 4, 5, 7, 0, 0, 0))
    name = history_name(naming, 1, when)
    assert name == "cleberts-19720119040507-00000000000000000001.birthday"
    assert parse_history_name(naming, name) == (float(when), 1)


def test_file_id_from_a_history_name() -> None:
    naming = SegmentNaming("/h", "data")
    assert parse_history_name(naming, "data-20240102030405-00000000000000000003.jrn") == (
        float(calendar.timegm((2024, 1, 2, 3, 4, 5, 0, 0, 0))),
        3,
    )
    # Artemis writes the id without padding; such names are read too.
    assert parse_history_name(naming, "data-20240102030405-3.jrn") is not None
    assert parse_history_name(naming, "data-20240102030405-3.jrn")[1] == 3  # type: ignore[index]


@pytest.mark.parametrize(
    "name",
    [
        "data-00000000000000000003.jrn",  # a journal file, not a copy
        "data-2024010203040-3.jrn",  # 13-digit stamp
        "other-20240102030405-3.jrn",  # another prefix
        "data-20240102030405-3.jrn.tmp",  # a copy in progress
        "data-20240102030405-x.jrn",
    ],
)
def test_names_that_are_not_history_copies(name: str) -> None:
    assert parse_history_name(SegmentNaming("/h", "data"), name) is None


def test_history_files_are_listed_by_file_id(tmp_path: Path) -> None:
    naming = SegmentNaming(str(tmp_path), "data")
    for fid, when in ((30, 100.0), (10, 300.0), (20, 200.0)):
        (tmp_path / history_name(naming, fid, when)).write_bytes(b"x")
    (tmp_path / "unrelated.txt").write_bytes(b"x")
    assert [fid for fid, _p in history_files(OsFileSystem(), naming, str(tmp_path))] == [10, 20, 30]


# -- J-133, J-134: pruning -------------------------------------------------------------------


def _stamp(directory: Path, ids: range, when: float) -> None:
    naming = SegmentNaming(str(directory), "data")
    for fid in ids:
        (directory / history_name(naming, fid, when)).write_bytes(b"1")  # 1 byte on disk


def _prune(directory: Path, **kw: float | int | None) -> int:
    opts = RetentionOptions(directory=str(directory), **kw)  # type: ignore[arg-type]
    return prune(OsFileSystem(), SegmentNaming(str(directory), "data"), opts, SIZE)


def test_age_based_pruning_removes_copies_older_than_the_period(tmp_path: Path) -> None:
    now = time.time()
    _stamp(tmp_path, range(100), now - 25 * 3600)
    _stamp(tmp_path, range(100, 200), now)
    assert _prune(tmp_path, period_seconds=24 * 3600) == 100
    assert sorted(_copies(tmp_path)) == list(range(100, 200))


def test_age_based_pruning_keeps_copies_within_the_period(tmp_path: Path) -> None:
    now = time.time()
    _stamp(tmp_path, range(100), now - 3600)
    _stamp(tmp_path, range(100, 200), now)
    assert _prune(tmp_path, period_seconds=24 * 3600) == 0
    assert len(os.listdir(tmp_path)) == 200


def test_size_based_pruning_counts_files_times_file_size_and_keeps_the_newest(
    tmp_path: Path,
) -> None:
    now = time.time()
    _stamp(tmp_path, range(100), now - 3600)
    _stamp(tmp_path, range(100), now)
    assert _prune(tmp_path, storage_limit=10 * SIZE) == 190
    names = sorted(os.listdir(tmp_path))
    assert len(names) == 10
    naming = SegmentNaming(str(tmp_path), "data")
    parsed = [parse_history_name(naming, n) for n in names]
    assert [p[1] for p in parsed if p] == list(range(90, 100))
    assert all(p and p[0] >= int(now) - 1 for p in parsed)


def test_pruning_removes_interrupted_copies(tmp_path: Path) -> None:
    _stamp(tmp_path, range(3), time.time())
    (tmp_path / (os.listdir(tmp_path)[0] + ".tmp")).write_bytes(b"half a copy")
    _prune(tmp_path)
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]
    assert len(os.listdir(tmp_path)) == 3


# -- a journal with retention ----------------------------------------------------------------


class _Watched(OsFileHandle):
    __slots__ = ("fs",)

    def __init__(self, path: str, fd: int, fs: RetentionWatch) -> None:
        super().__init__(path, fd)
        self.fs = fs

    def pwrite(self, data: bytes | bytearray | memoryview, offset: int) -> None:
        if offset == 0:
            self.fs.check_not_lost(self.path, self)
        super().pwrite(data, offset)


class RetentionWatch(OsFileSystem):
    """The real file system, checking one invariant: a journal file that holds records is never
    overwritten (re-stamped for reuse) or removed before a history copy of it exists. History
    copies are slowed down to widen the window in which a reclaim could overtake them."""

    def __init__(self, journal_dir: Path, history: Path) -> None:
        self.journal_dir = str(journal_dir)
        self.history = history
        self.violations: list[str] = []
        self.checked = 0

    def open(self, path: str, *, create: bool = False, read_only: bool = False) -> OsFileHandle:
        handle = super().open(path, create=create, read_only=read_only)
        if os.path.dirname(path) == self.journal_dir and not create and not read_only:
            return _Watched(path, handle.fd, self)
        return handle

    def rename(self, src: str, dst: str) -> None:
        if os.path.dirname(dst) == str(self.history):
            time.sleep(0.005)
        super().rename(src, dst)

    def remove(self, path: str) -> None:
        if os.path.dirname(path) == self.journal_dir and path.endswith(".jrn"):
            handle = super().open(path, read_only=True)
            try:
                self.check_not_lost(path, handle)
            finally:
                handle.close()
        super().remove(path)

    def check_not_lost(self, path: str, handle: OsFileHandle) -> None:
        raw = handle.pread(fmt.HEADER_SIZE + 600, 0)
        try:
            header = fmt.decode_header(raw, path)
        except Exception:
            return
        if header is None or fmt.decode_record(raw, fmt.DATA_START, header.file_id) is None:
            return  # no records of this use of the file: nothing to lose
        self.checked += 1
        if header.file_id not in _copies(self.history):
            self.violations.append(f"{path} (file id {header.file_id}) reused before its copy")


def test_a_retention_journal_copies_every_finished_file_before_reclaiming_it(
    tmp_path: Path,
) -> None:
    history = tmp_path / "history"
    watch = RetentionWatch(tmp_path / "j", history)
    opts = FileJournalOptions(
        directory=str(tmp_path / "j"),
        file_size=SIZE,
        compact_min_files=0,
        pool_files=3,
        retention=RetentionOptions(directory=str(history)),
        fs=watch,
    )
    stop = threading.Event()
    j = FileJournal(opts)
    with j:
        j.load()

        def reclaimer() -> None:
            while not stop.is_set():
                j.reclaim()

        thread = threading.Thread(target=reclaimer)
        thread.start()
        try:
            for i in range(600):
                j.append_add(i, 1, b"r" * 100)
                if i >= 5:
                    j.append_delete(i - 5)  # files die soon after they are finished
        finally:
            stop.set()
            thread.join()
    assert watch.violations == []
    assert watch.checked > 0, "no file was reclaimed: the test proves nothing"
    # Every record ever written is in a history copy or still in a journal file.
    # (The journal's file-list markers take lsns too; they are not records.)
    lsns: set[int] = set()
    records: set[int] = set()
    sources = [history / n for n in os.listdir(history)]
    sources += [Path(f.path) for f in survey.list_directory(str(tmp_path / "j")).files]
    for path in sources:
        f = survey.open_journal_file(OsFileSystem(), str(path))
        scan = survey.scan_file(f, path.read_bytes(), keep_records=True)
        records.update(r.lsn for r in scan.records)
        lsns.update(r.lsn for r in scan.records)
        lsns.update(m.lsn for m in scan.markers)
    assert lsns == set(range(1, max(lsns) + 1))
    assert len(records) == 600 + 595  # 600 adds, 595 deletes
    assert all(len(names) == 1 for names in _copies(history).values())


def test_events_are_kept_in_history_but_never_returned_by_a_load(tmp_path: Path) -> None:
    history = tmp_path / "history"
    opts = FileJournalOptions(
        directory=str(tmp_path / "j"),
        file_size=SIZE,
        compact_min_files=0,
        retention=RetentionOptions(directory=str(history)),
    )
    naming = SegmentNaming(str(history), "data")

    def events_in_history() -> list[int]:
        found = []
        for _fid, path in history_files(OsFileSystem(), naming, str(history)):
            f = survey.open_journal_file(OsFileSystem(), path)
            scan = survey.scan_file(f, Path(path).read_bytes(), keep_records=True)
            found += [r.id for r in scan.records if r.type == RecordType.EVENT]
        return found

    with FileJournal(opts) as j:
        j.load()
        for i in range(40):
            j.append_event(1000 + i, 49, b"large body chunk")
            j.append_add(i, 45, b"message")
        deadline = time.monotonic() + 20
        while not events_in_history():  # the first finished file is copied in the background
            assert time.monotonic() < deadline
            time.sleep(0.01)
    assert set(events_in_history()) <= set(range(1000, 1040))
    with FileJournal(opts) as j:
        result = j.load()
    assert [r.id for r in result.records] == list(range(40))


def test_an_interrupted_copy_is_redone_once_and_an_existing_copy_not_duplicated(
    tmp_path: Path,
) -> None:
    """J-132 in this design: nothing in the journal directory is renamed; a copy that exists
    under its final name is complete, and a restart copies a data file only if it has none."""
    history = tmp_path / "history"
    opts = FileJournalOptions(
        directory=str(tmp_path / "j"),
        file_size=SIZE,
        compact_min_files=0,
        retention=RetentionOptions(directory=str(history)),
    )
    with FileJournal(opts) as j:
        j.load()
        for i in range(100):
            j.append_add(i, 45, b"m" * 60)
    copies = _copies(history)
    first, second = sorted(copies)[:2]
    # first: its copy was interrupted (only a .tmp remains); second: its copy is 1 h old.
    (history / copies[first][0]).rename(history / (copies[first][0] + ".tmp"))
    naming = SegmentNaming(str(history), "data")
    old = history_name(naming, second, time.time() - 3600)
    (history / copies[second][0]).rename(history / old)
    with FileJournal(opts) as j:
        j.load()
        j.append_add(1000, 45, b"m" * 3000)  # roll, so the maintenance pass runs
        j.append_add(1001, 45, b"m" * 3000)
        j.flush()
        deadline = time.monotonic() + 20
        while first not in _copies(history):
            assert time.monotonic() < deadline
            time.sleep(0.01)
    after = _copies(history)
    assert len(after[first]) == 1 and after[second] == [old]
    assert not [n for n in os.listdir(history) if n.endswith(".tmp")]


def test_compaction_never_removes_a_file_before_its_retention_copy_exists(
    tmp_path: Path,
) -> None:
    history = tmp_path / "history"
    opts = FileJournalOptions(
        directory=str(tmp_path / "j"),
        file_size=SIZE,
        compact_min_files=0,
        retention=RetentionOptions(directory=str(history)),
    )
    with FileJournal(opts) as j:
        j.load()
        for i in range(100):
            j.append_add(i, 45, b"x" * 50, sync=True)
        j.flush()
        scan = survey.scan_journal(str(tmp_path / "j"))
        assert j.writer is not None
        current = j.writer.current.file_id  # not finished: compaction leaves it in place
        replaced = {s.file.file_id for s in scan.scans if s.count and s.file.file_id != current}
        assert replaced, "the workload must finish some files"
        j.compact()
    assert replaced - set(_copies(history)) == set()


def test_a_clean_close_copies_every_finished_file_the_maintenance_did_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The maintenance thread copies finished files to the history when it gets round to
    it; close() copies the ones it has not, so the history is whole after a clean close.
    Here the maintenance thread never copies anything (it only waits for the close)."""

    def idle(self: FileJournal) -> None:
        while not self._closed:
            self._maint_wake.wait(0.05)
            self._maint_wake.clear()

    monkeypatch.setattr(FileJournal, "_maintenance", idle)
    history = tmp_path / "history"
    opts = FileJournalOptions(
        directory=str(tmp_path / "j"), file_size=SIZE, compact_min_files=0,
        retention=RetentionOptions(directory=str(history)),
    )  # fmt: skip
    with FileJournal(opts) as j:
        j.load()
        for i in range(100):
            j.append_add(i, 45, b"m" * 60)
        finished = {seg.file_id for seg in j.data_files}
        assert len(finished) >= 3 and not _copies(history)
    assert finished <= set(_copies(history))
    with FileJournal(opts) as j:
        assert [r.id for r in j.load().records] == list(range(100))
