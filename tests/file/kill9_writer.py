"""The child process of tests/file/test_kill9.py: writes to a real file store until killed.

Usage: ``python kill9_writer.py DIRECTORY JOURNAL_TYPE MODE THREADS``

- opens the store under DIRECTORY with :func:`config_mapping` and loads the messages journal;
- prints ``ready <backend>`` (the I/O backend really in use, so the parent can tell that
  ASYNCIO did not fall back to NIO);
- each of THREADS threads appends ids ``(t + 1) * ID_SPAN + i`` with ``sync=True`` and prints
  ``A <id>`` once the append returned; the ids :func:`deleted_after_add` names it then deletes
  (``sync=True``) and prints ``D <id>`` once that returned;
- MODE ``compact`` also deletes most records and runs ``compact()`` in a loop on another
  thread, printing ``C start`` before and ``C done`` after each compaction.

Lines are written whole under one lock and flushed at once, so every line the parent reads
describes a call that had returned. The data of an id is :func:`payload` of it, so the parent
checks content too. The process runs until it is killed (or for ``MAX_SECONDS``).

Thread-safety: the writer threads share only the store (thread-safe) and the output lock.
"""

from __future__ import annotations

import os
import struct
import sys
import threading
import time

# Runs as a script: make the project importable whatever the working directory is.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from store import StoreConfig, open_store

ID_SPAN = 1_000_000_000
MAX_SECONDS = 60.0
FILE_SIZE = 64 * 1024


def config_mapping(directory: str, journal_type: str, mode: str) -> dict[str, object]:
    """Returns the store configuration the child and the parent both use. Raises nothing."""
    return {
        "journal-directory": os.path.join(directory, "journal"),
        "bindings-directory": os.path.join(directory, "bindings"),
        "large-messages-directory": os.path.join(directory, "large"),
        "paging-directory": os.path.join(directory, "paging"),
        "journal-type": journal_type,
        "journal-file-size": FILE_SIZE,
        "journal-min-files": 2,
        "journal-pool-files": 4,
        "journal-compact-min-files": 0 if mode == "compact" else 3,
        "journal-compact-percentage": 50,
    }


def payload(id: int) -> bytes:
    """Returns the data written for ``id`` (deterministic, 8..3000 bytes). Raises nothing."""
    return struct.pack("<q", id) * (1 + id % 375)


def deleted_after_add(index: int, mode: str) -> bool:
    """Returns True if the writer deletes the ``index``-th id of a thread right after adding it:
    one in three normally; nine in ten when compacting (compaction then has live records to
    copy and plenty of dead space)."""
    if mode == "compact":
        return index % 10 != 0
    return index % 3 == 0


def main(argv: list[str]) -> int:
    directory, journal_type, mode, threads = argv[1], argv[2], argv[3], int(argv[4])
    out_lock = threading.Lock()

    def say(line: str) -> None:
        with out_lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    store = open_store(StoreConfig.from_mapping(config_mapping(directory, journal_type, mode)))
    journal = store.messages
    journal.load()
    backend = getattr(journal, "backend", None)
    say(f"ready {getattr(backend, 'name', type(journal).__name__)}")
    deadline = time.monotonic() + MAX_SECONDS

    def writer(t: int) -> None:
        base = (t + 1) * ID_SPAN
        i = 0
        while time.monotonic() < deadline:
            rid = base + i
            journal.append_add(rid, 1, payload(rid), sync=True)
            say(f"A {rid}")
            if deleted_after_add(i, mode):
                journal.append_delete(rid, sync=True)
                say(f"D {rid}")
            i += 1

    def compactor() -> None:
        while time.monotonic() < deadline:
            time.sleep(0.05)  # let files accumulate so each compaction has work
            say("C start")
            journal.compact()
            say("C done")

    workers = [threading.Thread(target=writer, args=(t,), daemon=True) for t in range(threads)]
    if mode == "compact":
        workers.append(threading.Thread(target=compactor, daemon=True))
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
