"""The main job, ``store perf``, and Artemis's sync-rate probe, ``store perf-journal``.

:func:`run_perf` runs a messaging-shaped workload on any store (file, database, zero
persistence) and checks that it recovers::

    from store.perf import PerfOptions, default_config, run_perf

    result = run_perf(default_config("data"), PerfOptions(seconds=10, threads=8))
    assert result.verified

Phases: open the store and load both journals; pick a fresh id range above every id (record
and transaction) the loads returned, so perf's records can never clash with a user's data in
the same store; let ``threads`` writers append to the message journal at once (adds, updates,
deletes, and transactions of adds and ``update_tx`` that are committed, rolled back, or
prepared and then committed), timing every sync append and every prepare / commit / rollback;
flush the message journal (the write phase ends when everything appended is durable); close
the store, reopen it and load it; verify that every record acknowledged as durable is
back with its exact bytes, and that nothing in perf's id range that was deleted or rolled back
came back; finally delete perf's records (unless ``keep``) and close.

Decisions:

- "Acknowledged as durable" is every append that returned: with ``sync`` at its return, without
  it at the final ``flush()`` that ends the write phase.
- The throughput figure (``records_per_second``) counts the write phase until that flush
  returned: without ``sync``, a store that queues appends faster than it makes them durable
  is measured at the rate it makes them durable, drain included, not at the rate it queues
  them. The appends-only figure (``append_records_per_second``, until the last append
  returned) is kept beside it, labelled as such. Zero persistence keeps nothing, so there the
  check is that nothing comes back.
- Payloads are ``shake_128(salt, id, version)`` of the record's size, so verification compares
  exact bytes while perf keeps only sizes in memory (``salt`` comes from ``seed``).
- perf's records use the user record types :data:`PERF_ADD_TYPE` / :data:`PERF_UPDATE_TYPE`,
  which no Artemis storage manager writes, so records kept with ``keep`` are easy to tell apart.
- Each writer owns its ids (a sliding window of at most ``window`` live records, deleted oldest
  first as a broker acknowledges messages), so every id's expected history is exact.
- ``store perf-journal`` (:func:`run_perf_journal`) writes through the journal's own NIO and
  MAPPED back-ends; for ASYNCIO it drives libaio itself with up to ``max_aio`` writes in flight
  (one with ``sync_writes``), which the journal's one-flush-at-a-time back-end cannot express.

Size: past the usual ~600 lines because the brief that created it gives the main job one
library module; the perf-journal half (from ``PerfJournalOptions`` down) shares nothing with
the workload and is the natural split (``store/perf_journal.py``) when the module grows.

Library code never prints: each phase's end is logged at INFO (``perf phase=<name>
seconds=<s>``), and progress reaches the caller through the ``progress`` callback, which is
called in the caller's thread.

Thread-safety: :func:`run_perf` and :func:`run_perf_journal` may run in any thread; each run
owns its store and threads. The option and result classes are immutable.
"""

from __future__ import annotations

import collections
import hashlib
import logging
import math
import mmap
import os
import random
import struct
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from store.config import StoreConfig
from store.errors import StoreError, StoreIOError
from store.file.io import AsyncIOBackend, IOBackend, make_backend
from store.file.journal import FileJournal
from store.file.segments import Segment
from store.fs import OsFileSystem
from store.journal.api import MAX_ID, MIN_ID, Journal, JournalStats, LoadResult
from store.sizes import invalid
from store.store import Store, open_store

__all__ = [
    "PERF_ADD_TYPE",
    "PERF_UPDATE_TYPE",
    "LatencySummary",
    "PerfJournalOptions",
    "PerfJournalResult",
    "PerfOptions",
    "PerfProgress",
    "PerfResult",
    "Verification",
    "default_config",
    "remove_perf_records",
    "run_perf",
    "run_perf_journal",
]

log = logging.getLogger(__name__)

#: User record type of perf's adds (outside Artemis's table of record types).
PERF_ADD_TYPE = 250
#: User record type of perf's updates.
PERF_UPDATE_TYPE = 251
# Ids reserved for one run; far more than any run can use, small next to the 64-bit id space.
_ID_SPAN = 1 << 40
_ID_BLOCK = 1024  # ids a writer takes from the shared allocator at a time
_KEY = struct.Struct(">qI")  # (id, version): what a payload is derived from
_MAX_PROBLEMS = 20  # findings described one by one; the counts are always complete
_TICK = 0.2  # seconds between progress reports while writers run
# Timed calls: sync non-transactional appends, and the three ends of a transaction.
_LATENCY_GROUPS = ("append", "commit", "prepare", "rollback")


