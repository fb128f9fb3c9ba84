"""store.file.verify: every finding of a journal directory, read-only, over hand-built damage
and journals written by the real FileJournal."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from store.errors import ChecksumError, ConfigError, StoreLockedError
from store.file import compact as compaction
from store.file import format as fmt
from store.file import repair, verify
from store.file.journal import FileJournal
from store.file.options import FileJournalOptions
from store.file.segments import SegmentNaming
from store.journal.api import RecordInfo
from tests.file.handbuilt import SIZE, A, B, Builder, C, flip, load, snapshot, two_files


def kinds(report: verify.VerifyReport) -> list[tuple[str, str]]:
    return [(f.severity, f.kind) for f in report.findings]


def test_verify_a_clean_journal_written_by_the_journal(tmp_path: Path) -> None:
    opts = FileJournalOptions(directory=str(tmp_path / "j"), file_size=SIZE)
    with FileJournal(opts) as j:
        j.load()
        for i in range(60):
            j.append_add(i, 1, b"x" * 100, sync=i % 7 == 0)
    report = verify.verify(str(tmp_path / "j"), kind=fmt.KIND_MESSAGES)
    assert report.ok and report.findings == []
    assert sum(f.records for f in report.files) == 60
    assert all(f.header == "ok" and f.torn_tail is None for f in report.files)
    assert load(tmp_path / "j").records == [RecordInfo(i, 1, b"x" * 100, False) for i in range(60)]


def test_verify_reports_a_torn_tail_as_a_warning(torn: tuple[Path, Builder]) -> None:
    directory, b = torn
    report = verify.verify(str(directory))
    assert report.ok
    assert kinds(report) == [("warning", "torn-tail")]
    finding = report.findings[0]
    start, end = b.offset(1, 2), b.pos
    assert (finding.offset, finding.size) == (start, end - start)
    assert finding.path.endswith(f"data-{B:020d}.jrn")
    last = report.files[1]
    assert (last.records, last.end, last.last_lsn) == (2, start, 7)
    assert last.torn_tail == (start, end - start)


@pytest.mark.parametrize("shape", ["corrupt_last", "corrupt_middle"])
def test_verify_reports_a_checksum_failure_as_an_error(
    shape: str, request: pytest.FixtureRequest
) -> None:
    directory, b = request.getfixturevalue(shape)
    report = verify.verify(str(directory))
    assert not report.ok
    assert kinds(report) == [("error", "checksum")]
    index, record = (1, 1) if shape == "corrupt_last" else (0, 2)
    assert report.findings[0].offset == b.offset(index, record)
    assert report.files[index].checksum_error is not None
    with pytest.raises(ChecksumError) as info:
        load(directory)
    assert info.value.offset == b.offset(index, record)


def test_verify_any_tail_in_a_file_before_the_last_is_corruption(tmp_path: Path) -> None:
    """In file A a batch (lsn 3..5) appended after lsn 2 was durable: with lsn 3 damaged, 4 and
    5 prove nothing by their durable_lsn, but file B was written after A was synced, so the
    damage is corruption all the same."""
    b = Builder().file(A).adds(2).adds(3, durable=2).file(B).adds(2)
    paths = b.write(tmp_path / "j")
    flip(paths[0], b.offset(0, 2) + 60)
    report = verify.verify(str(tmp_path / "j"))
    assert kinds(report) == [("error", "checksum")]
    assert report.findings[0].offset == b.offset(0, 2)
    with pytest.raises(ChecksumError):
        load(tmp_path / "j")
    # The same damage in the last file is only a torn tail.
    b = Builder().file(A).adds(2).adds(3, durable=2)
    paths = b.write(tmp_path / "k")
    flip(paths[0], b.offset(0, 2) + 60)
    assert kinds(verify.verify(str(tmp_path / "k"))) == [("warning", "torn-tail")]


def test_verify_lists_every_finding_not_just_the_first(tmp_path: Path) -> None:
    b = two_files().file(C).adds(1)
    paths = b.write(tmp_path / "j")
    flip(paths[0], b.offset(0, 2) + 60)  # corruption in A (not last)
    flip(paths[1], b.offset(1, 0) + 60)  # corruption in B (not last either)
    (tmp_path / "j" / "data-00000000000000262144.jrn").write_bytes(bytes(SIZE))  # never finished
    bad = bytearray(fmt.encode_header(327680, 0, created_ns=1))
    bad[0:4] = b"XXXX"
    (tmp_path / "j" / "data-00000000000000327680.jrn").write_bytes(bytes(bad) + bytes(100))
    (tmp_path / "j" / "data-00000000000000393216.jrn.cmp").write_bytes(b"")
    report = verify.verify(str(tmp_path / "j"))
    assert sorted(kinds(report)) == sorted(
        [
            ("error", "checksum"),
            ("error", "checksum"),
            ("warning", "zero-header"),
            ("error", "bad-header"),
            ("warning", "leftover"),
        ]
    )
    assert [f.header for f in report.files] == ["ok", "ok", "ok", "zero", "bad"]


def test_verify_flags_duplicate_ids_other_kinds_and_misnamed_files(tmp_path: Path) -> None:
    b = Builder().file(A).adds(2).file(B, header_id=A).adds(1)
    b.write(tmp_path / "j")
    other = Builder(kind=fmt.KIND_BINDINGS).file(C).adds(1)
    other.write(tmp_path / "j")
    report = verify.verify(str(tmp_path / "j"), kind=fmt.KIND_MESSAGES)
    assert sorted(kinds(report)) == [
        ("error", "duplicate-id"),
        ("error", "kind-mismatch"),
        ("warning", "name-mismatch"),
    ]


def test_verify_reports_stale_bytes_of_a_reused_file_as_information(tmp_path: Path) -> None:
    b = Builder().file(A).adds(3).rec(fid=999).rec(fid=999)
    b.write(tmp_path / "j")
    report = verify.verify(str(tmp_path / "j"))
    assert report.ok and kinds(report) == [("info", "stale-bytes")]
    assert report.findings[0].offset == b.offset(0, 3)
    assert report.files[0].stale_bytes > 0


@pytest.mark.parametrize("committed", [True, False], ids=["committed", "uncommitted"])
def test_verify_reports_an_interrupted_compaction(tmp_path: Path, committed: bool) -> None:
    Builder().file(A).adds(1).write(tmp_path / "j")
    naming = SegmentNaming(str(tmp_path / "j"), "data")
    ctl = compaction.ControlFile(["data-00000000000000065536.jrn"], ["x.cmp"])
    raw = compaction.encode_control(ctl)
    Path(compaction.control_path(naming)).write_bytes(raw if committed else raw[:-3])
    report = verify.verify(str(tmp_path / "j"))
    assert kinds(report) == [("warning", "control-file")]
    assert ("finishes" if committed else "discards") in report.findings[0].message


def test_verify_changes_nothing(
    torn: tuple[Path, Builder], corrupt_middle: tuple[Path, Builder]
) -> None:
    for directory, _b in (torn, corrupt_middle):
        before = snapshot(directory)
        verify.verify(str(directory))
        assert snapshot(directory) == before


def test_verify_of_a_path_without_a_journal_is_an_error_naming_it(tmp_path: Path) -> None:
    """Issue 7 item 3: a missing directory, or one holding no journal files, is a ConfigError
    naming the path (it was a warning, exit 1); nothing is created."""
    missing = re.escape(f"no journal in {tmp_path / 'nope'}: the directory does not exist")
    with pytest.raises(ConfigError, match=missing):
        verify.verify(str(tmp_path / "nope"))
    assert not (tmp_path / "nope").exists()
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=re.escape("holds no data-*.jrn files")):
        verify.verify(str(tmp_path / "empty"))
    assert list((tmp_path / "empty").iterdir()) == []


def test_verify_refuses_a_journal_held_open_for_writing_unless_forced(tmp_path: Path) -> None:
    opts = FileJournalOptions(directory=str(tmp_path / "j"), file_size=SIZE)
    with FileJournal(opts) as j:
        j.load()
        j.append_add(1, 1, b"x", sync=True)
        with pytest.raises(StoreLockedError) as info:
            verify.verify(str(tmp_path / "j"))
        assert info.value.holder is not None and f"pid={os.getpid()}" in info.value.holder
        assert verify.verify(str(tmp_path / "j"), force=True).ok
    assert verify.verify(str(tmp_path / "j")).ok  # released at close


def test_verify_refuses_a_journal_held_by_another_live_process(tmp_path: Path) -> None:
    directory = tmp_path / "j"
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import sys
            from store.file.journal import FileJournal
            from store.file.options import FileJournalOptions
            j = FileJournal(FileJournalOptions(directory={str(directory)!r}, file_size={SIZE}))
            j.load()
            print("ready", flush=True)
            sys.stdin.readline()
            j.close()
        """),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        with pytest.raises(StoreLockedError) as info:
            verify.verify(str(directory))
        assert f"pid={child.pid}" in (info.value.holder or "")
        with pytest.raises(StoreLockedError):
            repair.repair(str(directory))
    finally:
        assert child.stdin is not None
        child.stdin.write("\n")
        child.stdin.close()
        child.wait(timeout=30)
    assert verify.verify(str(directory)).ok
