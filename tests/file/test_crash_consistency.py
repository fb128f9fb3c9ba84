"""Crash consistency of the native file journal (docs/conventions.md#7) on the fault file system.

The main test runs seeded random workloads (tests/support/crashsim.py) and checks thousands of
crash images: after reopening, every acknowledged operation is there, later ones may be
missing only from some point on, nothing deleted or rolled back comes back, transactions are
all or nothing, and the recovered journal keeps working through another clean close and power
loss. Crash images only lose or tear unsynced writes, so a CorruptionError on one is a journal
bug. The other tests pin down single rules: a flipped byte in synced data is a ChecksumError
naming the file and offset, a torn last write is not, and an I/O error loses nothing that
was acknowledged.

Replaying a failure: the message names the seed and the crash point and a pickle of the
crash state; ``STORE_CRASH_REPLAY=<pickle>`` adds a test that checks exactly that state, and
``STORE_CRASH_SEEDS=1,2`` runs chosen seeds instead of the CI ones.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import random
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from store.errors import ChecksumError, StoreError, StoreIOError
from store.file import format as fmt
from store.file import writer as writer_module
from store.file.journal import FileJournal
from store.file.options import FileJournalOptions
from store.file.reader import Cursor, scan
from store.journal.api import RecordType
from tests.support.crashsim import (
    DIRECTORY,
    ENV_REPLAY,
    ENV_SEEDS,
    Ledger,
    RunSpec,
    Workload,
    check_run,
    continue_after,
    open_journal,
    record_run,
    replay,
)
from tests.support.faultfs import Call, FaultFileSystem, Snapshot
from tests.support.model import JournalModel

# Seeds chosen so the runs cover 1, 2 and 3 writer threads, files of 8, 16, 32 and 64 KiB,
# buffered and unbuffered writes, automatic compaction on and off, bounded and unbounded pools.
CI_SEEDS = (1, 2, 3, 7, 8, 12, 14, 16, 27, 31, 36)
STATES_PER_SEED = 800  # crash images checked per seed (the budget)
MIN_STATES_PER_SEED = 700  # what every seed must reach
assert len(CI_SEEDS) * MIN_STATES_PER_SEED >= 5000, "CI must check at least 5,000 crash states"


def _seeds() -> tuple[int, ...]:
    raw = os.environ.get(ENV_SEEDS, "")
    return tuple(int(s) for s in raw.split(",") if s.strip()) or CI_SEEDS


_checked: dict[int, int] = {}  # seed -> crash states checked, for the module summary


@pytest.fixture(scope="module", autouse=True)
def _crash_state_summary(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if _checked:
        capman = request.config.pluginmanager.getplugin("capturemanager")
        with capman.global_and_fixture_disabled() if capman else contextlib.nullcontext():
            print(
                f"\n[crash] {sum(_checked.values())} crash states checked in total, "
                f"seeds {sorted(_checked)}"
            )


@pytest.mark.parametrize("seed", _seeds())
def test_every_crash_state_keeps_what_was_acknowledged_and_recovers(
    seed: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = record_run(RunSpec.from_seed(seed))
    stats = check_run(record, tmp_path / "crash-states", budget=STATES_PER_SEED)
    _checked[seed] = stats.states
    with capsys.disabled():
        print(
            f"\n[crash] seed {seed}: {stats.states} crash states checked "
            f"({stats.continued} continued) from {stats.snapshots} crash points of "
            f"{len(record.ops)} ops, {record.files} file headers written, "
            f"{record.compactions} compactions; modes {dict(sorted(stats.modes.items()))}; "
            f"{record.seconds + stats.seconds:.1f}s  [{record.spec}]"
        )
    assert stats.states >= MIN_STATES_PER_SEED, f"seed {seed}: only {stats.states} crash states"
    assert record.files > 3, f"seed {seed}: the workload never rolled files"


if os.environ.get(ENV_REPLAY):

    def test_replay_the_dumped_crash_state() -> None:
        """Checks the crash state named by STORE_CRASH_REPLAY (a pickle a failure wrote)."""
        replay(os.environ[ENV_REPLAY])


def test_the_ci_workloads_exercise_compaction_and_every_crash_mode() -> None:
    """The random workloads must reach what they are meant to test (a guard on crashsim)."""
    compactions = 0
    for seed in (1, 8, 12):
        record = record_run(RunSpec.from_seed(seed, steps=120))
        compactions += record.compactions
        kinds = {op.kind for op in record.ops}
        assert {"add", "update", "delete", "add_tx", "prepare", "commit", "rollback"} <= kinds
        assert any(s.unsynced for s in record.snapshots)
    assert compactions > 0


# -- helpers for the hand-made scenarios -------------------------------------------------------


def _journal(fs: FaultFileSystem, **kw: object) -> FileJournal:
    opts = {"file_size": 8192, "buffer_timeout_ns": 0, "compact_min_files": 0, **kw}
    return FileJournal(FileJournalOptions(directory=DIRECTORY, fs=fs, **opts))  # type: ignore[arg-type]


def _fresh() -> FaultFileSystem:
    fs = FaultFileSystem()
    fs.makedirs(DIRECTORY)
    return fs


def _records_of(fs: FaultFileSystem, name: str) -> list[tuple[int, int, int]]:
    """Returns (offset, length, lsn) of the records in sequence of one journal file."""
    raw = fs.read_file(f"{DIRECTORY}/{name}")
    header = fmt.decode_header(raw, name)
    assert header is not None
    return [(r[0], r[1], r[5]) for r in scan(raw, header.file_id, Cursor())]


def _data_files(fs: FaultFileSystem) -> list[str]:
    return sorted(n for n in fs.listdir(DIRECTORY) if n.endswith(".jrn"))


# -- corruption in synced data ------------------------------------------------------------------


@pytest.mark.parametrize("where", ["record head", "record body", "record checksum"])
@pytest.mark.parametrize("which_file", ["older file", "last file"])
def test_a_flipped_byte_in_synced_data_is_a_checksum_error_naming_file_and_offset(
    where: str, which_file: str
) -> None:
    fs = _fresh()
    journal = _journal(fs)
    journal.load()
    for i in range(120):  # ~3 files of 8 KiB, every record synced
        journal.append_add(i, 1, bytes([i % 251]) * 100, sync=True)
    journal.close()
    files = [n for n in _data_files(fs) if len(_records_of(fs, n)) > 2]
    name = files[0] if which_file == "older file" else files[-1]
    offset, length, _lsn = _records_of(fs, name)[1]  # a record with synced records after it
    flip = {"record head": 20, "record body": 60, "record checksum": length - 7}[where]
    fs.corrupt(f"{DIRECTORY}/{name}", offset + flip)
    reopened = _journal(fs)
    try:
        with pytest.raises(ChecksumError) as info:
            reopened.load()
    finally:
        reopened.close()
    assert info.value.path == f"{DIRECTORY}/{name}"
    assert info.value.offset == offset


def test_tearing_only_the_last_unsynced_write_loads_everything_acknowledged() -> None:
    """A crash that tears the last write (a record written but not synced) loses only it."""
    for seed in range(40):
        fs = _fresh()
        journal = _journal(fs, file_size=65536)
        journal.load()
        model = JournalModel()
        for i in range(20):
            model.add(i, 1, bytes(300))
            journal.append_add(i, 1, bytes(300), sync=True)
        model.acknowledge()
        big = random.Random(seed).randbytes(3000)  # spans several sectors
        model.add(99, 2, big)
        journal.append_add(99, 2, big)  # buffer timeout 0: written now, not synced
        image = fs.crash(random.Random(seed), "tear-last")
        journal.close()
        reopened = _journal(image, file_size=65536)
        try:
            result = reopened.load()
        finally:
            reopened.close()
        k = model.check_crash_load(result)
        assert k == 20, f"seed {seed}: the torn record was loaded ({image.crash_report})"


# -- minimal reproductions of journal bugs the random runs found ------------------------------


def test_appends_after_a_recovered_torn_tail_load_again() -> None:
    """A crash keeps a later unsynced record but not the one before it (a torn tail). Recovery
    ignores and zeroes the tail; what is appended next, then closed cleanly, must load.

    Fails while recovery resumes the lsn counter after the ignored tail's lsns: the next
    record then leaves an lsn gap at the end of data and claims durability of the missing
    lsns, and the next load raises ChecksumError on a cleanly closed journal."""
    fs = _fresh()
    writes: list[Call] = []
    journal = _journal(fs, file_size=65536)
    journal.load()
    for i in range(3):
        journal.append_add(i, 1, b"acked", sync=True)
    fs.watch(
        lambda c: (
            writes.append(c)
            if c.kind == "pwrite" and c.phase == "after" and c.length == fmt.OVERHEAD + 100
            else None
        )
    )
    journal.append_add(3, 1, b"x" * 100)  # each written at once (no buffering), not synced
    journal.append_add(4, 1, b"y" * 100)
    snap = fs.snapshot()
    journal.close()
    first, second = writes[0], writes[1]
    path = first.path.removesuffix(".tmp")  # handles keep the name they were opened under
    live = fs.read_file(path)
    image = _image_where(
        snap,
        lambda img: (
            img.read_file(path)[first.offset : first.offset + first.length]
            != live[first.offset : first.offset + first.length]
            and img.read_file(path)[second.offset : second.offset + second.length]
            == live[second.offset : second.offset + second.length]
        ),
    )
    recovered = _journal(image, file_size=65536)
    assert [r.id for r in recovered.load().records] == [0, 1, 2]
    recovered.append_add(5, 1, b"after recovery", sync=True)
    recovered.close()
    again = _journal(image, file_size=65536)
    try:
        assert [r.id for r in again.load().records] == [0, 1, 2, 5]
    finally:
        again.close()


def test_appends_after_a_torn_tail_just_before_a_padding_boundary_load_again() -> None:
    """The last good record ends 3 bytes before a 512-byte boundary; the crash loses the
    (unsynced) record after it but keeps a later one. Recovery must resume writing right after
    the last good record: what is appended and synced then must load after a clean close.

    Fails while scan() reports the end of data at the padding boundary it jumped to over the
    lost record's zeros: the writer resumes at 512, leaving a 3-byte gap that the padding rule
    cannot skip (it reads a 4-byte length, which then includes the new record's first byte),
    so the next load ends the data at 509 and silently drops the synced record as a torn tail
    (or raises ChecksumError once a later file exists)."""
    fs = _fresh()
    journal = _journal(fs, file_size=65536)
    journal.load()
    writes: list[Call] = []
    journal.append_add(0, 1, b"\x01" * 417, sync=True)  # 32 + 60 + 417: ends at 509
    fs.watch(
        lambda c: (
            writes.append(c)
            if c.kind == "pwrite" and c.phase == "after" and c.length == fmt.OVERHEAD + 100
            else None
        )
    )
    journal.append_add(1, 1, b"x" * 100)  # at 509, written at once, not synced
    journal.append_add(2, 1, b"y" * 100)  # at 669
    snap = fs.snapshot()
    journal.close()
    lost, kept = writes[0], writes[1]
    assert (lost.offset, kept.offset) == (509, 669)
    path = lost.path.removesuffix(".tmp")  # handles keep the name they were opened under
    live = fs.read_file(path)
    image = _image_where(
        snap,
        lambda img: (
            img.read_file(path)[509:669] == bytes(160)
            and img.read_file(path)[669:829] == live[669:829]
        ),
    )
    recovered = _journal(image, file_size=65536)
    assert [r.id for r in recovered.load().records] == [0]
    recovered.append_add(3, 1, b"after recovery", sync=True)
    recovered.close()
    again = _journal(image, file_size=65536)
    try:
        assert [r.id for r in again.load().records] == [0, 3]
    finally:
        again.close()


def _image_where(snap: Snapshot, wanted: Callable[[FaultFileSystem], bool]) -> FaultFileSystem:
    """Returns the first "random" crash image of ``snap`` (seeds 0, 1, …) ``wanted`` accepts."""
    for seed in range(2000):
        image = snap.crash(random.Random(seed), "random")
        if wanted(image):
            return image
    raise AssertionError("no crash image of the wanted shape in 2000 seeds")


def test_a_torn_header_rewrite_of_a_reused_file_is_not_corruption() -> None:
    """Reusing a file rewrites its header. A crash that tears that (unsynced) header write, or
    the header write of a new file, must not make the journal unloadable: a reused file held
    only dead records, a new one none.

    Fails while SegmentManager.stamp writes the new header over the old one under the file's
    final name: a torn header fails its checksum and the load raises CorruptionError."""
    ledger = Ledger()
    fs = FaultFileSystem(context=ledger.read)
    fs.makedirs(DIRECTORY)
    journal = _journal(fs, pool_files=-1)
    journal.load()
    model = JournalModel()

    def synced(name: str, *args: object) -> None:
        getattr(model, name)(*args)
        ledger.issued = model.op_count
        getattr(journal, f"append_{name}")(*args, sync=True)
        model.acknowledge()
        ledger.acked = model.op_count

    snaps: list[Snapshot] = []
    reused: list[str] = []

    def at_header_write(call: Call) -> None:
        if call.phase != "after":
            return
        if call.kind == "pwrite" and call.offset == 0 and 32 <= call.length <= 4096:
            # a header (possibly padded to the I/O alignment): of a new file or a reused one
            snaps.append(fs.snapshot(f"header write of {os.path.basename(call.path)}"))
        elif call.kind == "rename" and call.path.endswith(".jrn"):
            reused.append(call.path)  # a journal file renamed away: reclaimed for reuse

    fs.watch(at_header_write)
    for i in range(200):  # files of 8 KiB fill, their records die, they are reclaimed and reused
        data = bytes(200)
        synced("add", i, 1, data)
        if i >= 5:  # only the first file keeps live records
            synced("delete", i)
    journal.close()
    assert reused, "no file was reused"
    for seed, snap in enumerate(snaps):
        image = snap.crash(random.Random(seed), "tear-last")
        reopened = _journal(image, pool_files=-1)
        try:
            result = reopened.load()
        finally:
            reopened.close()
        acked, issued = snap.context
        JournalModel.from_ops(model.ops[:issued]).check_crash_load(result, acked)


def _waiting_in(thread: threading.Thread, function: str) -> bool:
    """Returns True if ``thread`` is currently inside a call of ``function``."""
    frame = sys._current_frames().get(thread.ident or 0)
    while frame is not None:
        if frame.f_code.co_name == function:
            return True
        frame = frame.f_back
    return False


def test_an_append_that_waited_for_a_compaction_stays_in_the_index() -> None:
    """An append blocked by compaction's pause must land in the index compaction installs
    (regression: it used to capture the old index before waiting, so the id was unknown
    afterwards and its file's reclaim counts were wrong)."""
    fs = _fresh()
    journal = _journal(fs)
    journal.load()
    for i in range(40):
        journal.append_add(i, 1, bytes(300), sync=True)
        if i % 4:
            journal.append_delete(i, sync=True)
    appender: list[threading.Thread] = []

    def during_compaction(call: Call) -> None:
        # The compactor has paused appenders and is writing its .cmp files.
        if call.kind == "rename" and call.dst.endswith(".cmp") and not appender:
            t = threading.Thread(
                target=lambda: journal.append_add(1000, 1, b"late", sync=True), daemon=True
            )
            appender.append(t)
            t.start()
            for _ in range(500):
                if _waiting_in(t, "check_locked"):
                    break
                time.sleep(0.01)
            assert _waiting_in(t, "check_locked"), "the appender did not wait for compaction"

    fs.watch(during_compaction)
    journal.compact()
    fs.clear_faults()
    assert appender, "compaction wrote no .cmp file"
    appender[0].join(10)
    assert not appender[0].is_alive()
    journal.append_update(1000, 1, b"updated", sync=True)  # UnknownRecordError if lost
    journal.close()
    reopened = _journal(fs)
    try:
        loaded = [(r.id, r.data) for r in reopened.load().records if r.id == 1000]
    finally:
        reopened.close()
    assert loaded == [(1000, b"late"), (1000, b"updated")]


# -- group commit: an acknowledgement only after the sync -------------------------------------


class _Acks:
    """Acknowledgements as they happen, and a snapshot of the file system at each of them and
    just before each datasync. ``lsn``: the highest lsn a released follower waited for (every
    record up to it acknowledged); ``ids``: records whose own sync call returned or whose sync
    future completed. An acknowledgement is noted before its snapshot is taken, so that
    snapshot's context (read under the file system's lock) holds it.

    Thread-safety: ``lock`` guards the notes; it is never held while taking a snapshot (the
    datasync hook snapshots under the file system's lock, so the other order would deadlock).
    """

    def __init__(self, fs: FaultFileSystem) -> None:
        self.fs = fs
        self.lock = threading.Lock()
        self.lsn = 0
        self.ids: list[int] = []
        self.followers = 0
        self.snapshots: list[Snapshot] = []

    def context(self) -> tuple[int, tuple[int, ...]]:
        with self.lock:
            return self.lsn, tuple(self.ids)

    def snap(self, label: str) -> None:
        snap = self.fs.snapshot(label)
        with self.lock:
            self.snapshots.append(snap)

    def follower(self, lsn: int) -> None:
        with self.lock:
            self.followers += 1
            self.lsn = max(self.lsn, lsn)
        self.snap(f"follower released (lsn {lsn})")

    def record(self, id: int, how: str) -> None:
        with self.lock:
            self.ids.append(id)
        self.snap(f"{how} of id {id}")


def _ack_at_release(acks: _Acks) -> type[writer_module.Waiter]:
    """A Waiter whose release by the flusher records the acknowledgement at that instant (a
    waiter released to become the next leader is not acknowledged: it syncs itself)."""

    class Release:
        def __init__(self, waiter: writer_module.Waiter) -> None:
            self.waiter = waiter
            self.inner = threading.Lock()
            self.inner.acquire()

        def acquire(self) -> bool:
            return self.inner.acquire()

        def release(self) -> None:
            if not self.waiter.leader:
                acks.follower(self.waiter.lsn)
            self.inner.release()

    class AckingWaiter(writer_module.Waiter):
        def __init__(self, lsn: int) -> None:
            super().__init__(lsn)
            self.lock = Release(self)  # type: ignore[assignment]

    return AckingWaiter


def _future_done(acks: _Acks, id: int, _future: object) -> None:
    acks.record(id, "sync future")


def test_sync_appends_are_acknowledged_only_after_the_datasync_that_covers_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Threads make sync appends and sync futures; every acknowledgement is recorded the
    instant it is given (a follower's release by the flusher, a leader's return, a future's
    completion) together with a snapshot, and snapshots are also taken just before each
    datasync. A crash that drops everything unsynced at any of those points must keep every
    acknowledged record and every record appended before it (docs/journal.md, ``sync=True``).

    Fails if the writer releases waiters (or completes futures) before the datasync."""
    fs = _fresh()
    acks = _Acks(fs)
    fs.context = acks.context
    monkeypatch.setattr(writer_module, "Waiter", _ack_at_release(acks))

    def before_sync(call: Call) -> None:
        if call.kind == "datasync" and call.phase == "before":
            acks.snap(f"before datasync (call {call.index})")
            time.sleep(0.001)  # let other appenders queue up behind this sync as followers

    journal = _journal(fs, file_size=16 * 1024)
    journal.load()
    fs.watch(before_sync)

    def appender(t: int) -> None:
        rng = random.Random(t)
        for n in range(40):
            i = t * 1000 + n
            data = bytes([t]) * rng.randint(20, 400)
            if n % 5 == 4:
                journal.append_add(i, 1, data)
                fut = journal.sync_future()
                fut.add_done_callback(functools.partial(_future_done, acks, i))
                fut.result(timeout=30)
            else:
                journal.append_add(i, 1, data, sync=True)
                acks.record(i, "sync append returned")

    threads = [threading.Thread(target=appender, args=(t,), daemon=True) for t in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "an appender hangs"
    fs.clear_faults()
    journal.close()
    assert acks.followers >= 5, f"only {acks.followers} followers were released: no group commit"

    lsn_of: dict[int, int] = {}
    for name in _data_files(fs):
        raw = fs.read_file(f"{DIRECTORY}/{name}")
        header = fmt.decode_header(raw, name)
        assert header is not None
        records = scan(raw, header.file_id, Cursor())
        # File-list markers (EVENT records the journal writes itself) are not appends.
        lsn_of.update((r[6], r[5]) for r in records if r[2] != int(RecordType.EVENT))
    assert len(lsn_of) == 160
    checked = 0
    for n, snap in enumerate(acks.snapshots):
        upto, ids = snap.context
        upto = max([upto, *(lsn_of[i] for i in ids)])
        must = {i for i, lsn in lsn_of.items() if lsn <= upto}
        for mode in ("drop", "reorder"):
            image = snap.crash(random.Random(n), mode)  # type: ignore[arg-type]
            reopened = _journal(image, file_size=16 * 1024)
            try:
                loaded = {r.id for r in reopened.load().records}
            finally:
                reopened.close()
            lost = sorted(must - loaded, key=lsn_of.__getitem__)
            assert not lost, (
                f"{snap.label}: acknowledged up to lsn {upto}, but ids {lost} "
                f"(lsns {[lsn_of[i] for i in lost]}) were lost ({image.crash_report})"
            )
            checked += 1
    assert checked >= 300, checked


# -- I/O errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "nth", "err"),
    [
        pytest.param("pwrite", 40, errno.ENOSPC, id="pwrite-ENOSPC"),
        pytest.param("pwrite", 90, errno.EIO, id="pwrite-EIO"),
        pytest.param("datasync", 25, errno.EIO, id="datasync-EIO"),
        pytest.param("allocate", 3, errno.ENOSPC, id="allocate-ENOSPC"),
        pytest.param("truncate", 3, errno.EIO, id="truncate-EIO"),
        pytest.param("open", 4, errno.EMFILE, id="open-EMFILE"),
        pytest.param("rename", 3, errno.EIO, id="rename-EIO"),
        pytest.param("fsync_dir", 3, errno.EIO, id="fsync_dir-EIO"),
    ],
)
def test_an_io_error_surfaces_and_loses_nothing_acknowledged(kind: str, nth: int, err: int) -> None:
    """The Nth call of one kind fails from then on (a full or broken disk): the error reaches
    an appender as StoreIOError, and after a power loss and a reopen on a repaired disk every
    acknowledged operation is there and the journal works."""
    spec = RunSpec(seed=nth, file_size=8192, compact_min_files=2)
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
        rng=random.Random(nth),
        base=10_000_000,
    )
    fs.fail(kind, nth, err=err, times=None)
    surfaced: StoreError | None = None
    for _ in range(400):
        try:
            w.step()
        except StoreError as exc:
            surfaced = exc
            break
    assert isinstance(surfaced, StoreIOError), f"the {kind} failure never reached a caller"
    if kind in ("pwrite", "datasync"):
        fs.clear_faults()  # a failed write or sync is never retried as if it had worked
        with pytest.raises(StoreIOError):
            journal.append_add(1, 1, b"after the failure", sync=True)
    snap = fs.snapshot("after the failure")
    fs.clear_faults()
    try:
        journal.close()
    except StoreError:
        pass  # closing a failed journal reports the failure again
    for seed, mode in enumerate(("drop", "random", "process")):
        image = snap.crash(random.Random(seed), mode)  # type: ignore[arg-type]
        reopened = open_journal(spec, image)
        result = reopened.load()
        check = JournalModel.from_ops(model.ops)
        check.acknowledge(model.acknowledged)
        k = check.check_crash_load(result)
        check.truncate(k)
        check.restart()
        continue_after(spec, reopened, check, image, seed)