# --------------------------------------------------------------------------- options, results


@dataclass(frozen=True, kw_only=True)
class PerfOptions:
    """What :func:`run_perf` does. Each field gives its default and its trade-off."""

    #: Default 10. How long writers run; ignored when ``records`` is set.
    seconds: float = 10.0
    #: Default None. Stop after about this many journal records instead of after ``seconds``
    #: (every add, update, delete, transactional record and prepare / commit / rollback counts).
    records: int | None = None
    #: Default 8. Concurrent writers: more share each sync (group commit) but contend more.
    threads: int = 8
    #: Default 100, 1024 and 10240 bytes. Record sizes, each record picks one at random.
    sizes: tuple[int, ...] = (100, 1024, 10240)
    #: Default 0.2. Share of operations that are transactions (0 to 1).
    tx_ratio: float = 0.2
    #: Default True. Appends wait until durable; False measures appends that never wait.
    sync: bool = True
    #: Default False. Leave perf's records in the store instead of deleting them at the end.
    keep: bool = False
    #: Default None (a random seed, reported in the result). Fixes operations and payloads.
    seed: int | None = None
    #: Default 2000. Live records per writer before it deletes its oldest: more keeps more
    #: data on disk to verify, fewer makes the journal reclaim files sooner.
    window: int = 2000
    #: Default None. Called with the configuration after the store is closed and before it is
    #: reopened for verification; tests use it to damage the store for real.
    between_runs: Callable[[StoreConfig], None] | None = None

    def __post_init__(self) -> None:
        if not self.seconds > 0:
            raise invalid("--seconds", self.seconds, "a number of seconds above 0")
        if self.records is not None and self.records < 1:
            raise invalid("--records", self.records, "a count of 1 or more")
        if not 1 <= self.threads <= 1024:
            raise invalid("--threads", self.threads, "1 to 1024 writers")
        if not self.sizes:
            raise invalid("--sizes", "", "one or more sizes from 0 bytes to 1G")
        for size in self.sizes:
            if not 0 <= size <= 1 << 30:
                raise invalid("--sizes", f"{size} bytes", "one or more sizes from 0 bytes to 1G")
        if not 0.0 <= self.tx_ratio <= 1.0:
            raise invalid("--tx-ratio", self.tx_ratio, "a share from 0 to 1")
        if self.window < 1:
            raise invalid("window", self.window, "1 or more live records per writer")


@dataclass(frozen=True, slots=True)
class PerfProgress:
    """One progress report: the phase, seconds since it began, records written so far, and
    the share done (None when the phase cannot tell)."""

    phase: str
    elapsed: float
    records: int
    fraction: float | None


@dataclass(frozen=True, slots=True)
class LatencySummary:
    """Latency of one kind of call, in milliseconds (nearest-rank percentiles)."""

    count: int
    p50: float
    p90: float
    p99: float
    p999: float
    max: float

    @staticmethod
    def of(samples_ns: list[int]) -> LatencySummary:
        """Summarise raw samples in nanoseconds. Returns the summary. Raises nothing."""
        data = sorted(samples_ns)
        n = len(data)

        def rank(p: float) -> float:
            return data[max(0, math.ceil(n * p / 100) - 1)] / 1e6 if n else 0.0

        return LatencySummary(
            count=n, p50=rank(50), p90=rank(90), p99=rank(99), p999=rank(99.9), max=rank(100)
        )


@dataclass(frozen=True, kw_only=True)
class Verification:
    """What the reopened store held of perf's records.

    ``checked`` ids were acknowledged live; ``missing`` of them did not come back,
    ``mismatched`` came back with other bytes, types or history; ``unexpected`` ids (or
    prepared transactions) in perf's range came back although deleted, rolled back or never
    acknowledged. ``durable`` is False for zero persistence, where nothing is expected back.
    """

    durable: bool
    checked: int
    missing: int
    mismatched: int
    unexpected: int
    problems: tuple[str, ...] = ()

    @property
    def verified(self) -> bool:
        """True when nothing is missing, mismatched or unexpected."""
        return self.missing == 0 and self.mismatched == 0 and self.unexpected == 0


