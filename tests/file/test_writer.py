"""What the group-commit writer stamps into records (store.file.writer, store.file.format)."""

from __future__ import annotations

import itertools
import subprocess
import sys
import threading
import time
from pathlib import Path

from store.file import format as fmt
from store.file.journal import FileJournal
from store.file.options import FileJournalOptions
from store.file.reader import Cursor, scan
from tests.support.faultfs import Call, FaultFileSystem

ROOT = Path(__file__).resolve().parents[2]


def test_records_say_the_previous_file_was_durable_before_them(tmp_path: Path) -> None:
    """FLOOR: every appended record carries the flag, and the first record of each file has
    ``durable_lsn`` at least the previous file's last lsn, even when nothing was synced."""
    options = FileJournalOptions(
        directory=str(tmp_path), file_size=8192, buffer_timeout_ns=50_000_000, min_files=2
    )
    journal = FileJournal(options)
    journal.load()
    for i in range(300):
        journal.append_add(i, 1, b"x" * 100)  # never sync: durable_lsn stays behind
    journal.close()
    files = sorted(p for p in tmp_path.iterdir() if p.suffix == ".jrn")
    runs = []
    for path in files:
        data = path.read_bytes()
        header = fmt.decode_header(data, str(path))
        assert header is not None
        records = [
            fmt.decode_record(data, raw[0], header.file_id)
            for raw in scan(data, header.file_id, Cursor())
        ]
        if records:
            runs.append(records)
    assert len(runs) > 3
    for previous, current in itertools.pairwise(runs):
        first = current[0]
        assert first is not None and first.flags & fmt.FLAG_FLOOR
        assert previous[-1] is not None and first.durable_lsn >= previous[-1].lsn
    assert all(r is not None and r.flags & fmt.FLAG_FLOOR for run in runs for r in run)


def test_an_append_made_while_a_sync_round_writes_is_written_within_the_buffer_timeout() -> None:
    """A non-sync append that lands while a syncing round holds the flusher role is written
    by the background flusher within the buffer timeout, not left in the buffer until the
    next append wakes it (the flusher looked while the round ran and went back to sleep)."""
    fs = FaultFileSystem()
    fs.makedirs("/j")
    journal = FileJournal(
        FileJournalOptions(directory="/j", fs=fs, file_size=65536, buffer_timeout_ns=1_000_000)
    )
    journal.load()
    w = journal.writer
    assert w is not None
    armed = threading.Event()

    def during_sync(call: Call) -> None:
        if call.kind == "datasync" and call.phase == "before" and armed.is_set():
            armed.clear()
            journal.append_add(2, 1, b"late")  # wakes the background flusher ...
            time.sleep(0.2)  # ... which looks, sees this round flushing, and sleeps again

    fs.watch(during_sync)
    armed.set()
    journal.append_add(1, 1, b"first", sync=True)
    deadline = time.monotonic() + 0.5  # 500 buffer timeouts; the flusher's nap is 1 s
    while w.buf and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not w.buf, "the late append is still in the buffer"
    journal.close()


def _held_sync_journal() -> tuple[FaultFileSystem, FileJournal, threading.Event, threading.Event]:
    """A journal on the fault layer whose syncs wait until let go: returns the file system,
    the journal, an event set when a sync is being held, and the event that lets them go."""
    fs = FaultFileSystem()
    fs.makedirs("/j")
    journal = FileJournal(FileJournalOptions(directory="/j", fs=fs, file_size=65536))
    journal.load()
    holding, go = threading.Event(), threading.Event()

    def hold(call: Call) -> None:
        if call.kind == "datasync" and call.phase == "before" and not go.is_set():
            holding.set()
            assert go.wait(10), "the held sync was never let go"

    fs.watch(hold)
    return fs, journal, holding, go


def _waiting(journal: FileJournal, count: int) -> None:
    """Returns once ``count`` sync appenders are queued as waiters."""
    w = journal.writer
    assert w is not None
    deadline = time.monotonic() + 5
    while len(w._waiters) < count:
        assert time.monotonic() < deadline, f"{len(w._waiters)} waiters, expected {count}"
        time.sleep(0.005)


