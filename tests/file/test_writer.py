"""What the group-commit writer stamps into records (store.file.writer, store.file.format)."""

from __future__ import annotations

import itertools
from pathlib import Path

from store.file import format as fmt
from store.file.journal import FileJournal
from store.file.options import FileJournalOptions
from store.file.reader import Cursor, scan


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
    import threading
    import time

    from tests.support.faultfs import Call, FaultFileSystem

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