@dataclass(frozen=True, kw_only=True)
class PerfResult:
    """The figures of one :func:`run_perf` (times in seconds, latencies in milliseconds)."""

    store: str  #: "file", "database" or "none"
    journal_type: str | None  #: the message journal's effective type (file store)
    location: str  #: journal folder, or the database kind
    threads: int
    sizes: tuple[int, ...]
    tx_ratio: float
    sync: bool
    seed: int
    records_before: int  #: records the message journal held before the run
    first_id: int  #: perf's ids are first_id .. last_id
    last_id: int
    #: the write phase: from the first append until everything appended was durable (the
    #: final flush returned); the throughput figures count this time
    write_seconds: float
    #: from the first append until the last append returned (the drain not included)
    append_seconds: float
    records: int  #: journal records appended
    payload_bytes: int  #: bytes of record data appended
    operations: dict[str, int]
    latency: dict[str, LatencySummary]
    load_seconds: float
    close_seconds: float
    reopen_seconds: float  #: open and load of the reopened store (recovery time)
    verify_seconds: float
    cleanup_seconds: float
    kept: bool  #: perf's records were left in the store (the ``keep`` option)
    removed: int  #: perf's records deleted at the end (0 when kept)
    journal_stats: JournalStats  #: the message journal at the end of the write phase
    verification: Verification

    @property
    def verified(self) -> bool:
        """True when the reopened store held exactly what was acknowledged."""
        return self.verification.verified

    @property
    def records_per_second(self) -> float:
        """Journal records appended per second of the write phase (until durable)."""
        return self.records / self.write_seconds if self.write_seconds > 0 else 0.0

    @property
    def append_records_per_second(self) -> float:
        """Journal records appended per second until the last append returned (without
        ``sync``, not yet durable then: the drain is left out)."""
        return self.records / self.append_seconds if self.append_seconds > 0 else 0.0

    @property
    def mb_per_second(self) -> float:
        """Record data appended, in MB (10^6 bytes) per second of the write phase."""
        return self.payload_bytes / 1e6 / self.write_seconds if self.write_seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        """Returns the result as JSON-ready data, derived figures included. Raises nothing."""
        data = asdict(self)
        data["records_per_second"] = self.records_per_second
        data["append_records_per_second"] = self.append_records_per_second
        data["mb_per_second"] = self.mb_per_second
        data["verified"] = self.verified
        return data


def default_config(data_dir: str | os.PathLike[str] = "data") -> StoreConfig:
    """The embedded default store: the file store with every folder under ``data_dir``.

    ``journal-type`` keeps its default (ASYNCIO, falling back to NIO by itself). Returns the
    configuration, folders made absolute against the current directory. Raises ConfigError.
    """
    base = os.path.abspath(os.fspath(data_dir))
    return StoreConfig.from_mapping(
        {
            "bindings-directory": os.path.join(base, "bindings"),
            "journal-directory": os.path.join(base, "journal"),
            "large-messages-directory": os.path.join(base, "largemessages"),
            "paging-directory": os.path.join(base, "paging"),
        }
    )


# --------------------------------------------------------------------------- the workload


def _payload(salt: bytes, id: int, version: int, size: int) -> bytes:
    return hashlib.shake_128(salt + _KEY.pack(id, version)).digest(size)


class _Shared:
    """State every writer reads: the stop signal, the id allocator, the record count.

    Thread-safety: all methods may be called from any thread (one lock).
    """

    def __init__(self, first_id: int, options: PerfOptions) -> None:
        self.first_id = first_id
        self.next_id = first_id
        self.records = 0
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self._target = options.records
        self._deadline = time.monotonic() + options.seconds if options.records is None else None

    def id_block(self) -> range:
        with self._lock:
            start = self.next_id
            if start + _ID_BLOCK > self.first_id + _ID_SPAN:
                raise StoreError(f"perf used up its id range starting at {self.first_id}")
            self.next_id = start + _ID_BLOCK
            return range(start, start + _ID_BLOCK)

    def count(self, n: int) -> None:
        with self._lock:
            self.records += n
            if self._target is not None and self.records >= self._target:
                self.stop.set()

    def running(self) -> bool:
        if self._deadline is not None and time.monotonic() >= self._deadline:
            self.stop.set()
        return not self.stop.is_set()


