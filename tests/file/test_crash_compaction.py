"""Compaction interrupted by a crash (store/file/compact.py, steps 1-5 and ``finish_interrupted``).

Before compaction everything is flushed and acknowledged, and nothing is appended while it
runs, so after any crash inside it the reopened journal must load exactly what the model holds:
nothing lost, nothing resurrected, prepared transactions kept, open ones failed. Leftover
``.cmp`` / ``.tmp`` / control files must be gone after the load, and the journal must keep
working (append, clean close, power loss, reopen: equal to the model again).

The named steps use the fault file system's ``crash_at`` hooks to stop the machine inside
``compact()``; the exhaustive test crashes before and after every file-system call compaction
makes, with every crash mode.
"""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from store.errors import CorruptionError, StoreError
from store.file import compact as compact_module
from store.file import format as fmt
from store.file.journal import FileJournal
from store.file.options import FileJournalOptions
from store.file.reader import Cursor, scan
from store.file.segments import SegmentNaming
from store.fs import FileSystem
from tests.support.crashsim import (
    DIRECTORY,
    Ledger,
    RunSpec,
    Workload,
    assert_no_leftovers,
    continue_after,
    open_journal,
)
from tests.support.faultfs import Call, CrashMode, FaultFileSystem, Phase, Snapshot
from tests.support.model import JournalModel, assert_load_equal

CONTROL = "data.compact.ctl"


@dataclass
class Prepared:
    """A journal with several files of live and dead records, everything acknowledged."""

    spec: RunSpec
    fs: FaultFileSystem
    journal: object
    model: JournalModel


def prepare(seed: int) -> Prepared:
    """Returns a loaded journal after a seeded workload plus a prepared and an open
    transaction and a file-filling add/delete burst; everything flushed and acknowledged."""
    spec = RunSpec(seed=seed, file_size=8192, compact_min_files=0, buffer_timeout_ns=0)
    ledger = Ledger()
    fs = FaultFileSystem(context=ledger.read)
    fs.makedirs(DIRECTORY)
    journal = open_journal(spec, fs)
    journal.load()
    model = JournalModel()
    w = Workload(
        journal,
        model,
        lock=threading.Lock(),
        ledger=ledger,
        rng=random.Random(seed),
        base=10_000_000,
    )
    for _ in range(120):
        w.step()
    tx = 99_000_000
    for n, (kind, i) in enumerate([("add", 90_000_001), ("add", 90_000_002)]):
        model.add_tx(tx + n, i, 7, b"in a transaction")
        journal.append_add_tx(tx + n, i, 7, b"in a transaction")
        assert kind == "add"
    model.prepare(tx, b"xid-survives-compaction")
    journal.append_prepare(tx, b"xid-survives-compaction")  # tx + 1 stays open, unprepared
    for i in range(40):  # fill files, most of it dead: compaction has old files to remove
        model.add(80_000_000 + i, 3, bytes([i]) * 500)
        journal.append_add(80_000_000 + i, 3, bytes([i]) * 500)
    for i in range(40):
        if i % 8:
            model.delete(80_000_000 + i)
            journal.append_delete(80_000_000 + i)
    journal.flush()
    model.acknowledge()
    journal.reclaim()  # waits for background maintenance; nothing is left for it to do
    return Prepared(spec, fs, journal, model)


def check_recovery(p: Prepared, snap: Snapshot, mode: CrashMode, seed: int) -> None:
    """Reopens one crash image of ``snap``: the load must equal the model exactly, nothing
    in flight may be left, and the journal must keep working. Raises AssertionError."""
    image = snap.crash(random.Random(seed), mode)
    check_image_recovers(p, image, f"{snap.label}, {image.crash_report}", seed)


