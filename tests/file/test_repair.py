"""store.file.repair (verify, repair, compact_store, recover) and the offline reading of
store.file.survey it stands on, over real directories: hand-built journals for exact damage,
and journals written by the real FileJournal."""

from __future__ import annotations

import hashlib
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from store import StoreConfig, open_store
from store.errors import ChecksumError, ConfigError, CorruptionError, StoreLockedError
from store.file import compact as compaction
from store.file import format as fmt
from store.file import repair, survey
from store.file.journal import FileJournal
from store.file.options import FileJournalOptions, RetentionOptions
from store.file.segments import SegmentNaming
from store.fs import OsFileSystem
from store.journal.api import LoadResult, RecordInfo, RecordType

ADD = RecordType.ADD
SIZE = 4096
A, B, C = 65536, 131072, 196608


class Builder:
    """Journal files laid out by hand, record by record (lsns run across files)."""

    def __init__(self, prefix: str = "data", kind: int = fmt.KIND_MESSAGES) -> None:
        self.prefix = prefix
        self.kind = kind
        # (id in the name, id in the header, bytes, record offsets)
        self.files: list[tuple[int, int, bytearray, list[int]]] = []
        self.pos = 0
        self.lsn = 0

    def file(self, file_id: int, *, header_id: int | None = None) -> Builder:
        data = bytearray(SIZE)
        header_id = file_id if header_id is None else header_id
        data[: fmt.HEADER_SIZE] = fmt.encode_header(header_id, self.kind, created_ns=1)
        self.files.append((file_id, header_id, data, []))
        self.pos = fmt.DATA_START
        return self

    def rec(
        self, rtype: RecordType = ADD, *, id: int = 0, tx_id: int = 0, body: bytes = b"body",
        tx_count: int = 0, durable: int | None = None, cc: int = 0, fid: int | None = None,
    ) -> Builder:
        _name_id, file_id, data, offsets = self.files[-1]
        self.lsn += 1
        raw = fmt.encode_record(
            int(rtype), file_id=file_id if fid is None else fid, lsn=self.lsn,
            durable_lsn=self.lsn - 1 if durable is None else durable, id=id or self.lsn,
            tx_id=tx_id, user_type=7, tx_count=tx_count, body=body, compact_count=cc,
        )
        data[self.pos : self.pos + len(raw)] = raw
        offsets.append(self.pos)
        self.pos += len(raw)
        return self

    def adds(self, n: int, *, durable: int | None = None) -> Builder:
        for _ in range(n):
            self.rec(durable=durable)
        return self

    def offset(self, file_index: int, record_index: int) -> int:
        return self.files[file_index][3][record_index]

    def write(self, directory: Path) -> list[Path]:
        directory.mkdir(parents=True, exist_ok=True)
        paths = []
        for file_id, _h, data, _o in self.files:
            path = directory / f"{self.prefix}-{file_id:020d}.jrn"
            path.write_bytes(bytes(data))
            paths.append(path)
        return paths


def flip(path: Path, offset: int) -> None:
    """Damage one byte of ``path`` (as a bad sector or a torn write would)."""
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0xFF]))


def snapshot(directory: Path) -> dict[str, str]:
    """Every path under ``directory`` with a digest of its bytes (directories: "dir")."""
    out = {}
    for p in sorted(directory.rglob("*")):
        rel = str(p.relative_to(directory))
        out[rel] = "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def load(directory: Path, *, prefix: str = "data") -> LoadResult:
    opts = FileJournalOptions(directory=str(directory), prefix=prefix, file_size=SIZE)
    journal = FileJournal(opts)
    try:
        return journal.load()
    finally:
        journal.close()


def ids(result: LoadResult) -> list[int]:
    return [r.id for r in result.records]


def kinds(report: repair.VerifyReport) -> list[tuple[str, str]]:
    return [(f.severity, f.kind) for f in report.findings]


# Three shapes of damage, all built by hand. File A: lsn 1..5; file B: lsn 6, 7 synced, then a
# batch 8..10 appended after lsn 7 was durable (durable_lsn 7).


def two_files() -> Builder:
    b = Builder().file(A).adds(5).file(B).adds(2)
    return b.rec(durable=7).rec(durable=7).rec(durable=7)


@pytest.fixture
def torn(tmp_path: Path) -> tuple[Path, Builder]:
    """The last write (lsn 8..10) torn: lsn 8 damaged, 9 and 10 intact, none proven durable."""
    b = two_files()
    paths = b.write(tmp_path / "j")
    flip(paths[1], b.offset(1, 2) + 60)
    return tmp_path / "j", b