class _Writer:
    """One writer thread: its ids, their expected history (record sizes, add first) and its
    latency samples.

    Thread-safety: used by its own thread; the caller reads the fields after ``join``.
    """

    def __init__(
        self, journal: Journal, shared: _Shared, options: PerfOptions, seed: int, salt: bytes
    ) -> None:
        self.journal = journal
        self.shared = shared
        self.options = options
        self.rng = random.Random(seed)
        self.salt = salt
        self.expected: dict[int, list[int]] = {}
        self.live: collections.deque[int] = collections.deque()
        self.ops: collections.Counter[str] = collections.Counter()
        self.latency: dict[str, list[int]] = {g: [] for g in _LATENCY_GROUPS}
        self.payload_bytes = 0
        self.error: BaseException | None = None
        self._ids: range = range(0)
        self._pos = 0

    def _new_id(self) -> int:
        if self._pos >= len(self._ids):
            self._ids, self._pos = self.shared.id_block(), 0
        self._pos += 1
        return self._ids[self._pos - 1]

    def _data(self, id: int, version: int) -> tuple[int, bytes]:
        size = self.rng.choice(self.options.sizes)
        self.payload_bytes += size
        return size, _payload(self.salt, id, version, size)

    def _timed(self, group: str, call: Callable[[], None]) -> None:
        start = time.perf_counter_ns()
        call()
        self.latency[group].append(time.perf_counter_ns() - start)

    def run(self) -> None:
        """The thread body: operations until the shared stop. Errors end up in ``error``."""
        try:
            while self.shared.running():
                self.shared.count(self._step())
        except BaseException as exc:  # reported by run_perf after every writer stopped
            self.error = exc
            self.shared.stop.set()

    def _step(self) -> int:
        rng, live = self.rng, self.live
        if rng.random() < self.options.tx_ratio:
            return self._transaction()
        choice = rng.random()
        if live and (len(live) >= self.options.window or choice < 0.30):
            id = live.popleft()
            del self.expected[id]
            self._timed("append", lambda: self.journal.append_delete(id, sync=self.options.sync))
            self.ops["delete"] += 1
        elif live and choice < 0.55:
            id = live[rng.randrange(len(live))]
            sizes = self.expected[id]
            size, data = self._data(id, len(sizes))
            self._timed(
                "append",
                lambda: self.journal.append_update(
                    id, PERF_UPDATE_TYPE, data, sync=self.options.sync
                ),
            )
            sizes.append(size)
            self.ops["update"] += 1
        else:
            id = self._new_id()
            size, data = self._data(id, 0)
            self._timed(
                "append",
                lambda: self.journal.append_add(id, PERF_ADD_TYPE, data, sync=self.options.sync),
            )
            self.expected[id] = [size]
            live.append(id)
            self.ops["add"] += 1
        return 1

    def _transaction(self) -> int:
        """Adds (some updated again) and maybe an update of a live id, then an outcome."""
        rng, journal, sync = self.rng, self.journal, self.options.sync
        tx = self._new_id()
        staged: dict[int, list[int]] = {}
        for _ in range(rng.randint(1, 4)):
            id = self._new_id()
            size, data = self._data(id, 0)
            journal.append_add_tx(tx, id, PERF_ADD_TYPE, data)
            staged[id] = [size]
            if rng.random() < 0.5:
                size, data = self._data(id, 1)
                journal.append_update_tx(tx, id, PERF_UPDATE_TYPE, data)
                staged[id].append(size)
        records = sum(len(s) for s in staged.values()) + 1
        touched: tuple[int, int] | None = None
        if self.live and rng.random() < 0.5:
            old = self.live[rng.randrange(len(self.live))]
            size, data = self._data(old, len(self.expected[old]))
            journal.append_update_tx(tx, old, PERF_UPDATE_TYPE, data)
            touched, records = (old, size), records + 1
        outcome = rng.random()
        if outcome < 0.15:
            self._timed("rollback", lambda: journal.append_rollback(tx, sync=sync))
            self.ops["tx_rolled_back"] += 1
            return records
        if outcome < 0.30:
            xid = rng.randbytes(16)
            self._timed("prepare", lambda: journal.append_prepare(tx, xid, sync=sync))
            self.ops["tx_prepared"] += 1
            records += 1
        self._timed("commit", lambda: journal.append_commit(tx, sync=sync))
        self.ops["tx_committed"] += 1
        self.expected.update(staged)
        self.live.extend(staged)
        if touched is not None:
            self.expected[touched[0]].append(touched[1])
        return records


