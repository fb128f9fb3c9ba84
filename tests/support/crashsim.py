"""Crash simulation for the file journal: a seeded random workload, snapshots at crash points,
and the check of every crash image against the reference model (docs/conventions.md#7).

How one run goes (:func:`record_run`):

1. A :class:`FaultFileSystem` watches every call. Before and after every ``datasync``, around
   every directory operation and ``fsync_dir``, and after a random share of the ``pwrite``
   calls it takes a :class:`~tests.support.faultfs.Snapshot` whose context is the pair
   ``(acked, issued)`` of the :class:`Ledger` at that instant.
2. :class:`Workload` threads make random valid calls (adds, updates, deletes, transactions that
   commit, roll back, prepare or stay open, flushes, sync futures, explicit compactions and
   reclaims; data 0..4 KiB) on a journal with small files, so files roll, reclaim runs and
   compaction triggers. Every call is recorded in the model *before* it reaches the journal,
   under one lock held around both, so the model's order is the journal's order and
   ``issued`` bounds what any snapshot can hold. An operation is acknowledged (``acked``) once
   a sync append that covers it returned, or a ``flush()`` / ``sync_future()`` started after
   it completed; waits for flushes happen outside the lock, so several threads share syncs.
3. Each snapshot is turned into crash images (:meth:`Snapshot.crash` with each
   :data:`~tests.support.faultfs.CrashMode`), and :func:`check_image` reopens the journal on each,
   loads, and asserts the invariant with ``JournalModel.check_crash_load``: the load is the
   effect of some prefix of the issued operations that contains every acknowledged one. Any
   ``CorruptionError`` is a failure (crash images only lose or tear unsynced writes). Leftover
   ``.cmp`` / ``.tmp`` / control files after the load are a failure too. For a share of the
   images, :func:`continue_after` keeps writing on the recovered journal, closes it, crashes
   again (everything must have survived a clean close) and checks the load exactly.

A failure names the seed and the crash point and writes a pickle of the crash state; running
the test again with ``STORE_CRASH_REPLAY=<that file>`` checks exactly that image
(:func:`replay`); ``STORE_CRASH_SEEDS=1,2,3`` reruns chosen seeds (the schedule of background
threads may shift crash points slightly; the pickle is exact).

Thread-safety: a :class:`Workload` is driven by one thread; workloads of one run share the
journal, the model and the ledger under the run's lock.
"""

from __future__ import annotations

import os
import pickle
import random
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from store.errors import CorruptionError, StoreError
from store.file.journal import FileJournal
from store.file.options import FileJournalOptions
from tests.support.faultfs import Call, CrashMode, FaultFileSystem, Snapshot
from tests.support.model import JournalModel, assert_load_equal

__all__ = [
    "DIRECTORY",
    "ENV_REPLAY",
    "ENV_SEEDS",
    "CrashFailure",
    "Ledger",
    "RunRecord",
    "RunSpec",
    "Workload",
    "check_image",
    "continue_after",
    "assert_no_leftovers",
    "leftovers",
    "open_journal",
    "record_run",
    "replay",
    "run_threads",
]

DIRECTORY = "/store/journal"
ENV_REPLAY = "STORE_CRASH_REPLAY"
ENV_SEEDS = "STORE_CRASH_SEEDS"

_MODES: tuple[CrashMode, ...] = ("drop", "prefix", "random", "reorder", "tear-last", "process")


class CrashFailure(AssertionError):
    """Raised when a crash image breaks the invariant; the message says how to replay it."""