def check_image_recovers(
    p: Prepared,
    image: FaultFileSystem,
    label: str,
    seed: int,
    *,
    keep_writing: bool = True,
    reopened_before: bool = False,
) -> None:
    """Reopens the crash image ``image`` and checks it as :func:`check_recovery` says (with
    ``keep_writing`` False: load, close, no leftovers). ``reopened_before``: the image comes
    from inside an earlier open, whose ROLLBACK of the failed transactions may have reached
    the disk, so those may no longer be reported failed. Raises AssertionError naming
    ``label``."""
    reopened = open_journal(p.spec, image)
    model = JournalModel.from_ops(p.model.ops)
    try:
        result = reopened.load()
        expected = model.restart()
        if reopened_before:
            closed = [tx for tx in expected.failed if tx not in result.failed]
            expected = replace(expected, failed=[t for t in expected.failed if t not in closed])
        assert_load_equal(result, expected)
    except BaseException as exc:
        try:
            reopened.close()
        except StoreError:
            pass
        raise AssertionError(f"{label}: {exc}") from exc
    if keep_writing:
        continue_after(p.spec, reopened, model, image, seed)  # checks for leftovers once closed
    else:
        reopened.close()
        assert_no_leftovers(image)
    assert not image.exists(f"{DIRECTORY}/{CONTROL}"), label


def _close(journal: object) -> None:
    try:
        journal.close()  # type: ignore[attr-defined]
    except StoreError:
        pass  # a journal whose machine died reports it again on close


def _is_data(path: str) -> bool:
    return os.path.basename(path).startswith("data-") and path.endswith(".jrn")


# -- the named steps ----------------------------------------------------------------------------


def old_files(p: Prepared) -> set[str]:
    """Returns the names of the files a compaction may replace now: every data file, and the
    current file (in case the compactor rolls it first; if not, it is never touched)."""
    journal = p.journal
    segs = [*journal.data_files, journal.writer.current]  # type: ignore[attr-defined]
    return {os.path.basename(seg.path) for seg in segs}


def _ends(suffix: str) -> Callable[[set[str]], Callable[[str], bool]]:
    return lambda _old: lambda path: path.endswith(suffix)


def _old(old: set[str]) -> Callable[[str], bool]:
    """Matches a call on an old file: its removal, or a rename away from its name (recycling)."""
    return lambda path: os.path.basename(path) in old


_OLD_GONE = ("remove", "rename")  # how old files leave: deleted, or recycled into the pool

# step name -> (call kinds, nth, before/after, path matcher built from the old file names)
STEPS: dict[
    str, tuple[str | tuple[str, ...], int, Phase, Callable[[set[str]], Callable[[str], bool]]]
] = {
    # step 2 done, step 3 not started: the .cmp files exist, no control file
    "before the control file": ("open", 1, "before", _ends(".ctl.tmp")),
    # step 3: the control file written but not yet synced (a crash may tear it)
    "control file written, not synced": ("datasync", 1, "before", _ends(".ctl.tmp")),
    # step 3: renamed to its final name, the directory not yet synced
    "control file renamed, directory not synced": ("rename", 1, "after", _ends(".ctl.tmp")),
    # step 3 done (committed), step 5 not started
    "after the control file": (_OLD_GONE, 1, "before", _old),
    # step 5: some old files removed or recycled
    "after some old files were removed": (_OLD_GONE, 2, "after", _old),
    # step 5: some .cmp files renamed to their final names
    "after some renames": ("rename", 1, "after", _ends(".cmp")),
    # step 5: everything renamed, the control file not yet deleted
    "before the control file is deleted": ("remove", 1, "before", _ends(".ctl")),
}


@pytest.mark.parametrize("step", list(STEPS))
@pytest.mark.parametrize("seed", [11, 12])
def test_compaction_interrupted_at_a_step_recovers_exactly(step: str, seed: int) -> None:
    p = prepare(seed)
    old = old_files(p)
    assert len(old) >= 3, old
    kind, nth, when, matcher = STEPS[step]
    p.fs.crash_at(kind, nth, when=when, match=matcher(old))
    with pytest.raises(StoreError):
        p.journal.compact()  # type: ignore[attr-defined]
    _close(p.journal)
    assert p.fs.crash_points, f"compaction never reached {step!r}"
    snap = p.fs.crash_points[0]
    for n, mode in enumerate(
        ("drop", "process", "random", "reorder", "reorder", "prefix", "tear-last")
    ):
        check_recovery(p, snap, mode, seed * 100 + n)  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", [11, 12])