def _fresh_first_id(loads: Sequence[LoadResult]) -> int:
    """The first id of a range of _ID_SPAN ids that no loaded record or transaction uses."""
    seen: list[int] = []
    for load in loads:
        seen.extend(r.id for r in load.records)
        seen.extend(load.failed)
        for p in load.prepared:
            seen.append(p.tx_id)
            seen.extend(r.id for r in p.records)
            seen.extend(p.deleted_ids)
    high, low = max(seen, default=0), min(seen, default=0)
    if high <= MAX_ID - _ID_SPAN:
        return max(high + 1, 1)
    if low >= MIN_ID + _ID_SPAN:
        return low - _ID_SPAN
    raise StoreError(
        "the store's ids leave no free range for perf's records",
        hint="run perf on an empty store (--data-dir, or a --config naming other folders/tables)",
    )


def _describe(store: Store) -> tuple[str | None, str]:
    config = store.config
    if store.kind == "file":
        backend = store.messages.backend if isinstance(store.messages, FileJournal) else None
        return (backend.name if backend else config.journal_type), config.journal_directory
    if store.kind == "database" and config.database_store is not None:
        return None, config.database_store.dialect
    return None, "zero persistence"


def _verify(
    loaded: LoadResult,
    expected: dict[int, list[int]],
    ids: range,
    salt: bytes,
    *,
    durable: bool,
) -> Verification:
    """Compare the reopened store's records in ``ids`` with what was acknowledged."""
    found: dict[int, list[tuple[int, bytes, bool]]] = {}
    for rec in loaded.records:
        if rec.id in ids:
            found.setdefault(rec.id, []).append((rec.user_record_type, rec.data, rec.is_update))
    problems: list[str] = []

    def note(text: str) -> None:
        if len(problems) < _MAX_PROBLEMS:
            problems.append(text)

    missing = mismatched = unexpected = 0
    for id, sizes in (expected if durable else {}).items():
        got = found.pop(id, None)
        if got is None:
            missing += 1
            note(f"id {id}: missing ({len(sizes)} acknowledged entries)")
            continue
        want = [
            (PERF_UPDATE_TYPE if v else PERF_ADD_TYPE, _payload(salt, id, v, size), v > 0)
            for v, size in enumerate(sizes)
        ]
        if got != want:
            mismatched += 1
            note(f"id {id}: {len(got)} entries differ from the {len(want)} acknowledged")
    for id in sorted(found):
        unexpected += 1
        note(f"id {id}: came back although it was deleted, rolled back or never acknowledged")
    for prepared in loaded.prepared:
        if prepared.tx_id in ids:
            unexpected += 1
            note(f"transaction {prepared.tx_id}: still prepared although it was committed")
    return Verification(
        durable=durable,
        checked=len(expected) if durable else 0,
        missing=missing,
        mismatched=mismatched,
        unexpected=unexpected,
        problems=tuple(problems),
    )


def _cleanup(journal: Journal, loaded: LoadResult, ids: range) -> int:
    """Delete every live record and roll back every prepared transaction in ``ids``."""
    live = {r.id for r in loaded.records if r.id in ids}
    for id in sorted(live):
        journal.append_delete(id)
    for prepared in loaded.prepared:
        if prepared.tx_id in ids:
            journal.append_rollback(prepared.tx_id, sync=False)
    journal.flush()
    return len(live)


