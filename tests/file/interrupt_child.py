"""A child process of ``test_writer.py``: ``python -m tests.file.interrupt_child``.

KeyboardInterrupt (a real SIGINT) reaches the main thread while it waits for a sync, queued
first among the waiters. Prints "interrupted" when the wait raised it, then the ids a reload
finds; exits non-zero (an AssertionError) when a sync appender hangs behind the interrupted
one. In a child because only a main thread can be interrupted by a signal, and a test
runner's main thread is not to be interrupted.

Thread-safety: the main thread and the appender threads it starts.
"""

from __future__ import annotations

import signal
import threading

from store.file.journal import FileJournal
from store.file.options import FileJournalOptions
from tests.file.test_writer import _held_sync_journal, _sync_appender, _waiting


def main() -> None:
    # A child inherits an ignored SIGINT (a test runner's worker, a shell's background job),
    # and Python then installs no handler of its own: the signal below would be ignored and
    # the test fail (seen in a run where the worker's SIGINT was ignored).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    fs, journal, holding, go = _held_sync_journal()
    leader = _sync_appender(journal, 1)
    leader.start()
    assert holding.wait(5)
    others = [_sync_appender(journal, 10 + i) for i in range(3)]

    def queue_others_then_interrupt_main() -> None:
        _waiting(journal, 1)  # the main thread's append is queued first
        for t in others:
            t.start()
        _waiting(journal, 4)
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)

    helper = threading.Thread(target=queue_others_then_interrupt_main, daemon=True)
    helper.start()
    try:
        journal.append_add(2, 1, b"main", sync=True)
    except KeyboardInterrupt:
        print("interrupted")
    helper.join(5)
    go.set()
    for t in [leader, *others]:
        t.join(5)
        assert not t.is_alive(), "a sync appender hangs behind the interrupted one"
    journal.append_add(20, 1, b"after", sync=True)
    journal.close()
    again = FileJournal(FileJournalOptions(directory="/j", fs=fs, file_size=65536))
    print(*sorted(r.id for r in again.load().records))
    again.close()


if __name__ == "__main__":
    main()