def _sync_appender(journal: FileJournal, id_: int) -> threading.Thread:
    return threading.Thread(
        target=journal.append_add, args=(id_, 1, b"x"), kwargs={"sync": True}, daemon=True
    )


def test_a_sync_appender_interrupted_while_waiting_does_not_strand_the_others() -> None:
    """KeyboardInterrupt reaches a main thread while it waits for a sync, queued first (so it
    would be the next leader, the one to flush for the others). The others still complete and
    the journal still works: nothing waits for a thread that is gone. Run in a child process
    (``tests/file/interrupt_child.py``), whose main thread the signal can interrupt."""
    out = subprocess.run(
        [sys.executable, "-m", "tests.file.interrupt_child"],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.split() == ["interrupted", "1", "2", "10", "11", "12", "20"]


def test_an_interrupted_link_of_a_wake_chain_still_wakes_the_rest() -> None:
    """The waiters a sync covered are woken one after another, each by the one before; a
    waiter interrupted before its turn (already covered, so durable) wakes the next itself,
    and the next leader, a link of the chain, still flushes."""
    _, journal, holding, go = _held_sync_journal()
    w = journal.writer
    assert w is not None
    leader = _sync_appender(journal, 1)
    leader.start()
    assert holding.wait(5)
    firsts = [_sync_appender(journal, 10 + i) for i in range(3)]
    for t in firsts:  # queued while the leader syncs: not covered by its sync
        t.start()
    _waiting(journal, 3)
    with w.lock:
        chain = list(w._waiters)
    go.set()
    for t in [leader, *firsts]:
        t.join(5)
        assert not t.is_alive()
    # The first round woke the oldest as leader; its round covered the other two, woken as
    # a chain behind it: each link points at the next one.
    assert chain[0].leader and chain[1].next is chain[2] and chain[2].next is None

    # A chain whose middle link was interrupted: the waiter after it is woken all the same.
    from store.file.writer import Waiter

    a, b, c = Waiter(1), Waiter(2), Waiter(3)
    a.next, b.next = b, c
    a.lock.release()  # the flusher wakes the first link; its thread passes the baton on
    w._pass_on(a)
    w._abandon(b)  # b's thread was interrupted before it took its turn
    assert c.lock.acquire(timeout=1), "the link after the interrupted one was never woken"
    journal.close()


def test_the_next_leader_is_woken_next_to_last_and_wakes_the_last_link() -> None:
    """A round that covers waiters while another waits uncovered wakes the covered ones as a
    chain with the uncovered one, the next leader, next to last: it wakes the last link before
    its own round, so that link's work overlaps the leader's write and sync."""
    fs = FaultFileSystem()
    fs.makedirs("/j")
    journal = FileJournal(FileJournalOptions(directory="/j", fs=fs, file_size=65536))
    journal.load()
    w = journal.writer
    assert w is not None
    held, gate = threading.Semaphore(0), threading.Semaphore(0)

    def hold(call: Call) -> None:
        if call.kind == "datasync" and call.phase == "before":
            held.release()
            assert gate.acquire(timeout=10), "a held sync was never let go"

    fs.watch(hold)
    threads = [_sync_appender(journal, 1)]
    threads[0].start()
    assert held.acquire(timeout=5)  # round 1 (record 1) is syncing
    threads += [_sync_appender(journal, 10 + i) for i in range(3)]
    for t in threads[1:]:
        t.start()
    _waiting(journal, 3)  # records 10, 11, 12: after round 1's snapshot
    gate.release()  # round 1 ends: record 10's waiter leads round 2, which takes 10..12
    assert held.acquire(timeout=5)
    late = _sync_appender(journal, 20)
    late.start()
    _waiting(journal, 3)  # 11 and 12 (covered by round 2) and 20 (not)
    with w.lock:
        b, c, d = w._waiters
    for _ in range(10):
        gate.release()
    for t in [*threads, late]:
        t.join(5)
        assert not t.is_alive()
    assert d.leader and not b.leader and not c.leader
    assert (b.next, d.next, c.next) == (d, c, None), "the chain is not B -> leader -> C"
    journal.close()
