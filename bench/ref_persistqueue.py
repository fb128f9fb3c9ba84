"""Reference: persist-queue (PyPI ``persist-queue``), durable puts from 64 threads.

Which configuration, and why: ``persistqueue.SQLiteQueue(path, multithreading=True,
auto_commit=True)``. With ``auto_commit`` every ``put`` is its own committed SQLite transaction
in WAL mode, and SQLite's ``synchronous`` setting (FULL unless the build changed it; read back
and printed in the note, and set to FULL if it was lower) makes that commit fsync the WAL: a
``put`` that returned survives a power cut. The library's file ``Queue`` (with or without
``autosave``) is not durable per put: it flushes to the OS and fsyncs only when a chunk of
``chunksize`` items fills, so it would be measured against a weaker promise than ours.

The queue shares one connection between threads behind its own lock, so the 64 threads take
turns; that is how the library behaves, and what a user of it gets.

Run: ``python -m bench.ref_persistqueue [--dir DIR] [--seconds S] [--repeat K] [--json FILE]``.

Thread-safety: the queue object is shared by the worker threads, which persist-queue allows
with ``multithreading=True``.
"""

from __future__ import annotations

import itertools
import threading
from pathlib import Path

import persistqueue

from bench.common import (
    Result,
    median_rate,
    reference_main,
    run_threads,
    scratch_dir,
)
from bench.ref_sqlite import SYNCHRONOUS_NAMES

__all__ = ["measure", "open_queue", "puts_from_threads"]

ITEM_SIZE = 100
THREADS = 64
_FULL = 2


def open_queue(path: Path) -> tuple[persistqueue.SQLiteQueue, str]:
    """Open the durable SQLiteQueue at ``path``.

    Returns the queue and the SQLite settings its writing connection reports. Raises
    sqlite3.Error, or RuntimeError if the queue has no writing connection.
    """
    queue = persistqueue.SQLiteQueue(str(path), multithreading=True, auto_commit=True)
    # persist-queue exposes no setting for this; its writing connection is ``_putter``.
    conn = queue._putter
    if conn is None:
        raise RuntimeError("persist-queue opened no writing connection")
    if conn.execute("PRAGMA synchronous").fetchone()[0] < _FULL:
        conn.execute("PRAGMA synchronous=FULL")
    mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    sync = conn.execute("PRAGMA synchronous").fetchone()[0]
    return queue, f"{mode}, synchronous={SYNCHRONOUS_NAMES.get(sync, str(sync))}"


def puts_from_threads(
    path: Path, seconds: float, threads: int = THREADS, size: int = ITEM_SIZE
) -> tuple[float, str]:
    """``threads`` threads calling ``put`` on one durable queue.

    Returns (puts per second, the SQLite settings reported).
    """
    queue, settings = open_queue(path)
    item = b"q" * size

    def worker(stop: threading.Event) -> int:
        n = 0
        while not stop.is_set():
            queue.put(item)
            n += 1
        return n

    try:
        return run_threads(threads, seconds, worker), settings
    finally:
        queue.close()


def measure(base: Path, seconds: float, repeat: int, size: int = ITEM_SIZE) -> dict[str, Result]:
    """The figure of this module, the median of ``repeat`` runs (each on a new queue).

    Returns the result keyed ``threads``.
    """
    settings: list[str] = []
    with scratch_dir(base, "ref-persistqueue") as d:
        runs = itertools.count()

        def one_run() -> float:
            rate, reported = puts_from_threads(d / f"q{next(runs)}", seconds, size=size)
            settings.append(reported)
            return rate

        result = median_rate(
            f"persist-queue SQLiteQueue, {THREADS} threads, put",
            one_run,
            repeat=repeat,
            unit="puts/s",
        )
    note = f"{size} B items; auto_commit=True; {settings[0]}"
    return {"threads": Result(result.name, result.value, result.unit, result.runs, note)}


def main() -> None:
    reference_main(
        __doc__,
        "Reference: persist-queue",
        "ref_persistqueue",
        measure,
        size=ITEM_SIZE,
        size_help="item size in bytes",
    )


if __name__ == "__main__":
    main()
