"""Signals arriving while the journal writes: a program's signal handlers (or a profiler that
interrupts system calls) must not make a write fail. Python retries its own calls after EINTR
(PEP 475); the ASYNCIO back-end's wait for its completion (libaio's ``io_getevents``) did not,
and the journal took the interrupted wait for a failed write and refused every write after.
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest

from store import StoreConfig, open_store
from tests.support.backends import file_config_mapping


@pytest.mark.parametrize("journal_type", ["NIO", "MAPPED", "ASYNCIO"])
def test_durable_appends_survive_signals_sent_to_the_writing_threads(
    tmp_path: Path, journal_type: str
) -> None:
    """While two threads append durably, they and the journals' flushers get SIGUSR1 (a
    Python handler installed, so system calls see EINTR) about every 50 µs for 1.5 s: every
    append returns, none fails, and every record is there after a reopen."""
    config = StoreConfig.from_mapping(file_config_mapping(tmp_path, journal_type))
    seen = [0]

    def count(signum: int, frame: object) -> None:
        del signum, frame
        seen[0] += 1

    previous = signal.signal(signal.SIGUSR1, count)
    errors: list[BaseException] = []
    written: list[list[int]] = [[], []]
    stop = threading.Event()
    try:
        with open_store(config) as store:
            journal = store.messages
            journal.load()

            def append(k: int) -> None:
                i = k
                try:
                    while not stop.is_set():
                        journal.append_add(i, 45, b"x" * 100, sync=True)
                        written[k].append(i)
                        i += 2
                except BaseException as exc:
                    errors.append(exc)

            appenders = [threading.Thread(target=append, args=(k,)) for k in (0, 1)]
            for t in appenders:
                t.start()
            deadline = time.monotonic() + 1.5
            sent = 0
            while time.monotonic() < deadline and not errors:
                # The threads that write: the appenders (a waiting appender may flush) and
                # the journals' flushers; not the test runner's own.
                for t in threading.enumerate():
                    if (t in appenders or t.name.endswith("-flusher")) and t.ident is not None:
                        try:
                            signal.pthread_kill(t.ident, signal.SIGUSR1)
                            sent += 1
                        except ProcessLookupError:  # the thread just ended
                            pass
                time.sleep(0.00005)
            stop.set()
            for t in appenders:
                t.join()
        assert not errors, errors
        assert sent > 300 and seen[0] > 0
        with open_store(config) as store:
            ids = {r.id for r in store.messages.load().records}
        expected = set(written[0]) | set(written[1])
        assert expected and expected <= ids
    finally:
        stop.set()
        signal.signal(signal.SIGUSR1, previous)
