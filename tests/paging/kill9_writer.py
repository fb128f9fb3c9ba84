"""The child process of tests/paging/test_kill9.py: appends page records until it is killed.

Usage: ``python kill9_writer.py KIND TARGET THREADS [churn]`` where KIND is ``file`` (TARGET:
the paging directory) or ``database`` (TARGET: a JSON store configuration mapping); ``churn``
adds a thread that makes and removes page stores all the time.

Each of THREADS threads appends records to its own address ``a<t>`` with ``sync=True`` and
prints ``<t> <page> <index> <i>`` once the append returned, so every line the parent reads
names an acknowledged, durable record: the ``i``-th of thread ``t``, whose payload is
:func:`payload`. Lines are written whole under one lock and flushed at once.

Thread-safety: the threads share only the manager (thread-safe) and the output lock.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

# Runs as a script: make the project importable whatever the working directory is.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from store.paging.api import PagingManager

PAGE_SIZE = 4096
MAX_SECONDS = 60.0


def payload(thread: int, i: int) -> bytes:
    """The record the ``i``-th append of ``thread`` writes (8..800 bytes). Raises nothing."""
    return (b"%d:%d;" % (thread, i)) * (1 + i % 100)


def open_manager(kind: str, target: str) -> tuple[PagingManager, object]:
    """The paging manager the child and the parent both use, and what to close after it."""
    if kind == "file":
        from store.paging.files import FilePagingManager

        pm = FilePagingManager(target, page_size_of=lambda a: PAGE_SIZE, sync_timeout_ns=1_000_000)
        return pm, None
    from store import StoreConfig
    from store.db import open_database_journals
    from store.paging.database import DatabasePagingManager

    config = StoreConfig.from_mapping(json.loads(target))
    journals = open_database_journals(config)
    pm = DatabasePagingManager(
        journals.engine,
        journals.schema,
        page_size_of=lambda a: PAGE_SIZE,
        sync_timeout_ns=1_000_000,
        max_page_size=PAGE_SIZE,
        where=journals.target.display,
    )
    return pm, journals


def main(argv: list[str]) -> int:
    kind, target, threads = argv[1], argv[2], int(argv[3])
    out_lock = threading.Lock()
    pm, _ = open_manager(kind, target)

    def say(line: str) -> None:
        with out_lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    def work(t: int) -> None:
        ps = pm.store(f"a{t}")
        deadline = time.monotonic() + MAX_SECONDS
        i = 0
        while time.monotonic() < deadline:
            position = ps.append(payload(t, i), sync=True)
            say(f"{t} {position.page} {position.index} {i}")
            i += 1

    def churn() -> None:
        """Page stores made and removed without pause, so kills land inside both: prints
        ``c <name> made`` once store ``c<pid>-<k>`` holds its one acknowledged record (the
        ``k``-th payload of thread -1) and ``c <name> removed`` once its removal returned (every
        odd one is removed)."""
        deadline = time.monotonic() + MAX_SECONDS
        k = 0
        while time.monotonic() < deadline:
            name = f"c{os.getpid()}-{k}"  # a name no earlier run used
            pm.store(name).append(payload(-1, k), sync=True)
            say(f"c {name} made")
            if k % 2:
                pm.remove(name)
                say(f"c {name} removed")
            k += 1

    say("ready")
    pool = [threading.Thread(target=work, args=(t,), daemon=True) for t in range(threads)]
    if len(argv) > 4 and argv[4] == "churn":
        pool.append(threading.Thread(target=churn, daemon=True))
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