class _Run:
    """One run of the workload: its phases, their times, and the figures they produce.

    Thread-safety: driven by the caller's thread; writers only touch ``shared``.
    """

    def __init__(self, options: PerfOptions, progress: Callable[[PerfProgress], None] | None):
        self.options = options
        self.seed = (
            options.seed if options.seed is not None else random.SystemRandom().getrandbits(32)
        )
        self.salt = random.Random(self.seed).randbytes(16)
        self.progress = progress
        self.times: dict[str, float] = {}
        self.shared: _Shared | None = None
        self.writers: list[_Writer] = []
        self._phase = ""
        self._since = time.monotonic()

    def phase(self, name: str, fraction: float | None = None) -> None:
        """End the current phase (recording its time) and report the start of ``name``."""
        now = time.monotonic()
        if self._phase:
            self.times[self._phase] = now - self._since
            log.info("perf phase=%s seconds=%.3f", self._phase, now - self._since)
        self._phase, self._since = name, now
        self.report(fraction)

    def report(self, fraction: float | None) -> None:
        if self.progress is not None:
            records = self.shared.records if self.shared is not None else 0
            elapsed = time.monotonic() - self._since
            self.progress(PerfProgress(self._phase, elapsed, records, fraction))

    def first_pass(self, store: Store) -> dict[str, Any]:
        """Load, write, and take the figures that need the open store; returns them."""
        bindings_load = store.bindings.load()
        loaded = store.messages.load()
        self.shared = shared = _Shared(_fresh_first_id([bindings_load, loaded]), self.options)
        journal_type, location = _describe(store)
        self.phase("write", 0.0)
        self.writers = [
            _Writer(store.messages, shared, self.options, self.seed * 1_000_003 + k, self.salt)
            for k in range(self.options.threads)
        ]
        threads = [
            threading.Thread(target=w.run, name=f"store-perf-{k}", daemon=True)
            for k, w in enumerate(self.writers)
        ]
        try:
            for t in threads:
                t.start()
            # Writers set ``stop`` at the deadline, at the record target, or on an error.
            while not shared.stop.wait(_TICK):
                if self.options.records is not None:
                    self.report(min(1.0, shared.records / self.options.records))
                else:
                    self.report(min(1.0, (time.monotonic() - self._since) / self.options.seconds))
        finally:
            shared.stop.set()
            for t in threads:
                t.join()
        for w in self.writers:
            if w.error is not None:
                raise w.error
        self.times["append"] = time.monotonic() - self._since
        # The drain belongs to the write phase: without sync, appends may have returned long
        # before the store made them durable.
        store.messages.flush()
        self.phase("close")
        stats = store.messages.stats()
        return dict(
            store=store.kind,
            journal_type=journal_type,
            location=location,
            records_before=len(loaded.records),
            journal_stats=stats,
        )

    def second_pass(self, store: Store) -> dict[str, Any]:
        """Load the reopened store, verify, clean up; returns the figures."""
        assert self.shared is not None
        store.bindings.load()
        reloaded = store.messages.load()
        self.phase("verify")
        ids = range(self.shared.first_id, self.shared.next_id)
        expected: dict[int, list[int]] = {}
        for w in self.writers:
            expected.update(w.expected)
        durable = store.kind != "none"
        verification = _verify(reloaded, expected, ids, self.salt, durable=durable)
        removed = 0
        if not self.options.keep:
            self.phase("cleanup")
            removed = _cleanup(store.messages, reloaded, ids)
        return dict(verification=verification, removed=removed, first_id=ids.start)

    def result(self, figures: dict[str, Any]) -> PerfResult:
        """Returns the PerfResult of the finished run."""
        assert self.shared is not None
        operations: collections.Counter[str] = collections.Counter()
        latency: dict[str, list[int]] = {}
        for w in self.writers:
            operations.update(w.ops)
            for group, samples in w.latency.items():
                latency.setdefault(group, []).extend(samples)
        o, t = self.options, self.times
        return PerfResult(
            threads=o.threads,
            sizes=o.sizes,
            tx_ratio=o.tx_ratio,
            sync=o.sync,
            kept=o.keep,
            seed=self.seed,
            last_id=self.shared.next_id - 1,
            write_seconds=t["write"],
            append_seconds=t["append"],
            records=self.shared.records,
            payload_bytes=sum(w.payload_bytes for w in self.writers),
            operations=dict(sorted(operations.items())),
            latency={g: LatencySummary.of(s) for g, s in latency.items() if s},
            load_seconds=t["load"],
            close_seconds=t["close"],
            reopen_seconds=t["reopen"],
            verify_seconds=t["verify"],
            cleanup_seconds=t.get("cleanup", 0.0),
            **figures,
        )


def run_perf(
    config: StoreConfig,
    options: PerfOptions | None = None,
    *,
    progress: Callable[[PerfProgress], None] | None = None,
) -> PerfResult:
    """Run the workload on the store ``config`` selects, reopen it and verify it.

    ``progress`` is called in this thread at each phase and about five times a second while
    writers run. Returns the :class:`PerfResult` (``verified`` says whether recovery held
    exactly what was acknowledged; a failed verification is a result, not an exception).
    Raises ConfigError for bad options, StoreLockedError when another process holds the store,
    StoreUnavailableError, StoreIOError, CorruptionError or any other StoreError the store
    raises while the workload runs; the store is closed in every case.
    """
    run = _Run(options or PerfOptions(), progress)
    run.phase("load")
    with open_store(config) as store:
        figures = run.first_pass(store)
    if run.options.between_runs is not None:
        run.phase("between-runs")
        run.options.between_runs(config)
    run.phase("reopen")
    with open_store(config) as store:
        figures.update(run.second_pass(store))
    run.phase("done", 1.0)
    return run.result(figures)


