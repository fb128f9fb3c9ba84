"""store.file.survey: the read-only replay of ``store data print`` returns what a load returns."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from store.file import compact as compaction
from store.file import format as fmt
from store.file import survey, verify
from store.file.history import replay_history
from store.file.journal import FileJournal
from store.file.options import FileJournalOptions
from store.file.segments import SegmentNaming
from store.journal.api import LoadResult, RecordType
from tests.file.handbuilt import SIZE, A, Builder, ids, load
from tests.support.crashsim import DIRECTORY, RunSpec, candidates, open_journal, record_run
from tests.support.faultfs import FaultFileSystem, Snapshot

CONTROL = "data.compact.ctl"


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


# -- the offline view equals a load on crash images and compacted journals ------------------------


def _offline_equals_load(image: FaultFileSystem, spec: RunSpec, label: str) -> LoadResult:
    """What ``store data print`` reports for the journal on ``image`` (its library function,
    read-only) against what a load of the same image returns; returns the load's result."""
    js = survey.scan_journal(DIRECTORY, fs=image, replay=True, kind=fmt.KIND_MESSAGES)
    journal = open_journal(spec, image)
    try:
        loaded = journal.load()
    finally:
        journal.close()
    assert js.problems == [], label
    assert js.replay is not None
    offline = js.replay.result()
    assert offline.records == loaded.records, label
    assert offline.prepared == loaded.prepared, label
    assert offline.failed == loaded.failed, label
    return loaded


def _has_control(snap: Snapshot) -> bool:
    path = f"{DIRECTORY}/{CONTROL}"
    return path in snap.names or any(path in (op.path, op.dst) for op in snap.dir_ops)


@pytest.mark.parametrize("seed", [41, 42, 43])
def test_print_reports_what_a_load_returns_on_crash_images(seed: int) -> None:
    """Crash images of a workload that rolls, reclaims and compacts often (so some images hold
    an interrupted compaction: a control file, old files, ``.cmp`` files, torn tails): the
    records, prepared and failed transactions the offline replay reports equal the load's.

    Fails while the offline replay reads the directory as it lies: with a committed control
    file the load first finishes the compaction (old files gone, ``.cmp`` files renamed) and
    the offline view must see the journal the same way."""
    spec = RunSpec.from_seed(seed, steps=300, compact_min_files=2, compact_percentage=70)
    record = record_run(spec)
    todo = candidates(record.snapshots, random.Random(seed))
    budget = 60
    picked = [todo[i * len(todo) // budget] for i in range(budget)] if len(todo) > budget else todo
    interrupted = [index for index, _m, _s in todo if _has_control(record.snapshots[index])]
    picked += [t for t in todo if t[0] in interrupted[:: max(1, len(interrupted) // 20)]]
    assert interrupted, "no crash point inside a compaction: the test would prove nothing"
    for index, mode, image_seed in picked:
        snap = record.snapshots[index]
        image = snap.crash(random.Random(image_seed), mode)
        _offline_equals_load(image, spec, f"seed {seed} point {index} ({snap.label}) {mode}")


def test_print_reports_what_a_load_returns_on_a_compacted_journal() -> None:
    """A journal compacted (its output files hold compacted records with their own lsn run)
    and written to after: the offline replay equals the load."""
    spec = RunSpec(seed=7, file_size=16 * 1024, compact_min_files=0)
    fs = FaultFileSystem()
    fs.makedirs(DIRECTORY)
    journal = open_journal(spec, fs)
    journal.load()
    rng = random.Random(7)
    for i in range(600):
        journal.append_add(i, 1, rng.randbytes(rng.randrange(200)))
        if i % 3:
            journal.append_delete(i)
        if i % 50 == 0:
            journal.append_add_tx(10_000 + i, 20_000 + i, 2, b"tx")
            if i % 100:
                journal.append_prepare(10_000 + i, b"xid")
            else:
                journal.append_commit(10_000 + i)
    journal.compact()
    assert journal.compactions == 1
    for i in range(600, 700):
        journal.append_add(i, 1, b"after the compaction")
    journal.close()
    loaded = _offline_equals_load(fs, spec, "compacted")
    assert loaded.prepared and len(loaded.records) > 200


# -- the offline readers never write ---------------------------------------------------------------


def test_the_offline_readers_open_every_file_read_only() -> None:
    """print's, verify's and recover's reading of a journal (with a retention history and an
    interrupted compaction's control file) on a file system mounted read-only: nothing fails and
    no file is opened for writing.

    Fails while the offline readers open journal files read-write (the seam's only mode then):
    on a read-only file system ``store data verify`` and ``print`` failed with "Read-only file
    system"."""
    fs = FaultFileSystem()
    fs.makedirs(DIRECTORY)
    spec = RunSpec(seed=5, file_size=16 * 1024, compact_min_files=0)
    journal = open_journal(spec, fs)
    journal.load()
    for i in range(300):
        journal.append_add(i, 1, b"x" * 100)
    journal.close()
    naming = SegmentNaming(DIRECTORY, "data")
    compaction.write_control(fs, naming, compaction.ControlFile(["data-1.jrn"], ["data-2.jrn.cmp"]))
    writes: list[str] = []
    fs.watch(
        lambda call: (
            writes.append(call.path) if call.kind == "open" and not call.read_only else None
        )
    )
    fs.mount_read_only()

    report = verify.verify(DIRECTORY, fs=fs)
    js = survey.scan_journal(DIRECTORY, fs=fs, replay=True, keep_records=True)
    found = replay_history(None, DIRECTORY, fs=fs)
    size = survey.detect_file_size(DIRECTORY, fs=fs)

    assert writes == []
    assert report.ok and size == spec.file_size
    assert js.replay is not None and len(js.replay.result().records) == 300
    assert len(found.replay.result().records) == 300