@pytest.fixture
def corrupt_last(tmp_path: Path) -> tuple[Path, Builder]:
    """lsn 7 damaged, but lsn 8..10 were written after it was durable: corruption."""
    b = two_files()
    paths = b.write(tmp_path / "j")
    flip(paths[1], b.offset(1, 1) + 60)
    return tmp_path / "j", b


@pytest.fixture
def corrupt_middle(tmp_path: Path) -> tuple[Path, Builder]:
    """lsn 3 damaged in file A, which is not the last file: corruption."""
    b = two_files()
    paths = b.write(tmp_path / "j")
    flip(paths[0], b.offset(0, 2) + 60)
    return tmp_path / "j", b


# -- verify --------------------------------------------------------------------------------------


def test_verify_a_clean_journal_written_by_the_journal(tmp_path: Path) -> None:
    opts = FileJournalOptions(directory=str(tmp_path / "j"), file_size=SIZE)
    with FileJournal(opts) as j:
        j.load()
        for i in range(60):
            j.append_add(i, 1, b"x" * 100, sync=i % 7 == 0)
    report = repair.verify(str(tmp_path / "j"), kind=fmt.KIND_MESSAGES)
    assert report.ok and report.findings == []
    assert sum(f.records for f in report.files) == 60
    assert all(f.header == "ok" and f.torn_tail is None for f in report.files)
    assert load(tmp_path / "j").records == [RecordInfo(i, 1, b"x" * 100, False) for i in range(60)]


def test_verify_reports_a_torn_tail_as_a_warning(torn: tuple[Path, Builder]) -> None:
    directory, b = torn
    report = repair.verify(str(directory))
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
    report = repair.verify(str(directory))
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
    report = repair.verify(str(tmp_path / "j"))
    assert kinds(report) == [("error", "checksum")]
    assert report.findings[0].offset == b.offset(0, 2)
    with pytest.raises(ChecksumError):
        load(tmp_path / "j")
    # The same damage in the last file is only a torn tail.
    b = Builder().file(A).adds(2).adds(3, durable=2)
    paths = b.write(tmp_path / "k")
    flip(paths[0], b.offset(0, 2) + 60)
    assert kinds(repair.verify(str(tmp_path / "k"))) == [("warning", "torn-tail")]


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
    report = repair.verify(str(tmp_path / "j"))
    assert sorted(kinds(report)) == sorted([
        ("error", "checksum"), ("error", "checksum"), ("warning", "zero-header"),
        ("error", "bad-header"), ("warning", "leftover"),
    ])
    assert [f.header for f in report.files] == ["ok", "ok", "ok", "zero", "bad"]


def test_verify_flags_duplicate_ids_other_kinds_and_misnamed_files(tmp_path: Path) -> None:
    b = Builder().file(A).adds(2).file(B, header_id=A).adds(1)
    b.write(tmp_path / "j")
    other = Builder(kind=fmt.KIND_BINDINGS).file(C).adds(1)
    other.write(tmp_path / "j")
    report = repair.verify(str(tmp_path / "j"), kind=fmt.KIND_MESSAGES)
    assert sorted(kinds(report)) == [
        ("error", "duplicate-id"), ("error", "kind-mismatch"), ("warning", "name-mismatch"),
    ]


def test_verify_reports_stale_bytes_of_a_reused_file_as_information(tmp_path: Path) -> None:
    b = Builder().file(A).adds(3).rec(fid=999).rec(fid=999)
    b.write(tmp_path / "j")
    report = repair.verify(str(tmp_path / "j"))
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
    report = repair.verify(str(tmp_path / "j"))
    assert kinds(report) == [("warning", "control-file")]
    assert ("finishes" if committed else "discards") in report.findings[0].message


def test_verify_changes_nothing(
    torn: tuple[Path, Builder], corrupt_middle: tuple[Path, Builder]
) -> None:
    for directory, _b in (torn, corrupt_middle):
        before = snapshot(directory)
        repair.verify(str(directory))
        assert snapshot(directory) == before


def test_verify_of_a_missing_directory_is_a_warning(tmp_path: Path) -> None:
    report = repair.verify(str(tmp_path / "nope"))
    assert report.ok and kinds(report) == [("warning", "missing")]
    assert not (tmp_path / "nope").exists()