@dataclass(frozen=True)
class RunSpec:
    """One seeded run: workload shape and journal options (every field has its default)."""

    seed: int
    threads: int = 1
    steps: int = 200  # workload steps per thread
    file_size: int = 16 * 1024
    buffer_timeout_ns: int = 0
    compact_min_files: int = 3
    compact_percentage: int = 40
    pool_files: int = -1
    write_crash_rate: float = 0.15  # share of pwrite calls that also get a snapshot
    # 1: NIO as it is; 512 or 4096: NIO pads every flush to that boundary as ASYNCIO does, so
    # crash images also hold padded flushes, among them pads shorter than a length field.
    alignment: int = 1

    @staticmethod
    def from_seed(seed: int, **overrides: Any) -> RunSpec:
        """Returns a spec whose shape (threads, file size, buffering, pool) the seed picks;
        runs with bigger files take more steps, so that every run rolls several files."""
        rng = random.Random(seed * 7919 + 1)
        threads = rng.choice((1, 1, 2, 3))
        file_size = rng.choice((8, 16, 32, 64)) * 1024
        spec = RunSpec(
            seed=seed,
            threads=threads,
            steps=200 * max(1, file_size // (16 * 1024 * threads)),
            file_size=file_size,
            buffer_timeout_ns=rng.choice((0, 0, 200_000, 2_000_000)),
            compact_min_files=rng.choice((0, 2, 3, 4)),
            compact_percentage=rng.choice((30, 50, 70)),
            pool_files=rng.choice((-1, 2, 4)),
        )
        # Drawn last so that every other field of a seed stays what it was before it existed.
        alignment = rng.choice((1, 1, 512, 4096))
        # A file holds its header block plus records of up to 4 KiB: at least 4 blocks.
        spec = replace(spec, alignment=min(alignment, max(512, file_size // 8)))
        return replace(spec, **overrides)

    def options(self, fs: FaultFileSystem) -> FileJournalOptions:
        """Returns the journal options of this run on ``fs``."""
        return FileJournalOptions(
            directory=DIRECTORY,
            file_size=self.file_size,
            min_files=2,
            pool_files=self.pool_files,
            buffer_timeout_ns=self.buffer_timeout_ns,
            compact_min_files=self.compact_min_files,
            compact_percentage=self.compact_percentage,
            fs=fs,
            io_alignment=0 if self.alignment == 1 else self.alignment,
        )


class Ledger:
    """``issued``: operations recorded (an upper bound of what the journal was given);
    ``acked``: operations known durable. Plain ints, read lock-free by snapshot hooks."""

    def __init__(self) -> None:
        self.issued = 0
        self.acked = 0

    def read(self) -> tuple[int, int]:
        """Returns (acked, issued); acked is read first so it never exceeds issued."""
        acked = self.acked
        return acked, self.issued


def open_journal(spec: RunSpec, fs: FaultFileSystem) -> FileJournal:
    """Returns a journal of ``spec`` on ``fs`` (not loaded). Raises what FileJournal raises."""
    return FileJournal(spec.options(fs))


def leftovers(fs: FaultFileSystem) -> list[str]:
    """Returns the names of in-flight files (``.cmp``, ``.tmp``, control file) in the journal."""
    return [n for n in fs.listdir(DIRECTORY) if n.endswith((".cmp", ".tmp", ".ctl", ".ctl.tmp"))]


def assert_no_leftovers(fs: FaultFileSystem) -> None:
    """Asserts that a CLOSED journal left no in-flight file (recovery removed those of the
    crash; a running journal makes .tmp / .cmp files in the background, so it is not asked).
    Returns None; raises AssertionError naming the files."""
    left = leftovers(fs)
    assert not left, f"in-flight files left after recovery and a clean close: {left}"


class Workload:
    """Random valid journal calls recorded in the model first (see the module docstring).

    Each workload owns the record ids and transaction ids from ``base``; several workloads on
    one journal never touch each other's ids, so their calls commute in the model.
    """

    def __init__(
        self,
        journal: FileJournal,
        model: JournalModel,
        *,
        lock: threading.Lock,
        ledger: Ledger,
        rng: random.Random,
        base: int,
    ) -> None:
        self.journal = journal
        self.model = model
        self.lock = lock
        self.ledger = ledger
        self.rng = rng
        self.next_id = base
        self.next_tx = base
        self.live: list[int] = []
        # tx id -> ((id, operation kind) it holds, prepared?); held ids are touched by nothing else
        self.txs: dict[int, tuple[list[tuple[int, str]], bool]] = {}
        self._adopt(base)

    def _adopt(self, base: int) -> None:
        """Takes over the ids and open transactions of this workload already in the model."""
        mine = range(base, base + 10_000_000)
        open_txs = {tx for tx in self.model.open_transactions() if tx in mine}
        held: dict[int, list[tuple[int, str]]] = {tx: [] for tx in open_txs}
        for op in self.model.ops:
            if op.id in mine:
                self.next_id = max(self.next_id, op.id + 1)
            if op.tx_id is not None and op.tx_id in mine:
                self.next_tx = max(self.next_tx, op.tx_id + 1)
                if op.tx_id in held and op.kind != "prepare":
                    held[op.tx_id].append((op.id, op.kind))
        reserved = {i for ids in held.values() for i, _kind in ids}
        self.live = [i for i in self.model.live_ids() if i in mine and i not in reserved]
        self.txs = {tx: (held[tx], self.model.is_prepared(tx)) for tx in open_txs}

    # -- one call, recorded then made ------------------------------------------------------

    def _do(self, name: str, *args: Any, sync: bool | None = None) -> None:
        """Records ``name(*args)`` in the model, then calls ``append_<name>`` on the journal
        (with ``sync`` when given); a sync call that returned acknowledges everything so far."""
        with self.lock:
            getattr(self.model, name)(*args)
            self.ledger.issued = self.model.op_count
            kw = {} if sync is None else {"sync": sync}
            getattr(self.journal, f"append_{name}")(*args, **kw)
            if sync:
                self._ack_locked(self.model.op_count)

    def _ack_locked(self, upto: int) -> None:
        if upto > self.model.acknowledged:
            self.model.acknowledge(upto)
            self.ledger.acked = upto

    def _wait_durable(self, use_future: bool) -> None:
        with self.lock:
            upto = self.model.op_count
        if use_future:
            self.journal.sync_future().result(timeout=60)
        else:
            self.journal.flush()
        with self.lock:
            self._ack_locked(upto)

    def _data(self) -> bytes:
        rng = self.rng
        roll = rng.random()
        n = (
            rng.randint(0, 64)
            if roll < 0.6
            else rng.randint(65, 1024)
            if roll < 0.9
            else rng.randint(1025, 4096)
        )
        return rng.randbytes(n)

    def _pop_live(self) -> int:
        """Returns a live id taken out of the free pool (callers check there is one)."""
        return self.live.pop(self.rng.randrange(len(self.live)))

    # -- the operations --------------------------------------------------------------------

    def step(self) -> None:
        """Makes one random call (or a few, for a transaction); returns None.

        Raises whatever the journal raises (StoreError on I/O failure)."""
        rng, j = self.rng, self.journal
        r = rng.random()
        sync = rng.random() < 0.3
        if r < 0.30 or not self.live:
            i, self.next_id = self.next_id, self.next_id + 1
            self._do("add", i, rng.randrange(256), self._data(), sync=sync)
            self.live.append(i)
        elif r < 0.42:
            i = self.live[rng.randrange(len(self.live))]
            self._do("update", i, rng.randrange(256), self._data(), sync=sync)
        elif r < 0.57:
            self._do("delete", self._pop_live(), sync=sync)
        elif r < 0.73:
            self._transaction()
        elif r < 0.83:
            self._finish_one()
        elif r < 0.90:
            self._wait_durable(use_future=False)
        elif r < 0.95:
            self._wait_durable(use_future=True)
        elif r < 0.97:
            j.compact()
        else:
            j.reclaim()

    def _transaction(self) -> None:
        rng = self.rng
        tx, self.next_tx = self.next_tx, self.next_tx + 1
        held: list[tuple[int, str]] = []
        for _ in range(rng.randint(0, 4)):
            kind = rng.random()
            if kind < 0.5 or not self.live:
                i, self.next_id = self.next_id, self.next_id + 1
                self._do("add_tx", tx, i, rng.randrange(256), self._data())
                held.append((i, "add_tx"))
            elif kind < 0.8:
                i = self._pop_live()
                self._do("update_tx", tx, i, rng.randrange(256), self._data())
                held.append((i, "update_tx"))
            else:
                i = self._pop_live()
                self._do("delete_tx", tx, i)
                held.append((i, "delete_tx"))
        if not held and rng.random() < 0.5:
            return  # a transaction with no records and no prepare does not exist
        self.txs[tx] = (held, False)
        # An empty transaction exists only once prepared (model rule 1).
        end = rng.random() if held else 0.8
        if end < 0.55:
            self._finish(tx, commit=True)
        elif end < 0.70:
            self._finish(tx, commit=False)
        elif end < 0.92:
            xid = rng.randbytes(rng.randint(1, 64))
            self._do("prepare", tx, xid, sync=rng.random() < 0.7)
            self.txs[tx] = (held, True)
        # else: left open; finished by a later step, or failed by a crash

    def _finish_one(self) -> None:
        if self.txs:
            tx = self.rng.choice(sorted(self.txs))
            self._finish(tx, commit=self.rng.random() < 0.6)

    def _finish(self, tx: int, *, commit: bool) -> None:
        held, _prepared = self.txs.pop(tx)
        self._do("commit" if commit else "rollback", tx, sync=self.rng.random() < 0.8)
        # Committed: what it added or updated is live. Rolled back: what it updated or
        # deleted is live again (those ids were live before), what it added never existed.
        gone = "delete_tx" if commit else "add_tx"
        self.live.extend(i for i, kind in held if kind != gone)


def run_threads(workloads: list[Workload], steps: int) -> None:
    """Runs ``steps`` steps of every workload, one thread each; returns None.

    Raises the first error a workload raised, or AssertionError if one hangs."""
    errors: list[BaseException] = []

    def body(w: Workload) -> None:
        try:
            for _ in range(steps):
                w.step()
        except BaseException as exc:  # handed to the caller below
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(w,), daemon=True) for w in workloads]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a workload thread hangs"
    if errors:
        raise errors[0]


@dataclass
class RunRecord:
    """What a recorded run leaves: its operations and its snapshots, in the order taken."""

    spec: RunSpec
    ops: list[Any]
    snapshots: list[Snapshot] = field(default_factory=list)
    seconds: float = 0.0
    compactions: int = 0  # compactions the live run made (automatic and explicit)
    files: int = 0  # journal files created or reused (header writes)


class _CrashPoints:
    """The watch hook of a recorded run: snapshots at crash points, counts header writes.

    Thread-safety: called under the fault file system's lock only."""

    def __init__(self, fs: FaultFileSystem, spec: RunSpec) -> None:
        self.fs = fs
        self.rate = spec.write_crash_rate
        self.sched = random.Random(spec.seed ^ 0x5EED)
        self.snapshots: list[Snapshot] = []
        self.headers = 0
        self._seen: set[tuple[int, int, Any]] = set()

    def __call__(self, call: Call) -> None:
        if call.kind == "pwrite" and call.phase == "after" and call.offset == 0:
            self.headers += 32 <= call.length <= 4096  # a header, maybe padded to the alignment
        if call.kind in ("datasync", "fsync_dir", "rename", "remove"):
            take = True
        else:
            take = (
                call.kind == "pwrite" and call.phase == "after" and self.sched.random() < self.rate
            )
        if take:
            name = os.path.basename(call.path)
            snap = self.fs.snapshot(f"{call.phase} {call.kind} (call {call.index}) {name}")
            key = (snap.seq, snap.unsynced, snap.context)
            if key not in self._seen:  # otherwise nothing changed since an earlier snapshot
                self._seen.add(key)
                self.snapshots.append(snap)


def record_run(spec: RunSpec) -> RunRecord:
    """Runs the workload of ``spec`` on a fresh fault file system, snapshotting crash points.

    Returns the run record. Raises what the journal raises (a failure of the live run)."""
    started = time.perf_counter()
    ledger = Ledger()
    fs = FaultFileSystem(context=ledger.read)
    fs.makedirs(DIRECTORY)
    points = _CrashPoints(fs, spec)
    model = JournalModel()
    journal = open_journal(spec, fs)
    journal.load()
    fs.watch(points)
    lock = threading.Lock()
    workloads = [
        Workload(
            journal,
            model,
            lock=lock,
            ledger=ledger,
            rng=random.Random(spec.seed * 1000 + t),
            base=(t + 1) * 10_000_000,
        )
        for t in range(spec.threads)
    ]
    try:
        run_threads(workloads, spec.steps)
    finally:
        journal.close()
    return RunRecord(
        spec,
        list(model.ops),
        points.snapshots,
        time.perf_counter() - started,
        compactions=journal.compactions,
        files=points.headers,
    )


def candidates(snapshots: list[Snapshot], rng: random.Random) -> list[tuple[int, CrashMode, int]]:
    """Returns every (snapshot index, mode, image seed) worth checking: each mode for a snapshot
    with unsynced state, one image for a snapshot with none (every mode gives the same)."""
    out: list[tuple[int, CrashMode, int]] = []
    for index, snap in enumerate(snapshots):
        modes: tuple[CrashMode, ...] = _MODES if snap.unsynced else ("process",)
        out.extend((index, mode, rng.randrange(1 << 30)) for mode in modes)
    return out


def check_image(
    spec: RunSpec, ops: list[Any], snap: Snapshot, mode: CrashMode, image_seed: int
) -> tuple[FileJournal, JournalModel, FaultFileSystem]:
    """Reopens the journal on one crash image of ``snap`` and checks the crash invariant.

    Returns the loaded journal, the model truncated to the prefix the load matched (with the
    reopen recorded) and the image. Raises CrashLoadMismatch / AssertionError / StoreError."""
    acked, issued = snap.context
    image = snap.crash(random.Random(image_seed), mode)
    journal = open_journal(spec, image)
    try:
        result = journal.load()
        model = JournalModel.from_ops(ops[:issued])
        k = model.check_crash_load(result, acked)
        model.truncate(k)
        model.restart()
    except BaseException:
        _close_quietly(journal)
        raise
    return journal, model, image


def continue_after(
    spec: RunSpec, journal: FileJournal, model: JournalModel, image: FaultFileSystem, seed: int
) -> None:
    """Keeps writing on a recovered journal, closes it, crashes (dropping everything unsynced)
    and checks the next load equals the model exactly; returns None. Raises AssertionError."""
    lock = threading.Lock()
    ledger = Ledger()
    rng = random.Random(seed)
    try:
        w = Workload(journal, model, lock=lock, ledger=ledger, rng=rng, base=10_000_000)
        for _ in range(25):
            w.step()
    finally:
        journal.close()
    assert_no_leftovers(image)
    again = image.crash(rng, "drop")
    reopened = open_journal(spec, again)
    try:
        assert_load_equal(reopened.load(), model.restart())
    finally:
        reopened.close()


def _close_quietly(journal: FileJournal) -> None:
    try:
        journal.close()
    except StoreError:
        pass


@dataclass
class CheckStats:
    """Counts of one checked run."""

    states: int = 0
    continued: int = 0
    snapshots: int = 0
    seconds: float = 0.0
    modes: dict[str, int] = field(default_factory=dict)


def check_run(
    record: RunRecord, dump_dir: Path, *, budget: int, continue_every: int = 6
) -> CheckStats:
    """Checks up to ``budget`` crash images of a recorded run, spread evenly over its crash
    points, continuing on every ``continue_every``-th recovered journal.

    Returns the counts. Raises CrashFailure naming the seed, the crash point and a replay file.
    """
    started = time.perf_counter()
    spec = record.spec
    todo = candidates(record.snapshots, random.Random(spec.seed ^ 0xC4A5))
    if len(todo) > budget:
        todo = [todo[i * len(todo) // budget] for i in range(budget)]
    stats = CheckStats(snapshots=len(record.snapshots))
    for index, mode, image_seed in todo:
        snap = record.snapshots[index]
        stats.states += 1
        stats.modes[mode] = stats.modes.get(mode, 0) + 1
        state = {
            "spec": spec,
            "ops": record.ops,
            "snapshot": snap,
            "mode": mode,
            "image_seed": image_seed,
        }
        try:
            journal, model, image = check_image(spec, record.ops, snap, mode, image_seed)
            if stats.states % continue_every == 0:
                stats.continued += 1
                continue_after(spec, journal, model, image, image_seed)
            else:
                journal.close()
                assert_no_leftovers(image)
        except (AssertionError, StoreError) as exc:
            raise _failure(exc, state, index, dump_dir) from exc
    stats.seconds = time.perf_counter() - started
    return stats


def _failure(exc: BaseException, state: dict[str, Any], index: int, dump_dir: Path) -> CrashFailure:
    spec: RunSpec = state["spec"]
    snap: Snapshot = state["snapshot"]
    dump_dir.mkdir(parents=True, exist_ok=True)
    path = dump_dir / f"crash-seed{spec.seed}-point{index}-{state['mode']}.pickle"
    with open(path, "wb") as f:
        pickle.dump(state, f)
    image = snap.crash(random.Random(state["image_seed"]), state["mode"])
    kind = (
        "journal bug: corruption reported on a crash image"
        if isinstance(exc, CorruptionError)
        else type(exc).__name__
    )
    return CrashFailure(
        f"{kind}: {exc}\n"
        f"  seed {spec.seed} ({spec}), crash point #{index}: {snap.label}, "
        f"acked/issued {snap.context}, {image.crash_report}\n"
        f"  replay exactly: {ENV_REPLAY}={path}; rerun the seed: {ENV_SEEDS}={spec.seed}"
    )


def replay(path: str) -> None:
    """Checks the crash state pickled in ``path`` again (with continuation); returns None.

    Raises what the check raises."""
    with open(path, "rb") as f:
        state = pickle.load(f)
    journal, model, image = check_image(
        state["spec"], state["ops"], state["snapshot"], state["mode"], state["image_seed"]
    )
    continue_after(state["spec"], journal, model, image, state["image_seed"])
