"""Reference: what plain Python and this disk do with no journal at all.

Figures (records per second, on the disk of ``--dir``):

* ``pwrite 100 B`` / ``pwrite 1 KiB``: ``os.pwrite`` appends to a growing file, no sync, one
  thread. The ceiling of "one system call per record" from Python.
* ``pwrite+fdatasync, pre-allocated`` / ``growing``: one record, one ``fdatasync``, one thread.
  Pre-allocated means a file filled with zeros and synced beforehand, written from the start and
  wrapped at its end (what a journal that pre-creates files does); growing means every write
  extends the file, so every sync also commits file-size metadata.
* ``group commit, 64 threads``: the simple loop. 64 producers hand records to one writer thread
  and block; the writer takes everything queued, writes it with one ``pwrite``, ``fdatasync`` s
  once, and wakes the whole batch. No timers, no buffers, no cleverness.
* ``1 producer, 1,000 in flight``: the same writer; one producer submits without blocking and
  gets a completion callback per record after its sync; it stalls only when 1,000 records are
  waiting. Counts durable (called-back) records.

Run: ``python -m bench.ref_disk [--dir DIR] [--seconds S] [--repeat K] [--json FILE]``.

Thread-safety: :class:`GroupWriter` may be used from any number of producer threads; everything
else runs on the calling thread.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from bench.common import (
    Result,
    median_rate,
    rate_for,
    reference_main,
    run_threads,
    scratch_dir,
)

__all__ = [
    "GroupWriter",
    "durable_records",
    "measure",
    "preallocate",
    "pwrite_appends",
    "sync_per_record",
    "group_commit_threads",
    "group_commit_in_flight",
]

# One size for every durable figure, ours and the references' (the issue's SQLite row is 100 B);
# --size changes it.
DURABLE_SIZE = 100
PREALLOCATED_BYTES = 64 * 1024 * 1024
# Bounds the file a no-sync run writes: a fast run at 1 KiB would otherwise fill the page cache
# with gigabytes and measure write-back instead of the system call.
MAX_APPEND_BYTES = 512 * 1024 * 1024
THREADS = 64
IN_FLIGHT = 1000


def durable_records(size: int, count: int = 4096) -> list[bytes]:
    """Return ``count`` distinct records of ``size`` bytes (a counter in the first bytes)."""
    pad = b"x" * max(0, size - 8)
    return [(i.to_bytes(8, "little") + pad)[:size] for i in range(count)]


def preallocate(path: Path, size: int = PREALLOCATED_BYTES) -> None:
    """Create ``path`` as ``size`` bytes of written zeros, synced; returns nothing."""
    chunk = b"\0" * (1024 * 1024)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for offset in range(0, size, len(chunk)):
            os.pwrite(fd, chunk, offset)
        os.fsync(fd)
    finally:
        os.close(fd)


def pwrite_appends(directory: Path, size: int, seconds: float) -> float:
    """One thread appending ``size``-byte records with ``os.pwrite``, no sync.

    Returns records per second.
    """
    record = b"r" * size
    fd = os.open(directory / f"append-{size}.dat", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    offset = 0

    def step() -> None:
        nonlocal offset
        os.pwrite(fd, record, offset)
        offset += size

    try:
        return rate_for(seconds, step, max_ops=MAX_APPEND_BYTES // size)
    finally:
        os.close(fd)


def sync_per_record(directory: Path, size: int, seconds: float, *, preallocated: bool) -> float:
    """One thread, one ``pwrite`` + ``fdatasync`` per record.

    On a pre-allocated file (made by :func:`preallocate` if absent; wrapped at its end) or on a
    file that grows with every record. Returns records per second.
    """
    records = durable_records(size)
    if preallocated:
        path = directory / "prealloc.dat"
        if not path.exists():
            preallocate(path)
        fd = os.open(path, os.O_WRONLY)
    else:
        fd = os.open(directory / "growing.dat", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    offset = 0
    n = 0

    def step() -> None:
        nonlocal offset, n
        if preallocated and offset + size > PREALLOCATED_BYTES:
            offset = 0
        os.pwrite(fd, records[n % len(records)], offset)
        os.fdatasync(fd)
        offset += size
        n += 1

    try:
        return rate_for(seconds, step)
    finally:
        os.close(fd)


class GroupWriter:
    """The simple group-commit loop: one writer thread, one write and one sync per batch.

    Producers call :meth:`append` (blocks until durable) or :meth:`submit` (returns at once;
    the callback runs on the writer thread after the sync). Writes go to a pre-allocated file
    and wrap at its end. Thread-safety: any number of producer threads.
    """

    def __init__(self, path: Path) -> None:
        if not path.exists():
            preallocate(path)
        self._fd = os.open(path, os.O_WRONLY)
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)
        self._done = threading.Condition(self._lock)
        self._queue: list[tuple[bytes, Callable[[], None] | None]] = []
        self._submitted = 0
        self._durable = 0
        self._closed = False
        self._offset = 0
        self.batches = 0
        self._thread = threading.Thread(target=self._run, name="group-writer", daemon=True)
        self._thread.start()

    def submit(self, record: bytes, callback: Callable[[], None] | None = None) -> int:
        """Queue ``record``; returns its ticket (durable once the durable count reaches it)."""
        with self._lock:
            self._queue.append((record, callback))
            self._submitted += 1
            self._work.notify()
            return self._submitted

    def append(self, record: bytes) -> None:
        """Queue ``record`` and return once it has been synced."""
        ticket = self.submit(record)
        with self._lock:
            while self._durable < ticket:
                self._done.wait()

    def close(self) -> None:
        """Write what is queued, stop the writer thread and close the file."""
        with self._lock:
            self._closed = True
            self._work.notify()
        self._thread.join()
        os.close(self._fd)

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._queue and not self._closed:
                    self._work.wait()
                if not self._queue:
                    return
                batch, self._queue = self._queue, []
            data = b"".join(record for record, _ in batch)
            if self._offset + len(data) > PREALLOCATED_BYTES:
                self._offset = 0
            os.pwrite(self._fd, data, self._offset)
            os.fdatasync(self._fd)
            self._offset += len(data)
            self.batches += 1
            with self._lock:
                self._durable += len(batch)
                self._done.notify_all()
            for _, callback in batch:
                if callback is not None:
                    callback()


def group_commit_threads(
    directory: Path, size: int, seconds: float, threads: int = THREADS
) -> float:
    """``threads`` producers appending durably through :class:`GroupWriter`.

    Returns durable records per second.
    """
    records = durable_records(size)
    writer = GroupWriter(directory / "prealloc.dat")

    def producer(stop: threading.Event) -> int:
        n = 0
        while not stop.is_set():
            writer.append(records[n % len(records)])
            n += 1
        return n

    try:
        return run_threads(threads, seconds, producer)
    finally:
        writer.close()


def group_commit_in_flight(
    directory: Path, size: int, seconds: float, in_flight: int = IN_FLIGHT
) -> float:
    """One producer keeping up to ``in_flight`` records unsynced, with completion callbacks.

    Returns durable (called-back) records per second, waiting for the last ones at the end.
    """
    records = durable_records(size)
    writer = GroupWriter(directory / "prealloc.dat")
    slots = threading.Semaphore(in_flight)
    completed = 0

    def on_durable() -> None:
        nonlocal completed
        completed += 1  # only the writer thread calls back, so this needs no lock
        slots.release()

    n = 0
    start = time.perf_counter()
    deadline = start + seconds
    try:
        while time.perf_counter() < deadline:
            for _ in range(64):
                slots.acquire()
                writer.submit(records[n % len(records)], on_durable)
                n += 1
        for _ in range(in_flight):
            slots.acquire()
        return completed / (time.perf_counter() - start)
    finally:
        writer.close()


def measure(base: Path, seconds: float, repeat: int, size: int = DURABLE_SIZE) -> dict[str, Result]:
    """Every figure of this module, each the median of ``repeat`` runs of ``seconds``.

    Returns the results keyed ``pwrite_100``, ``pwrite_1024``, ``sync_preallocated``,
    ``sync_growing``, ``group_threads``, ``group_in_flight`` (the module docstring's order).
    """
    results: dict[str, Result] = {}
    with scratch_dir(base, "ref-disk") as d:
        for append_size in (100, 1024):
            results[f"pwrite_{append_size}"] = median_rate(
                f"pwrite {append_size} B, no sync",
                functools.partial(pwrite_appends, d, append_size, seconds),
                repeat=repeat,
                unit="records/s",
            )
        preallocate(d / "prealloc.dat")
        for key, pre in (("preallocated", True), ("growing", False)):
            results[f"sync_{key}"] = median_rate(
                f"pwrite+fdatasync {size} B, {'pre-allocated' if pre else 'growing'}",
                functools.partial(sync_per_record, d, size, seconds, preallocated=pre),
                repeat=repeat,
                unit="records/s",
                note="one thread, one sync per record",
            )
        results["group_threads"] = median_rate(
            f"group commit {size} B, {THREADS} threads",
            lambda: group_commit_threads(d, size, seconds),
            repeat=repeat,
            unit="records/s",
            note="simple loop: write all queued, one fdatasync",
        )
        results["group_in_flight"] = median_rate(
            f"group commit {size} B, 1 producer, {IN_FLIGHT:,} in flight",
            lambda: group_commit_in_flight(d, size, seconds),
            repeat=repeat,
            unit="records/s",
            note="durable, completion callback",
        )
    return results


def main() -> None:
    reference_main(
        __doc__,
        "Reference: raw disk from Python",
        "ref_disk",
        measure,
        size=DURABLE_SIZE,
        size_help="durable record size",
    )


if __name__ == "__main__":
    main()