def test_verify_refuses_a_journal_held_open_for_writing_unless_forced(tmp_path: Path) -> None:
    opts = FileJournalOptions(directory=str(tmp_path / "j"), file_size=SIZE)
    with FileJournal(opts) as j:
        j.load()
        j.append_add(1, 1, b"x", sync=True)
        with pytest.raises(StoreLockedError) as info:
            repair.verify(str(tmp_path / "j"))
        assert info.value.holder is not None and f"pid={os.getpid()}" in info.value.holder
        assert repair.verify(str(tmp_path / "j"), force=True).ok
    assert repair.verify(str(tmp_path / "j")).ok  # released at close


def test_verify_refuses_a_journal_held_by_another_live_process(tmp_path: Path) -> None:
    directory = tmp_path / "j"
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys
            from store.file.journal import FileJournal
            from store.file.options import FileJournalOptions
            j = FileJournal(FileJournalOptions(directory={str(directory)!r}, file_size={SIZE}))
            j.load()
            print("ready", flush=True)
            sys.stdin.readline()
            j.close()
        """)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        with pytest.raises(StoreLockedError) as info:
            repair.verify(str(directory))
        assert f"pid={child.pid}" in (info.value.holder or "")
        with pytest.raises(StoreLockedError):
            repair.repair(str(directory))
    finally:
        assert child.stdin is not None
        child.stdin.write("\n")
        child.stdin.close()
        child.wait(timeout=30)
    assert repair.verify(str(directory)).ok


# -- repair --------------------------------------------------------------------------------------


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
    assert repair.verify(str(directory)).findings == [
        f for f in repair.verify(str(directory)).findings if f.kind == "backup"
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
        OsFileSystem(), naming,
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
    report = repair.verify(str(directory))
    assert kinds(report) == [("warning", "torn-tail")]
    assert repair.repair(str(directory)).cuts[0].offset == batch[0].offset
    assert ids(load(directory)) == list(range(10))


def test_repair_refuses_while_the_journal_is_open(tmp_path: Path) -> None:
    opts = FileJournalOptions(directory=str(tmp_path / "j"), file_size=SIZE)
    with FileJournal(opts) as j:
        j.load()
        with pytest.raises(StoreLockedError):
            repair.repair(str(tmp_path / "j"))


# -- the offline replay equals a load ------------------------------------------------------------


def test_offline_replay_fails_transactions_whose_record_count_does_not_match(
    tmp_path: Path,
) -> None:
    """A prepare or commit says how many of its transaction's records its file holds; when the
    count is off (records lost), the load reports the transaction failed, and so does the
    offline replay."""
    b = Builder().file(A).rec(id=1)
    b.rec(RecordType.ADD_TX, tx_id=9, id=90).rec(RecordType.COMMIT, tx_id=9, tx_count=2, body=b"")
    b.rec(RecordType.ADD_TX, tx_id=8, id=80).rec(RecordType.ADD_TX, tx_id=8, id=81)
    b.rec(RecordType.COMMIT, tx_id=8, tx_count=2, body=b"")
    b.rec(RecordType.ADD_TX, tx_id=7, id=70)
    b.rec(RecordType.PREPARE, tx_id=7, tx_count=0, body=b"xid-7")
    b.write(tmp_path / "j")
    offline = survey.scan_journal(str(tmp_path / "j"), replay=True)
    assert offline.replay is not None
    result = offline.replay.result()
    assert ids(result) == [1, 80, 81]
    assert sorted(result.failed) == [7, 9] and result.prepared == []
    assert result == load(tmp_path / "j")


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_offline_replay_returns_what_a_load_returns(tmp_path: Path, seed: int) -> None:
    """Random adds, updates, deletes and transactions (committed, rolled back, prepared, left
    open) written by the real journal: the read-only replay of print / recover agrees with
    FileJournal.load(), also across files."""
    rng = random.Random(seed)
    directory = tmp_path / "j"
    opts = FileJournalOptions(directory=str(directory), file_size=SIZE, compact_min_files=0)
    live: set[int] = set()
    with FileJournal(opts) as j:
        j.load()
        next_id = 1
        for tx in range(1, 40):
            op = rng.random()
            if op < 0.4 or not live:
                j.append_add(next_id, rng.randrange(256), rng.randbytes(rng.randrange(80)))
                live.add(next_id)
                next_id += 1
            elif op < 0.55:
                j.append_update(rng.choice(sorted(live)), 3, b"upd")
            elif op < 0.7:
                victim = rng.choice(sorted(live))
                j.append_delete(victim)
                live.discard(victim)
            else:
                added = []
                for _ in range(rng.randrange(1, 4)):
                    j.append_add_tx(tx, next_id, 5, rng.randbytes(30))
                    added.append(next_id)
                    next_id += 1
                gone = rng.choice(sorted(live)) if rng.random() < 0.5 else None
                if gone is not None:
                    j.append_delete_tx(tx, gone)
                end = rng.choice(["commit", "rollback", "prepare", "open"])
                if end == "commit":
                    j.append_commit(tx)
                    live.update(added)
                    live.discard(gone if gone is not None else 0)
                elif end == "rollback":
                    j.append_rollback(tx)
                elif end == "prepare":
                    j.append_prepare(tx, f"xid-{tx}".encode())
    offline = survey.scan_journal(str(directory), replay=True)
    assert offline.replay is not None
    assert offline.replay.result() == load(directory)


# -- compact_store -------------------------------------------------------------------------------


def test_compact_store_compacts_both_journals_and_keeps_the_data(tmp_path: Path) -> None:
    config = StoreConfig.from_mapping({
        "journal-directory": str(tmp_path / "j"), "bindings-directory": str(tmp_path / "b"),
        "journal-file-size": SIZE, "journal-type": "NIO", "journal-compact-min-files": 0,
    })
    with open_store(config) as s:
        s.messages.load()
        s.bindings.load()
        s.bindings.append_add(1, 21, b"queue")
        for i in range(200):
            s.messages.append_add(i, 45, b"m" * 40)
        for i in range(200):
            if i % 10:
                s.messages.append_delete(i)
        expected = [RecordInfo(i, 45, b"m" * 40, False) for i in range(0, 200, 10)]
    steps: list[str] = []
    results = repair.compact_store(config, on_step=steps.append)
    assert steps == ["loading bindings", "compacting bindings", "loading messages",
                     "compacting messages"]
    assert [r.journal for r in results] == ["bindings", "messages"]
    messages = results[1]
    assert messages.after.extra["data_files"] < messages.before.extra["data_files"]
    assert messages.after.bytes_live == messages.before.bytes_live
    with open_store(config) as s:
        assert s.messages.load().records == expected
        assert s.bindings.load().records == [RecordInfo(1, 21, b"queue", False)]


# -- recover -------------------------------------------------------------------------------------


def _retained(tmp_path: Path) -> tuple[FileJournalOptions, Path]:
    history = tmp_path / "history"
    opts = FileJournalOptions(
        directory=str(tmp_path / "j"), file_size=SIZE, compact_min_files=0,
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
    report = repair.recover(str(history), str(tmp_path / "t"), journal=opts.directory)
    expected = load(Path(opts.directory))
    assert expected.failed == [600]
    assert (report.records, report.prepared, report.deleted, report.events) == (
        len(expected.records), 1, 0, 0)
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
    report = repair.recover(
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
    report = repair.recover(str(history), str(tmp_path / "t"), journal=str(tmp_path / "j"),
                            undelete=True)
    assert report.generations == 2
    assert [s.file_id for s in report.sources] == [A, A + 1, A + 2, B]
    got = load(tmp_path / "t").records
    assert [r.id for r in got] == [1, 4, 2, 3]  # live 1, 4; then deleted 2 (gen 1), 3 (gen 2)


def test_recover_refuses_a_target_that_is_not_empty(tmp_path: Path) -> None:
    Builder().file(A).adds(1).write(tmp_path / "j")
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "something").write_text("x")
    with pytest.raises(ConfigError, match="not empty"):
        repair.recover(None, str(tmp_path / "t"), journal=str(tmp_path / "j"))
    with pytest.raises(ConfigError, match="no journal files"):
        repair.recover(str(tmp_path / "nothing"), str(tmp_path / "t2"))


def test_recover_reads_around_damage_and_reports_it(
    corrupt_middle: tuple[Path, Builder], tmp_path: Path
) -> None:
    directory, _b = corrupt_middle
    report = repair.recover(None, str(tmp_path / "t"), journal=str(directory))
    damaged = [s for s in report.sources if s.damage is not None]
    assert [s.file_id for s in damaged] == [A]
    assert ids(load(tmp_path / "t")) == [1, 2, 6, 7, 8, 9, 10]
