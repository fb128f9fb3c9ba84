"""store.file.salvage (issue 6, item 4): one damaged record costs one record, not every file
after it; salvage says which lsns and ids it dropped and keeps the original files; and
``store data print`` agrees with the load on a damaged journal.

Before salvage existed, the only way past a checksum failure was ``repair --force``, which cut
the file at the damage and moved every later file aside (2,178 of 5,832 ids kept in the
issue); and ``print`` exited 0 with counts on a journal the load refused."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from store.cli.main import main
from store.errors import CorruptionError, LostDataError
from store.file import repair, salvage, survey, verify
from store.file.journal import FileJournal
from store.file.options import FileJournalOptions
from store.journal.api import RecordType
from tests.file.test_integrity import SIZE, data_files, load, write_journal


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    """The same journal twice: ``damaged`` (to be damaged) and ``pristine`` (reference)."""
    damaged, pristine = tmp_path / "damaged", tmp_path / "pristine"
    write_journal(damaged)
    shutil.copytree(damaged, pristine)
    return damaged, pristine


def _victim(directory: Path) -> tuple[survey.FileScan, survey.RecordView]:
    """A plain ADD in the middle of a middle file whose id is never touched again."""
    files = data_files(directory)
    middle = files[len(files) // 2]
    full = survey.scan_file(middle.file, Path(middle.file.path).read_bytes(), keep_records=True)
    every = [
        r for f in survey.scan_journal(str(directory), keep_records=True).scans for r in f.records
    ]
    touched: dict[int, int] = {}
    for r in every:
        touched[r.id] = touched.get(r.id, 0) + 1
    adds = [r for r in full.records if r.type == RecordType.ADD and touched[r.id] == 1]
    return middle, adds[len(adds) // 2]


def _flip(path: str, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0xFF]))


def test_salvage_drops_only_the_damaged_record_and_keeps_every_later_one(
    pair: tuple[Path, Path],
) -> None:
    damaged, pristine = pair
    scan, victim = _victim(damaged)
    _flip(scan.file.path, victim.offset + 60)  # in the body: the header still reads
    originals = {p.name: p.read_bytes() for p in damaged.iterdir() if p.suffix == ".jrn"}
    with pytest.raises(CorruptionError):
        load(damaged)

    report = salvage.salvage(str(damaged))

    assert report.changed
    (dropped,) = report.dropped
    assert (dropped.reason, dropped.path, dropped.offset) == (
        "checksum",
        scan.file.path,
        victim.offset,
    )
    assert dropped.lsns == (victim.lsn, victim.lsn)
    assert [(r.lsn, r.type, r.id) for r in dropped.records] == [(victim.lsn, "ADD", victim.id)]
    assert report.dropped_ids == [victim.id]
    # The originals are kept, byte for byte, beside the journal.
    assert report.backup_dir is not None and Path(report.backup_dir).parent == damaged
    kept = {p.name: p.read_bytes() for p in Path(report.backup_dir).iterdir()}
    assert kept == originals
    # A load returns everything a load of the undamaged journal returns, but the victim.
    expected = load(pristine)
    got = load(damaged)
    assert got.records == [r for r in expected.records if r.id != victim.id]
    assert got.prepared == expected.prepared
    assert (report.records, report.prepared) == (len(got.records), len(got.prepared))
    assert verify.verify(str(damaged)).ok
    # Reopened and written to, it stays consistent.
    with FileJournal(FileJournalOptions(directory=str(damaged), file_size=SIZE)) as j:
        j.load()
        for i in range(300):
            j.append_add(900_000 + i, 1, b"after the salvage")
    assert len(load(damaged).records) == len(got.records) + 300
    assert verify.verify(str(damaged)).ok


def test_force_repair_loses_every_later_file_where_salvage_loses_one_record(
    pair: tuple[Path, Path], tmp_path: Path
) -> None:
    """The contrast of the issue, on copies of the same damage."""
    damaged, pristine = pair
    scan, victim = _victim(damaged)
    _flip(scan.file.path, victim.offset + 60)
    forced = tmp_path / "forced"
    shutil.copytree(damaged, forced)
    repair.repair(str(forced), force=True)
    salvage.salvage(str(damaged))
    total = len(load(pristine).records)
    assert len(load(damaged).records) == total - 1
    assert len(load(forced).records) < total - 50


def test_a_damaged_header_is_dropped_by_lsn_when_its_id_cannot_be_read(
    pair: tuple[Path, Path],
) -> None:
    damaged, pristine = pair
    scan, victim = _victim(damaged)
    _flip(scan.file.path, victim.offset + 4)  # the type byte: the header no longer reads
    report = salvage.salvage(str(damaged))
    (dropped,) = report.dropped
    assert dropped.lsns == (victim.lsn, victim.lsn) and dropped.records == ()
    assert [r.id for r in load(damaged).records] == [
        r.id for r in load(pristine).records if r.id != victim.id
    ]


def test_salvage_of_a_missing_file_reports_its_lsns_and_keeps_the_rest(
    pair: tuple[Path, Path],
) -> None:
    damaged, _pristine = pair
    files = data_files(damaged)
    victim = files[len(files) // 2]
    os.remove(victim.file.path)
    with pytest.raises(LostDataError):
        load(damaged)
    report = salvage.salvage(str(damaged))
    assert [(d.reason, d.path, d.lsns) for d in report.dropped] == [
        ("missing-file", victim.file.path, (victim.first_lsn, victim.last_lsn))
    ]
    assert len(load(damaged).records) == report.records
    assert verify.verify(str(damaged)).ok


def test_salvage_leaves_a_journal_the_load_accepts_alone(pair: tuple[Path, Path]) -> None:
    damaged, _pristine = pair
    before = sorted((p.name, p.read_bytes()) for p in damaged.iterdir() if p.is_file())
    report = salvage.salvage(str(damaged))
    assert not report.changed and report.dropped == []
    assert sorted((p.name, p.read_bytes()) for p in damaged.iterdir() if p.is_file()) == before


# -- print agrees with the load ------------------------------------------------------------------


def test_print_exits_5_on_a_journal_the_load_refuses_and_the_cli_salvages_it(
    pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    damaged, _pristine = pair
    scan, victim = _victim(damaged)
    _flip(scan.file.path, victim.offset + 60)
    with pytest.raises(CorruptionError) as refused:
        load(damaged)
    args = ["--journal", str(damaged), "--skip-bindings"]
    code = main(["data", "print", *args, "--safe"])
    out = capsys.readouterr().out
    assert code == 5
    assert f"DAMAGED: checksum: {refused.value}" in out
    assert "a load refuses this journal" in out and "a load returns" not in out

    code = main(["data", "repair", *args, "--salvage"])
    out = capsys.readouterr().out
    assert code == 1  # done, with records dropped
    assert f"DROPPED checksum: lsns {victim.lsn}..{victim.lsn}" in out
    assert f"ADD id={victim.id}" in out and "the original files are in" in out

    code = main(["data", "print", *args, "--safe"])
    out = capsys.readouterr().out
    assert code == 0 and "a load returns" in out
    assert main(["data", "repair", *args, "--salvage"]) == 0
    assert "nothing to salvage" in capsys.readouterr().out


# -- verify's advice, followed ---------------------------------------------------------------------


def test_verify_advises_the_salvage_and_following_it_loses_only_the_damaged_record(
    pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 40: ``verify`` names the repair that drops least (salvage, not ``--force``, which
    kept 330 of 505 messages), with what it drops; the files are unchanged by the advice (a
    dry run); running the command it prints keeps every record but the damaged one."""
    damaged, pristine = pair
    scan, victim = _victim(damaged)
    _flip(scan.file.path, victim.offset + 60)
    before = {p.name: p.read_bytes() for p in damaged.iterdir() if p.is_file()}
    args = ["--journal", str(damaged), "--skip-bindings"]

    assert main(["data", "verify", *args]) == 5
    out = capsys.readouterr().out
    (hint,) = [line for line in out.splitlines() if line.startswith("hint: messages:")]
    dry = salvage.salvage(str(damaged), dry_run=True)
    assert not dry.changed and dry.dropped_ids == [victim.id]
    assert "`store data repair --salvage` is the repair that drops least" in hint
    assert f"keeps {dry.kept} valid record(s)" in hint
    assert f"drops 1 damaged record(s) (lsn {victim.lsn}; ids {victim.id})" in hint
    assert "`--force` would instead cut" in hint
    assert {p.name: p.read_bytes() for p in damaged.iterdir() if p.is_file()} == before

    command = hint.split("`")[1].split()
    assert command[:3] == ["store", "data", "repair"]
    assert main([*command[1:], *args]) == 1  # done, with a record dropped
    capsys.readouterr()
    expected = load(pristine)
    assert load(damaged).records == [r for r in expected.records if r.id != victim.id]
    assert main(["data", "verify", *args]) == 0
    assert "hint:" not in capsys.readouterr().out