def remove_perf_records(config: StoreConfig) -> int:
    """Remove every record ``store perf`` left in the store ``config`` selects (an interrupted
    run, or ``keep``): live records of perf's user record types, and prepared transactions
    holding only such records (rolled back). Returns how many records were removed. Raises
    what :func:`~store.open_store` and the journals raise."""
    perf_types = (PERF_ADD_TYPE, PERF_UPDATE_TYPE)
    with open_store(config) as store:
        store.bindings.load()
        journal = store.messages
        loaded = journal.load()
        live: dict[int, bool] = {}  # id -> every entry of it is perf's
        for r in loaded.records:
            live[r.id] = live.get(r.id, True) and r.user_record_type in perf_types
        removed = [id for id, ours in live.items() if ours]
        for id in removed:
            journal.append_delete(id)
        for prepared in loaded.prepared:
            if prepared.records and all(r.user_record_type in perf_types for r in prepared.records):
                journal.append_rollback(prepared.tx_id, sync=False)
        journal.flush()
    return len(removed)


# --------------------------------------------------------------------------- perf-journal


@dataclass(frozen=True, kw_only=True)
class PerfJournalOptions:
    """What :func:`run_perf_journal` measures (Artemis's ``perf-journal`` options)."""

    #: Default "data/journal/perf-journal.tmp". The scratch file; deleted afterwards.
    file: str = os.path.join("data", "journal", "perf-journal.tmp")
    #: Default 4096. Bytes per write; ASYNCIO needs a multiple of 4096.
    block_size: int = 4096
    #: Default 250. Durable writes per try.
    writes: int = 250
    #: Default 5. Tries; the fastest counts (the others absorb warm-up and noise).
    tries: int = 5
    #: Default "NIO". NIO, MAPPED or ASYNCIO (which falls back to NIO where it cannot work).
    journal_type: str = "NIO"
    #: Default True. fdatasync / msync / O_DSYNC; False measures the page cache.
    datasync: bool = True
    #: Default False. ASYNCIO waits for each write before the next (one producer's latency)
    #: instead of keeping up to ``max_aio`` in flight; NIO and MAPPED always wait.
    sync_writes: bool = False
    #: Default 4096. ASYNCIO writes in flight at most.
    max_aio: int = 4096

    def __post_init__(self) -> None:
        for key, value in (("--block-size", self.block_size), ("--writes", self.writes)):
            if value < 1:
                raise invalid(key, value, "1 or more")
        if self.tries < 1:
            raise invalid("--tries", self.tries, "1 or more")
        if not 1 <= self.max_aio <= 4096:
            raise invalid("--max-aio", self.max_aio, "1 to 4096")
        if self.journal_type.upper() not in ("NIO", "MAPPED", "ASYNCIO"):
            raise invalid("--journal-type", self.journal_type, "NIO, ASYNCIO or MAPPED")


@dataclass(frozen=True, kw_only=True)
class PerfJournalResult:
    """The probe's figures: every try's milliseconds, the fastest, and what follows from it."""

    file: str
    requested_type: str
    journal_type: str  #: the type that ran (ASYNCIO may have fallen back to NIO)
    block_size: int
    writes: int
    datasync: bool
    in_flight: int  #: writes in flight at most (1 unless ASYNCIO without sync_writes)
    try_ms: tuple[float, ...]

    @property
    def best_ms(self) -> float:
        """Milliseconds of the fastest try."""
        return min(self.try_ms)

    @property
    def writes_per_ms(self) -> float:
        """Durable writes per millisecond in the fastest try."""
        return self.writes / self.best_ms if self.best_ms > 0 else float(self.writes)

    @property
    def buffer_timeout_ns(self) -> int:
        """Recommended journal-buffer-timeout: one durable write's mean time, in ns."""
        return max(1, round(1e6 / self.writes_per_ms))

    def to_dict(self) -> dict[str, Any]:
        """Returns the result as JSON-ready data, derived figures included. Raises nothing."""
        data = asdict(self)
        data.update(
            best_ms=self.best_ms,
            writes_per_ms=self.writes_per_ms,
            buffer_timeout_ns=self.buffer_timeout_ns,
        )
        return data


