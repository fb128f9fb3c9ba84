"""store.file.integrity (issue 6, item 3): a deleted or truncated journal file is reported by
``verify``, refused by ``load()`` with a CorruptionError naming the file and the lost lsns, and
never "repaired" by dropping the evidence; ``print``, ``verify`` and the load agree.

Each test here fails on the code before file-list markers and header sizes: there, every one of
these journals verified "ok", repair said "nothing to repair" and the load silently returned
fewer records (and phantom prepared and failed transactions)."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
from pathlib import Path

import pytest

from store.cli.main import main
from store.errors import ChecksumError, CorruptionError, LostDataError, StoreError
from store.file import compact as compaction
from store.file import format as fmt
from store.file import integrity, reader, repair, survey, verify
from store.file.journal import FileJournal
from store.file.options import FileJournalOptions
from store.file.reader import Tail
from store.file.segments import SegmentNaming
from store.journal.api import LoadResult, RecordType
from tests.support.faultfs import FaultFileSystem

SIZE = 16 * 1024


def write_journal(directory: Path, *, records: int = 1500, seed: int = 6) -> None:
    """A journal over several files: adds, updates, deletes, committed and prepared
    transactions, some synced, as a broker writes it."""
    rng = random.Random(seed)
    opts = FileJournalOptions(directory=str(directory), file_size=SIZE, compact_min_files=0)
    live: list[int] = []
    with FileJournal(opts) as j:
        j.load()
        for i in range(records):
            j.append_add(i, 45, f"message-{i}".encode() * rng.randint(1, 4), sync=i % 50 == 0)
            live.append(i)
            if i % 7 == 0:
                tx = 100_000 + i
                j.append_add_tx(tx, 50_000 + i, 1, b"in a transaction")
                if i % 21 == 0:
                    j.append_prepare(tx, b"xid-%d" % i)
                else:
                    j.append_commit(tx)
            if i % 5 == 0 and len(live) > 10:
                j.append_update(live[-5], 46, b"updated")
            if i % 3 == 0 and len(live) > 20:
                j.append_delete(live.pop(rng.randrange(len(live) - 10)))


def load(directory: Path) -> LoadResult:
    with FileJournal(FileJournalOptions(directory=str(directory), file_size=SIZE)) as j:
        return j.load()


def data_files(directory: Path) -> list[survey.FileScan]:
    """The files holding records, in file-id order (read-only)."""
    return [s for s in survey.scan_journal(str(directory)).scans if s.count]


@pytest.fixture
def journal(tmp_path: Path) -> Path:
    directory = tmp_path / "j"
    write_journal(directory)
    assert len(data_files(directory)) >= 6
    return directory


def _middle(directory: Path) -> survey.FileScan:
    files = data_files(directory)
    return files[len(files) // 2]


def _record_boundaries(scan: survey.FileScan, data: bytes) -> list[int]:
    """Where every record in sequence of the file starts (markers included)."""
    assert scan.file.file_id is not None
    return [raw[0] for raw in reader.scan(data, scan.file.file_id, reader.Cursor())]


def _assert_refused_everywhere(
    directory: Path,
    kind: str,
    path: str,
    lost: tuple[int, int] | None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """verify names it (exit 5), print exits 5 with the load's error, repair refuses, and the
    load raises the same error."""
    report = verify.verify(str(directory))
    assert not report.ok
    errors = [(f.kind, f.path, f.lost) for f in report.errors]
    assert (kind, path, lost) in errors
    with pytest.raises(CorruptionError) as info:
        load(directory)
    assert isinstance(info.value, LostDataError)
    assert (info.value.path, str(info.value)) == (
        report.errors[0].path,
        f"{report.errors[0].path} at offset {report.errors[0].offset}: {report.errors[0].message}",
    )
    assert main(["data", "verify", "--journal", str(directory), "--skip-bindings"]) == 5
    code = main(["data", "print", "--journal", str(directory), "--skip-bindings", "--safe"])
    out = capsys.readouterr().out
    assert code == 5
    assert "a load refuses this journal" in out and str(info.value) in out
    assert "a load returns" not in out
    with pytest.raises(CorruptionError, match="repair cannot bring lost records back") as refused:
        repair.repair(str(directory))
    assert refused.value.hint is not None and "--salvage" in refused.value.hint
    with pytest.raises(CorruptionError):
        repair.repair(str(directory), force=True)  # never hides that records are gone


# -- the three symptoms of item 3 ----------------------------------------------------------------


def test_a_deleted_middle_file_is_refused_naming_the_file_and_its_lsns(
    journal: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    victim = _middle(journal)
    os.remove(victim.file.path)
    _assert_refused_everywhere(
        journal, "missing-file", victim.file.path, (victim.first_lsn, victim.last_lsn), capsys
    )
    with pytest.raises(LostDataError) as info:
        load(journal)
    assert victim.file.name in info.value.reason
    assert f"{victim.first_lsn}..{victim.last_lsn}" in info.value.reason
    assert info.value.hint is not None and "--salvage" in info.value.hint


def test_a_middle_file_truncated_mid_record_is_refused_naming_the_lost_lsns(
    journal: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    victim = _middle(journal)
    path = Path(victim.file.path)
    data = path.read_bytes()
    offsets = _record_boundaries(victim, data)
    cut = offsets[len(offsets) // 2] + 17  # in the middle of a record
    os.truncate(path, cut)
    kept = survey.scan_file(
        survey.open_journal_file(survey.OsFileSystem(), str(path)), path.read_bytes()
    )
    lost = (kept.last_lsn + 1, victim.last_lsn)
    _assert_refused_everywhere(journal, "truncated", str(path), lost, capsys)
    with pytest.raises(LostDataError) as info:
        load(journal)
    assert info.value.offset == cut
    assert f"header says {SIZE}" in info.value.reason
    assert f"lsns {lost[0]}..{lost[1]} are lost" in info.value.reason


def test_the_last_file_truncated_mid_record_is_refused(
    journal: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    last = data_files(journal)[-1]
    path = Path(last.file.path)
    offsets = _record_boundaries(last, path.read_bytes())
    os.truncate(path, offsets[len(offsets) // 2] + 5)
    _assert_refused_everywhere(journal, "truncated", str(path), None, capsys)
    with pytest.raises(LostDataError, match=r"truncated.*whatever followed is lost"):
        load(journal)


def test_a_listed_file_whose_records_were_wiped_is_refused(journal: Path) -> None:
    """Same size, header intact, data zeroed: the file list says which lsns were in it."""
    victim = _middle(journal)
    path = Path(victim.file.path)
    data = bytearray(path.read_bytes())
    data[fmt.DATA_START :] = bytes(len(data) - fmt.DATA_START)
    path.write_bytes(bytes(data))
    report = verify.verify(str(journal))
    assert [(f.kind, f.lost) for f in report.errors] == [
        ("lost-records", (victim.first_lsn, victim.last_lsn))
    ]
    with pytest.raises(LostDataError, match="it holds no record"):
        load(journal)


# -- what must keep loading ----------------------------------------------------------------------


def test_an_intact_journal_loads_and_verifies_clean_and_markers_are_not_records(
    journal: Path,
) -> None:
    report = verify.verify(str(journal))
    assert report.ok and report.findings == []
    assert sum(f.markers for f in report.files) >= len(data_files(journal)) - 1
    loaded = load(journal)
    assert loaded.records and loaded.prepared
    # Reopened after a load that wrote (failed-tx rollbacks, a new file): still clean.
    assert load(journal).records == loaded.records
    assert verify.verify(str(journal)).ok


def test_reclaim_and_compaction_retire_files_without_a_false_alarm(tmp_path: Path) -> None:
    """Files removed by reclaim and replaced by compaction are retired by durable markers:
    the lsn gaps they leave are never reported."""
    directory = tmp_path / "j"
    opts = FileJournalOptions(
        directory=str(directory), file_size=SIZE, compact_min_files=0, pool_files=2
    )
    with FileJournal(opts) as j:
        j.load()
        for i in range(1200):
            j.append_add(i, 1, b"r" * 120)
            if i >= 40:
                j.append_delete(i - 40)
            if i % 400 == 399:
                j.flush()
                j.reclaim()
        j.compact()
        for i in range(1200, 1300):
            j.append_add(i, 1, b"after the compaction")
        j.reclaim()
    assert verify.verify(str(directory)).ok
    assert [r.id for r in load(directory).records] == list(range(1160, 1300))
    # ... and the markers still protect the journal: a compaction output is listed too.
    victim = data_files(directory)[0]
    os.remove(victim.file.path)
    with pytest.raises(LostDataError, match="is missing"):
        load(directory)


def test_a_committed_compaction_whose_marker_never_reached_the_disk(tmp_path: Path) -> None:
    """Crash after the control file committed and before the CHANGE marker was durable: the
    old files are gone after recovery, yet nothing is reported missing. The control file stays
    until the load has made the equivalent marker durable; a crash right after recovery (before
    the load wrote its marker) is just as safe."""
    fs = FaultFileSystem()
    fs.makedirs("/j")
    opts = FileJournalOptions(directory="/j", file_size=SIZE, compact_min_files=0, fs=fs)
    j = FileJournal(opts)
    j.load()
    for i in range(600):
        j.append_add(i, 1, b"x" * 100)
        if i % 3:
            j.append_delete(i)
    j.flush()
    naming = SegmentNaming("/j", "data")
    old = {f.file_id for f in j.data_files}
    # The first old file is recycled right after the commit, before the marker is written.
    fs.crash_at(
        ("rename", "remove"),
        1,
        when="before",
        match=lambda p: naming.parse(os.path.basename(p)) in old,
        stop=True,
    )
    with pytest.raises(StoreError):  # the simulated machine died
        j.compact()
    with contextlib.suppress(StoreError):
        j.close()  # the machine is dead: closing fails too
    image = fs.crash_points[0].crash(random.Random(1), "drop")
    control = compaction.control_path(naming)
    assert image.exists(control)
    expected = [i for i in range(0, 600, 3)]
    # Recovery alone (as an offline repair runs it) keeps the control file ...
    compaction.finish_interrupted(image, naming)
    assert image.exists(control)
    assert not [p for p in survey.scan_journal("/j", fs=image).problems]
    again = image.crash(random.Random(2), "drop")  # ... and a crash right now is harmless
    for state in (image, again):
        with FileJournal(FileJournalOptions(directory="/j", file_size=SIZE, fs=state)) as k:
            assert [r.id for r in k.load().records] == expected
        assert not state.exists(control)
        with FileJournal(FileJournalOptions(directory="/j", file_size=SIZE, fs=state)) as k:
            assert [r.id for r in k.load().records] == expected


def test_the_golden_v1_journal_without_markers_still_loads(tmp_path: Path) -> None:
    """Journals written before markers (and before header sizes) have neither: the checks that
    need them are skipped, never turned into a false alarm."""
    golden = Path(__file__).parent.parent / "testdata" / "journal-v1" / "journal"
    shutil.copytree(golden, tmp_path / "j")
    scan = survey.scan_journal(str(tmp_path / "j"))
    assert all(s.file.header and s.file.header.file_size == 0 for s in scan.scans)
    assert scan.problems == [] and not any(s.markers for s in scan.scans)


def test_new_files_state_their_size_in_the_header(journal: Path) -> None:
    for f in survey.list_directory(str(journal)).files:
        assert f.header is not None and f.header.file_size == f.size == SIZE


def test_a_forced_cut_restates_the_files_left_so_the_journal_loads(tmp_path: Path) -> None:
    """``repair --force`` cuts at a checksum failure and sets later files aside; that drops
    the CHANGE markers that retired reclaimed files, so the cut writes a FILES marker listing
    the files that are left instead of leaving a journal that reports them missing."""
    directory = tmp_path / "j"
    opts = FileJournalOptions(directory=str(directory), file_size=SIZE, compact_min_files=0)
    with FileJournal(opts) as j:
        j.load()
        for i in range(300):
            j.append_add(i, 1, b"m" * 100)
        j.append_add(1000, 1, b"before the damage", sync=True)
        j.append_add(1001, 1, b"damaged")
        for i in range(150):
            j.append_delete(i)  # early files die and are reclaimed after record 1001
        j.flush()
        j.reclaim()
        j.append_add(1002, 1, b"proves 1001 was durable", sync=True)
    (full,) = [
        s
        for s in survey.scan_journal(str(directory), keep_records=True).scans
        if any(r.id == 1001 for r in s.records)
    ]
    home = full
    listed = {e.file_id for m in full.markers for e in m.marker.files}
    present = {f.file_id for f in survey.list_directory(str(directory)).files}
    assert listed - present, "no listed file was reclaimed: the test proves nothing"
    (damaged,) = [r for r in full.records if r.id == 1001]
    with open(home.file.path, "r+b") as f:
        f.seek(damaged.offset + 60)
        f.write(b"X")
    with pytest.raises(CorruptionError):
        load(directory)
    assert [f.kind for f in verify.verify(str(directory)).errors] == ["checksum"]
    report = repair.repair(str(directory), force=True)
    (cut,) = report.cuts
    assert cut.offset == damaged.offset and cut.marker_at == damaged.offset
    assert verify.verify(str(directory)).ok
    ids = [r.id for r in load(directory).records]
    assert 1000 in ids and 1001 not in ids


# -- classify ------------------------------------------------------------------------------------


def _tail(*durables: int, end: int = 1000) -> Tail:
    """A tail whose records have lsn 10, 11, … and the given durable_lsn values."""
    records = [
        fmt.Record(end + 100 * i, 60, int(RecordType.ADD), 0, 0, 65536, 10 + i, d, 1, 0, 0, b"")
        for i, d in enumerate(durables)
    ]
    return Tail(end, records)


def test_classify_a_clean_end_is_quiet() -> None:
    integrity.classify("f", Tail(500), missing_lsn=5, is_last=False)
    integrity.classify("f", Tail(500), missing_lsn=5, is_last=True)


@pytest.mark.parametrize(
    "durables",
    [
        pytest.param((8,), id="one-record-durable-below-missing"),
        pytest.param((8, 8, 8), id="several-records-none-proves"),
        pytest.param((0,), id="nothing-durable"),
    ],
)
def test_classify_a_torn_tail_of_the_last_file_is_quiet(durables: tuple[int, ...]) -> None:
    integrity.classify("f", _tail(*durables), missing_lsn=9, is_last=True)


def test_classify_any_tail_in_a_file_that_is_not_the_last_is_corruption() -> None:
    with pytest.raises(ChecksumError) as info:
        integrity.classify("dir/data-1.jrn", _tail(0, end=1234), missing_lsn=9, is_last=False)
    err = info.value
    assert (err.path, err.offset) == ("dir/data-1.jrn", 1234)
    assert "later files" in err.reason
    assert err.hint is not None and "repair" in err.hint


@pytest.mark.parametrize(
    ("durables", "missing"),
    [
        pytest.param((9,), 9, id="durable-equals-missing"),
        pytest.param((20,), 9, id="durable-above-missing"),
        pytest.param((8, 8, 12), 9, id="a-later-record-proves"),
    ],
)
def test_classify_a_record_proving_durability_is_corruption(
    durables: tuple[int, ...], missing: int
) -> None:
    with pytest.raises(ChecksumError) as info:
        integrity.classify("f", _tail(*durables, end=777), missing_lsn=missing, is_last=True)
    assert info.value.offset == 777
    assert f"lsn {missing} expected" in info.value.reason
