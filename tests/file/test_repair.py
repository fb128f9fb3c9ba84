"""store.file.repair: torn tails zeroed, checksum failures cut only when forced, over
hand-built damage and journals written by the real FileJournal."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from store.errors import ChecksumError, ConfigError, CorruptionError, StoreLockedError
from store.file import compact as compaction
from store.file import repair, survey, verify
from store.file import salvage as salvage_module
from store.file.journal import FileJournal
from store.file.options import FileJournalOptions
from store.file.segments import SegmentNaming
from store.fs import OsFileSystem
from tests.file.handbuilt import SIZE, A, B, Builder, C, flip, ids, load, snapshot
from tests.file.test_verify import kinds


def test_repair_zeroes_a_torn_tail_and_keeps_a_broken_copy(torn: tuple[Path, Builder]) -> None:
    directory, b = torn
    path = directory / f"data-{B:020d}.jrn"
    original = path.read_bytes()
    report = repair.repair(str(directory))
    start, end = b.offset(1, 2), b.pos
    (cut,) = report.cuts
    assert (cut.path, cut.offset, cut.removed) == (str(path), start, end - start)
    assert cut.reason == "torn-tail"
    assert Path(cut.backup).read_bytes() == original
    assert cut.backup == str(path) + ".broken"
    repaired = path.read_bytes()
    assert repaired[start:end] == bytes(end - start)
    assert repaired[:start] == original[:start] and repaired[end:] == original[end:]
    assert report.moved == [] and report.repair_dir is None
    assert verify.verify(str(directory)).findings == [
        f for f in verify.verify(str(directory)).findings if f.kind == "backup"
    ]
    assert ids(load(directory)) == [1, 2, 3, 4, 5, 6, 7]


def test_repair_twice_is_a_no_op_the_second_time(torn: tuple[Path, Builder]) -> None:
    directory, _b = torn
    assert repair.repair(str(directory)).changed
    before = snapshot(directory)
    second = repair.repair(str(directory))
    assert not second.changed and second.cuts == [] and second.moved == []
    after = snapshot(directory)
    after.pop("journal.lock", None)
    before.pop("journal.lock", None)
    assert after == before


def test_repair_refuses_a_checksum_failure_without_force(
    corrupt_last: tuple[Path, Builder],
) -> None:
    directory, b = corrupt_last
    before = snapshot(directory)
    with pytest.raises(ChecksumError) as info:
        repair.repair(str(directory))
    assert info.value.offset == b.offset(1, 1)
    assert info.value.hint is not None and "--force" in info.value.hint
    after = snapshot(directory)
    after.pop("journal.lock", None)
    assert after == before


def test_repair_force_cuts_at_the_first_bad_offset(corrupt_last: tuple[Path, Builder]) -> None:
    directory, b = corrupt_last
    report = repair.repair(str(directory), force=True)
    (cut,) = report.cuts
    assert (cut.offset, cut.reason) == (b.offset(1, 1), "checksum")
    assert cut.removed == b.pos - b.offset(1, 1)
    assert report.moved == []
    assert ids(load(directory)) == [1, 2, 3, 4, 5, 6]


def test_repair_force_moves_later_files_aside(corrupt_middle: tuple[Path, Builder]) -> None:
    directory, b = corrupt_middle
    free = Builder().file(C)  # a free file: no records, nothing to set aside
    free.write(directory)
    later = directory / f"data-{B:020d}.jrn"
    later_bytes = later.read_bytes()
    report = repair.repair(str(directory), force=True)
    assert report.repair_dir is not None
    assert os.path.basename(report.repair_dir).startswith("repair-")
    assert [(m.source, m.target) for m in report.moved] == [
        (str(later), os.path.join(report.repair_dir, later.name))
    ]
    assert Path(report.moved[0].target).read_bytes() == later_bytes
    assert (directory / f"data-{C:020d}.jrn").exists()
    (cut,) = report.cuts
    assert cut.offset == b.offset(0, 2) and cut.reason == "checksum"
    assert ids(load(directory)) == [1, 2]
    assert not repair.repair(str(directory)).changed


def test_repair_refuses_a_damaged_header_unless_forced(tmp_path: Path) -> None:
    directory = tmp_path / "j"
    Builder().file(A).adds(2).write(directory)
    bad = directory / f"data-{B:020d}.jrn"
    bad.write_bytes(b"XXXX" + bytes(SIZE - 4))
    with pytest.raises(CorruptionError) as info:
        repair.repair(str(directory))
    assert info.value.path == str(bad)
    report = repair.repair(str(directory), force=True)
    assert [m.source for m in report.moved] == [str(bad)]
    assert ids(load(directory)) == [1, 2]


def test_repair_refuses_two_files_with_one_id_even_when_forced(tmp_path: Path) -> None:
    Builder().file(A).adds(2).file(B, header_id=A).adds(1).write(tmp_path / "j")
    with pytest.raises(CorruptionError, match="also carried by"):
        repair.repair(str(tmp_path / "j"), force=True)


def test_repair_finishes_an_interrupted_compaction_first(tmp_path: Path) -> None:
    directory = tmp_path / "j"
    Builder().file(A).adds(2).write(directory)
    Builder().file(B).rec(id=3).write(directory)
    (directory / f"data-{B:020d}.jrn").rename(directory / f"data-{B:020d}.jrn.cmp")
    naming = SegmentNaming(str(directory), "data")
    compaction.write_control(
        OsFileSystem(),
        naming,
        compaction.ControlFile([f"data-{A:020d}.jrn"], [f"data-{B:020d}.jrn.cmp"]),
    )
    report = repair.repair(str(directory))
    assert f"removed data-{A:020d}.jrn" in report.recovered
    assert f"created data-{B:020d}.jrn" in report.recovered
    assert ids(load(directory)) == [3]


def test_repair_of_a_torn_tail_written_by_the_journal(tmp_path: Path) -> None:
    """The real writer: a synced prefix, then a batch appended without sync (one write at
    close); damaging the first record of the batch leaves a torn tail that repair removes."""
    directory = tmp_path / "j"
    opts = FileJournalOptions(
        directory=str(directory), file_size=1 << 16, buffer_timeout_ns=200_000_000
    )
    with FileJournal(opts) as j:
        j.load()
        for i in range(10):
            j.append_add(i, 1, b"synced", sync=True)
        for i in range(10, 20):
            j.append_add(i, 1, b"batch")
    scan = survey.scan_journal(str(directory), keep_records=True)
    last = next(s for s in scan.scans if s.count)
    batch = [r for r in last.records if r.id >= 10]
    flip(Path(last.file.path), batch[0].offset + 60)
    report = verify.verify(str(directory))
    assert kinds(report) == [("warning", "torn-tail")]
    assert repair.repair(str(directory)).cuts[0].offset == batch[0].offset
    assert ids(load(directory)) == list(range(10))


def test_repair_refuses_while_the_journal_is_open(tmp_path: Path) -> None:
    opts = FileJournalOptions(directory=str(tmp_path / "j"), file_size=SIZE)
    with FileJournal(opts) as j:
        j.load()
        with pytest.raises(StoreLockedError):
            repair.repair(str(tmp_path / "j"))


@pytest.mark.parametrize("salvage", [False, True], ids=["repair", "salvage"])
def test_repair_of_a_path_without_a_journal_is_an_error_and_takes_no_lock(
    tmp_path: Path, salvage: bool
) -> None:
    """Issue 7 item 3: it returned "nothing to repair" (and, for an existing directory, left a
    journal.lock behind). Now a ConfigError naming the path; nothing is created."""
    run = salvage_module.salvage if salvage else repair.repair
    with pytest.raises(ConfigError, match="the directory does not exist"):
        run(str(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="holds no data-"):
        run(str(tmp_path / "empty"))
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["empty"]
