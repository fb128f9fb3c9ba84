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