def test_a_torn_control_file_means_the_compaction_never_happened(seed: int) -> None:
    """A control file cut short (any prefix) does not verify: recovery deletes it and the
    .cmp files and keeps the old files, which still hold everything."""
    p = prepare(seed)
    # committed, no old file touched yet
    p.fs.crash_at(_OLD_GONE, 1, when="before", match=_old(old_files(p)))
    with pytest.raises(StoreError):
        p.journal.compact()  # type: ignore[attr-defined]
    _close(p.journal)
    committed = p.fs.crash_points[0].crash(random.Random(seed), "process")
    control = committed.read_file(f"{DIRECTORY}/{CONTROL}")
    assert control.endswith(b"\n") and b"crc " in control
    rng = random.Random(seed)
    for cut in sorted(
        {1, len(control) - 1, len(control) - 2, *rng.sample(range(1, len(control)), 6)}
    ):
        image = committed.crash(random.Random(0), "process")
        image.write_file(f"{DIRECTORY}/{CONTROL}", control[:cut])
        reopened = open_journal(p.spec, image)
        model = JournalModel.from_ops(p.model.ops)
        try:
            assert_load_equal(reopened.load(), model.restart())
        finally:
            reopened.close()
        assert_no_leftovers(image)
        assert not image.exists(f"{DIRECTORY}/{CONTROL}")


def test_an_empty_control_file_left_by_a_dying_process_is_ignored() -> None:
    """J-100: the process dies right after creating the control file (empty)."""
    p = prepare(13)
    p.fs.crash_at("truncate", 1, when="after", match=lambda path: path.endswith(".ctl.tmp"))
    with pytest.raises(StoreError):
        p.journal.compact()  # type: ignore[attr-defined]
    _close(p.journal)
    image = p.fs.crash_points[0].crash(random.Random(0), "process")
    image.write_file(f"{DIRECTORY}/{CONTROL}", b"")
    reopened = open_journal(p.spec, image)
    model = JournalModel.from_ops(p.model.ops)
    try:
        assert_load_equal(reopened.load(), model.restart())
    finally:
        reopened.close()
    assert_no_leftovers(image)
    assert not image.exists(f"{DIRECTORY}/{CONTROL}")


# -- every call ---------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [21, 22, 23])
def test_a_crash_at_any_call_inside_compaction_recovers_exactly(seed: int) -> None:
    p = prepare(seed)
    snaps: list[Snapshot] = []
    p.fs.watch(
        lambda c: snaps.append(p.fs.snapshot(f"{c.phase} {c.kind} {os.path.basename(c.path)}"))
    )
    p.journal.compact()  # type: ignore[attr-defined]
    p.fs.clear_faults()
    kinds = {s.label.split()[1] for s in snaps}
    assert {"rename", "remove", "fsync_dir", "datasync"} <= kinds, kinds
    rng = random.Random(seed)
    checked = 0
    for snap in snaps:
        modes: tuple[CrashMode, ...] = (
            ("drop", "random", "reorder", "prefix", "tear-last", "process")
            if snap.unsynced
            else ("process",)
        )
        for mode in modes:
            check_recovery(p, snap, mode, rng.randrange(1 << 30))
            checked += 1
    assert checked > 100
    _close(p.journal)
    reopened = open_journal(p.spec, p.fs)  # and the compaction that finished is right too
    try:
        assert_load_equal(reopened.load(), JournalModel.from_ops(p.model.ops).restart())
    finally:
        reopened.close()


# -- a crash inside the recovery at open -------------------------------------------------------


def _recovery_snapshots(
    p: Prepared, image: FaultFileSystem, monkeypatch: pytest.MonkeyPatch
) -> list[Snapshot]:
    """Opens and loads ``image`` (a journal with a committed, unfinished compaction) and
    returns a snapshot taken before and after every file-system call
    ``compact.finish_interrupted`` makes there, one per distinct state; the journal is closed
    again."""
    snaps: list[Snapshot] = []
    seen: set[tuple[int, int]] = set()
    inside = False
    real_finish = compact_module.finish_interrupted
    real_remove = compact_module.remove_control

    # The recovery is finish_interrupted() (old files removed, .cmp renamed, directory
    # synced) and, once the load made the change durable in a marker, remove_control(): both
    # are watched, and the marker's own write between them too.
    def finish_interrupted(
        fs: FileSystem, naming: SegmentNaming
    ) -> compact_module.ControlFile | None:
        nonlocal inside
        inside = True
        return real_finish(fs, naming)

    def remove_control(fs: FileSystem, naming: SegmentNaming) -> None:
        nonlocal inside
        try:
            real_remove(fs, naming)
        finally:
            inside = False

    def note(call: Call) -> None:
        if not inside:
            return
        snap = image.snapshot(f"{call.phase} {call.kind} {os.path.basename(call.path)}")
        if (snap.seq, snap.unsynced) not in seen:
            seen.add((snap.seq, snap.unsynced))
            snaps.append(snap)

    with monkeypatch.context() as patch:
        patch.setattr(compact_module, "finish_interrupted", finish_interrupted)
        patch.setattr(compact_module, "remove_control", remove_control)
        image.watch(note)
        journal = open_journal(p.spec, image)
        try:
            journal.load()
        finally:
            image.clear_faults()
            _close(journal)
    return snaps


