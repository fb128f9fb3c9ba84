"""The writers of ``store perf --journal``: threads appending to the message journal at once.

Each :class:`Writer` owns its ids (taken in blocks from the :class:`SharedState` allocator, a
sliding window of at most ``window`` live records, deleted oldest first as a broker
acknowledges messages), so every id's expected history is exact; it times every sync append
and every prepare / commit / rollback. Payloads are :func:`payload`, ``shake_128(salt, id,
version)`` of the record's size, so verification compares exact bytes while perf keeps only
sizes in memory. perf's records use the user record types :data:`PERF_ADD_TYPE` /
:data:`PERF_UPDATE_TYPE`, which no Artemis storage manager writes.

Thread-safety: :class:`SharedState` may be used from any thread (one lock); a :class:`Writer`
is used by its own thread, and its fields are read after ``join``.
"""

from __future__ import annotations

import collections
import hashlib
import random
import struct
import threading
import time
from collections.abc import Callable

from store.errors import StoreError
from store.journal.api import Journal
from store.perf.journal_results import PerfOptions

__all__ = [
    "ID_SPAN",
    "LATENCY_GROUPS",
    "PERF_ADD_TYPE",
    "PERF_UPDATE_TYPE",
    "SharedState",
    "Writer",
    "payload",
]

#: User record type of perf's adds (outside Artemis's table of record types).
PERF_ADD_TYPE = 250
#: User record type of perf's updates.
PERF_UPDATE_TYPE = 251
#: Ids reserved for one run; far more than any run can use, small next to the 64-bit id space.
ID_SPAN = 1 << 40
_ID_BLOCK = 1024  # ids a writer takes from the shared allocator at a time
_KEY = struct.Struct(">qI")  # (id, version): what a payload is derived from
#: Timed calls: sync non-transactional appends, and the three ends of a transaction.
LATENCY_GROUPS = ("append", "commit", "prepare", "rollback")


def payload(salt: bytes, id: int, version: int, size: int) -> bytes:
    """The record data of ``id``'s ``version``: ``size`` bytes derived from ``salt``."""
    return hashlib.shake_128(salt + _KEY.pack(id, version)).digest(size)


class SharedState:
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
            if start + _ID_BLOCK > self.first_id + ID_SPAN:
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


class Writer:
    """One writer thread: its ids, their expected history (record sizes, add first) and its
    latency samples.

    Thread-safety: used by its own thread; the caller reads the fields after ``join``.
    """

    def __init__(
        self, journal: Journal, shared: SharedState, options: PerfOptions, seed: int, salt: bytes
    ) -> None:
        self.journal = journal
        self.shared = shared
        self.options = options
        self.rng = random.Random(seed)
        self.salt = salt
        self.expected: dict[int, list[int]] = {}
        self.live: collections.deque[int] = collections.deque()
        self.ops: collections.Counter[str] = collections.Counter()
        self.latency: dict[str, list[int]] = {g: [] for g in LATENCY_GROUPS}
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
        return size, payload(self.salt, id, version, size)

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