class _Fd:
    """What libaio wants as a target: an object with ``fileno``."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def fileno(self) -> int:
        return self.fd


def _aio_tries(
    options: PerfJournalOptions, path: str, progress: Callable[[int, int], None]
) -> list[float]:
    import libaio  # optional and Linux only: make_backend checked it loads

    block, writes = options.block_size, options.writes
    depth = 1 if options.sync_writes else min(options.max_aio, writes)
    flags = os.O_RDWR | os.O_CLOEXEC | os.O_DIRECT | (os.O_DSYNC if options.datasync else 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise StoreIOError(f"cannot open {path} for O_DIRECT: {exc}", path=path) from exc
    buf = mmap.mmap(-1, block)  # page-aligned, as O_DIRECT needs
    buf.write(b"t" * block)
    view = memoryview(buf)
    ctx = libaio.AIOContext(depth)
    results: list[float] = []
    try:
        for n in range(options.tries):
            start = time.perf_counter()
            submitted = done = 0
            while done < writes:
                todo = [
                    libaio.AIOBlock(
                        libaio.AIOBLOCK_MODE_WRITE,
                        target_file=_Fd(fd),
                        buffer_list=[view],
                        offset=i * block,
                    )
                    for i in range(submitted, min(writes, done + depth))
                ]
                if todo:
                    submitted += ctx.submit(todo)
                for _block, res, _res2 in ctx.getEvents(min_nr=1):
                    if res != block:
                        raise StoreIOError(
                            f"AIO write to {path} returned {res} of {block}", path=path
                        )
                    done += 1
            results.append((time.perf_counter() - start) * 1e3)
            progress(n + 1, options.tries)
    except OSError as exc:
        raise StoreIOError(f"AIO write to {path} failed: {exc}", path=path) from exc
    finally:
        ctx.close()
        view.release()
        buf.close()
        os.close(fd)
    return results


def run_perf_journal(
    options: PerfJournalOptions | None = None,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> PerfJournalResult:
    """Measure durable writes per millisecond as Artemis's ``perf-journal`` does.

    Pre-fills ``file`` with ``block_size x writes`` zero bytes, then ``tries`` times writes
    ``writes`` blocks of ``t`` each made durable, and deletes the file. ``progress(done,
    tries)`` is called after each try, in this thread. Returns the :class:`PerfJournalResult`.
    Raises ConfigError for bad options (ASYNCIO with a block size that is not a multiple of
    4096), StoreIOError when the file cannot be written.
    """
    options = options or PerfJournalOptions()
    notify = progress or (lambda done, total: None)
    fs = OsFileSystem()
    path = os.path.abspath(options.file)
    fs.makedirs(os.path.dirname(path))
    size = options.block_size * options.writes
    requested = options.journal_type.upper()
    handle = fs.open(path, create=True)
    try:
        handle.truncate(0)
        zeros = bytes(min(size, 1 << 20))
        for offset in range(0, size, len(zeros)):
            handle.pwrite(zeros[: size - offset], offset)
        handle.datasync()
        backend = make_backend(
            requested, fs, os.path.dirname(path), datasync=options.datasync, max_io=options.max_aio
        )
        try:
            if isinstance(backend, AsyncIOBackend) and options.block_size % backend.alignment:
                raise invalid("--block-size", options.block_size, "a multiple of 4096 for ASYNCIO")
            if isinstance(backend, AsyncIOBackend):
                backend.close()
                tries = _aio_tries(options, path, notify)
                in_flight = 1 if options.sync_writes else min(options.max_aio, options.writes)
            else:
                tries = _sync_tries(options, backend, Segment(path, 0, size, handle), notify)
                in_flight = 1
        finally:
            if not isinstance(backend, AsyncIOBackend):
                backend.close()
    finally:
        handle.close()
        fs.remove(path)
    return PerfJournalResult(
        file=path,
        requested_type=requested,
        journal_type=backend.name,
        block_size=options.block_size,
        writes=options.writes,
        datasync=options.datasync,
        in_flight=in_flight,
        try_ms=tuple(tries),
    )


def _sync_tries(
    options: PerfJournalOptions,
    backend: IOBackend,
    seg: Segment,
    progress: Callable[[int, int], None],
) -> list[float]:
    """NIO / MAPPED: every write is followed by its sync, as the journal's flusher does."""
    block = b"t" * options.block_size
    results: list[float] = []
    for n in range(options.tries):
        start = time.perf_counter()
        for i in range(options.writes):
            backend.write(seg, i * options.block_size, block)
            backend.sync(seg)
        results.append((time.perf_counter() - start) * 1e3)
        progress(n + 1, options.tries)
    return results