def _recovery_images(snap: Snapshot, seed: int) -> list[tuple[str, FaultFileSystem]]:
    """Crash images of ``snap`` whose pending directory operations (recovery writes no data)
    are dropped, reordered or cut: every crash mode, every prefix (an ordered metadata journal
    cut anywhere), every set with one operation lost and every set with only one kept (plain
    POSIX: no order between unsynced directory operations). One image per distinct state."""
    rng = random.Random(seed)
    ops = snap.dir_ops
    kept_sets = [ops[:n] for n in range(len(ops) + 1)]
    kept_sets += [ops[:i] + ops[i + 1 :] for i in range(len(ops))]
    kept_sets += [(op,) for op in ops]
    images: list[tuple[str, FaultFileSystem]] = []
    for kept in kept_sets:
        image = replace(snap, dir_ops=kept).crash(rng, "process")
        names = [f"{op.kind} {os.path.basename(op.path)}" for op in kept]
        images.append((f"{snap.label}, directory operations kept: {names} of {len(ops)}", image))
    modes: tuple[CrashMode, ...] = ("drop", "process", "random", "prefix", "tear-last")
    for mode in modes + ("reorder",) * 4:
        image = snap.crash(rng, mode)
        images.append((f"{snap.label}, {image.crash_report}", image))
    unique: dict[tuple[tuple[str, bytes], ...], tuple[str, FaultFileSystem]] = {}
    for label, image in images:
        state = tuple(
            (name, image.read_file(f"{DIRECTORY}/{name}")) for name in image.listdir(DIRECTORY)
        )
        unique.setdefault(state, (label, image))
    return list(unique.values())


