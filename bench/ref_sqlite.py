"""Reference: SQLite in WAL mode with ``synchronous=FULL`` (stdlib ``sqlite3``), durable commits.

Figures (rows per second, the database file on the disk of ``--dir``):

* ``64 threads``: each thread has its own connection and loops "insert one 100-byte row,
  commit". Writers queue on SQLite's lock through its busy handler (``timeout=60``), as an
  application that uses SQLite as a durable queue would.
* ``1 thread``: the same loop on one connection: commits per second.

Every connection sets ``journal_mode=WAL`` and ``synchronous=FULL`` and reads both back; the
figure's note shows what SQLite reported, so a build that ignored the pragma would be visible.

Run: ``python -m bench.ref_sqlite [--dir DIR] [--seconds S] [--repeat K] [--json FILE]``.

Thread-safety: each worker thread opens and closes its own connection; nothing is shared.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from bench.common import (
    Result,
    median_rate,
    rate_for,
    reference_main,
    run_threads,
    scratch_dir,
)

__all__ = ["connect", "measure", "one_thread", "threads_commit"]

ROW_SIZE = 100
THREADS = 64
BUSY_TIMEOUT_S = 60.0
# What PRAGMA synchronous reports, by number.
SYNCHRONOUS_NAMES = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


def connect(path: Path) -> tuple[sqlite3.Connection, str]:
    """Open ``path`` in WAL mode with ``synchronous=FULL``.

    Returns the connection and the settings SQLite reports (e.g. ``"wal, FULL"``).
    Raises sqlite3.Error.
    """
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, check_same_thread=True)
    mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    conn.execute("PRAGMA synchronous=FULL")
    sync = conn.execute("PRAGMA synchronous").fetchone()[0]
    return conn, f"{mode}, synchronous={SYNCHRONOUS_NAMES.get(sync, str(sync))}"


def _create(path: Path) -> str:
    """Create ``path`` afresh (a run never inherits the previous run's rows)."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    conn, settings = connect(path)
    with conn:
        conn.execute("CREATE TABLE IF NOT EXISTS rows (id INTEGER PRIMARY KEY, data BLOB NOT NULL)")
    conn.close()
    return settings


def threads_commit(
    path: Path, seconds: float, threads: int = THREADS, size: int = ROW_SIZE
) -> float:
    """``threads`` threads, one connection each, one insert + commit per row.

    Returns committed rows per second.
    """
    _create(path)
    row = b"s" * size

    def worker(stop: threading.Event) -> int:
        conn, _ = connect(path)
        n = 0
        try:
            while not stop.is_set():
                conn.execute("INSERT INTO rows (data) VALUES (?)", (row,))
                conn.commit()
                n += 1
        finally:
            conn.close()
        return n

    return run_threads(threads, seconds, worker)


def one_thread(path: Path, seconds: float, size: int = ROW_SIZE) -> float:
    """One connection, one insert + commit per row. Returns commits per second."""
    _create(path)
    row = b"s" * size
    conn, _ = connect(path)

    def step() -> None:
        conn.execute("INSERT INTO rows (data) VALUES (?)", (row,))
        conn.commit()

    try:
        return rate_for(seconds, step)
    finally:
        conn.close()


def measure(base: Path, seconds: float, repeat: int, size: int = ROW_SIZE) -> dict[str, Result]:
    """Both figures of this module, each the median of ``repeat`` runs of ``seconds``.

    Returns the results keyed ``threads`` and ``one_thread``.
    """
    with scratch_dir(base, "ref-sqlite") as d:
        settings = _create(d / "probe.db")
        note = f"{size} B rows; {settings}"
        return {
            "threads": median_rate(
                f"SQLite WAL FULL, {THREADS} threads, commit per row",
                lambda: threads_commit(d / "threads.db", seconds, size=size),
                repeat=repeat,
                unit="rows/s",
                note=note,
            ),
            "one_thread": median_rate(
                "SQLite WAL FULL, 1 thread, commit per row",
                lambda: one_thread(d / "one.db", seconds, size=size),
                repeat=repeat,
                unit="commits/s",
                note=note,
            ),
        }


def main() -> None:
    reference_main(
        __doc__,
        "Reference: SQLite WAL, synchronous=FULL",
        "ref_sqlite",
        measure,
        size=ROW_SIZE,
        size_help="row size in bytes",
    )


if __name__ == "__main__":
    main()