@pytest.mark.parametrize("step", ["after the control file", "after some renames"])
def test_a_crash_at_any_call_inside_the_recovery_at_open_recovers_exactly(
    step: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compaction committed (its control file durable) but not finished; the reopen's
    recovery removes the old files, renames the .cmp files, syncs the directory and only then
    deletes the control file. A crash at any call of that recovery, with its directory
    operations dropped, reordered or cut, must reopen to exactly the model, with no leftovers.

    Fails if the control file is deleted before the directory sync that makes the renames and
    removals durable: an image that keeps the deletion but loses a rename drops a compacted
    file as a leftover (records lost), or one that loses a removal keeps an old file
    (deleted records come back)."""
    p = prepare(11)
    kind, nth, when, matcher = STEPS[step]
    p.fs.crash_at(kind, nth, when=when, match=matcher(old_files(p)))
    with pytest.raises(StoreError):
        p.journal.compact()  # type: ignore[attr-defined]
    _close(p.journal)
    committed = p.fs.crash_points[0].crash(random.Random(0), "process")
    assert committed.exists(f"{DIRECTORY}/{CONTROL}")
    snaps = _recovery_snapshots(p, committed, monkeypatch)
    kinds = {s.label.split()[1] for s in snaps}
    assert {"remove", "fsync_dir"} <= kinds, kinds
    assert max(len(s.dir_ops) for s in snaps) >= 2
    checked = 0
    for n, snap in enumerate(snaps):
        for label, image in _recovery_images(snap, n):
            check_image_recovers(
                p, image, label, n, keep_writing=checked % 10 == 0, reopened_before=True
            )
            checked += 1
    assert checked >= 15, checked


# -- compaction must not skip what it cannot read -----------------------------------------------


def test_compaction_refuses_a_file_it_cannot_read_to_the_end() -> None:
    """A record damaged on disk (bit rot) in a finished file: compaction must report it
    (a CorruptionError naming the file) and keep the old files, never drop the records after
    the damage silently; the next load then reports the damage too.

    Fails while compact._replay_files reads old files with scan() alone: it stops at the
    damaged record and compaction writes, commits and deletes without everything after it."""
    p = prepare(31)
    journal = p.journal
    files = sorted(n for n in p.fs.listdir(DIRECTORY) if _is_data(n))
    victim = None
    for name in files[:-1]:
        raw = p.fs.read_file(f"{DIRECTORY}/{name}")
        header = fmt.decode_header(raw, name)
        records = scan(raw, header.file_id, Cursor()) if header else []
        if len(records) >= 3:
            victim = (name, records[1][0])
            break
    assert victim is not None
    name, offset = victim
    p.fs.corrupt(f"{DIRECTORY}/{name}", offset + 30)
    with pytest.raises(CorruptionError) as info:
        journal.compact()  # type: ignore[attr-defined]
    assert info.value.path == f"{DIRECTORY}/{name}"
    _close(journal)
    assert name in p.fs.listdir(DIRECTORY)
    reopened = open_journal(p.spec, p.fs)
    try:
        with pytest.raises(CorruptionError):
            reopened.load()
    finally:
        _close(reopened)


def test_the_watch_hook_sees_compaction_steps_in_order() -> None:
    """Guards the step table above: compaction writes .cmp files, then the control file,
    then removes or recycles the old files, renames .cmp files and deletes the control file,
    in that order."""
    p = prepare(11)
    old = old_files(p)
    seen: list[str] = []

    def note(call: Call) -> None:
        if call.phase != "after":
            return
        name = os.path.basename(call.dst or call.path)
        if call.kind == "rename" and name.endswith(".cmp"):
            seen.append("cmp written")
        elif call.kind == "rename" and name == CONTROL:
            seen.append("control committed")
        elif call.kind in _OLD_GONE and os.path.basename(call.path) in old:
            seen.append("old gone")
        elif call.kind == "rename" and os.path.basename(call.path).endswith(".cmp"):
            seen.append("cmp renamed")
        elif call.kind == "remove" and name == CONTROL:
            seen.append("control deleted")

    p.fs.watch(note)
    p.journal.compact()  # type: ignore[attr-defined]
    _close(p.journal)
    order = [s for i, s in enumerate(seen) if i == 0 or seen[i - 1] != s]
    assert order == [
        "cmp written",
        "control committed",
        "old gone",
        "cmp renamed",
        "control deleted",
    ]
    assert seen.count("old gone") >= 2


# -- real disk: every journal type after compaction and file reuse ------------------------------


@pytest.mark.parametrize("journal_type", ["NIO", "MAPPED", "ASYNCIO"])
def test_a_compacted_file_reused_by_the_writer_loads_after_a_clean_close(
    journal_type: str, tmp_path: Path
) -> None:
    """Compaction writes its files from the first byte after the header; once such a file is
    reclaimed and reused, the writer must leave it readable. A clean close must load.

    Fails for ASYNCIO while reused files are not re-zeroed and the aligned writer starts its
    first write at the 4096-byte boundary: the compacted records left in bytes 32..4095 of
    the reused file end the data at offset 32, so the load raises ChecksumError (or, in the
    last file, treats acknowledged records as a torn tail and drops them silently)."""

    def options() -> FileJournalOptions:
        return FileJournalOptions(
            directory=str(tmp_path / "journal"),
            journal_type=journal_type,
            file_size=64 * 1024,
            pool_files=-1,
            compact_min_files=0,
        )

    journal = FileJournal(options())
    journal.load()
    assert journal.backend is not None and journal.backend.name == journal_type
    model = JournalModel()

    def do(name: str, *args: object) -> None:
        getattr(model, name)(*args)
        getattr(journal, f"append_{name}")(*args)

    for i in range(1000):  # round 1: what compaction copies into files written from offset 32
        do("add", i, 1, bytes([i % 256]) * 300)
        if i % 10:
            do("delete", i)
    journal.compact()
    for i in model.live_ids():  # kill the compacted records: their file is reclaimed and reused
        do("delete", i)
    for i in range(1000, 1600):
        do("add", i, 1, bytes([i % 256]) * 300)
        if i % 10:
            do("delete", i)
        if i % 100 == 0:
            journal.reclaim()
    journal.close()
    reopened = FileJournal(options())
    try:
        assert_load_equal(reopened.load(), model.restart())
    finally:
        reopened.close()
