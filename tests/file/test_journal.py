"""FileJournal load rules end to end on the fault file system: what a reopen reports for a
transaction id that a load declared failed and the application then used again.

A failed id gets a ROLLBACK written at open (store/file/journal.py, ``_start``). docs/journal.md: a
failed id may be refused when used again; if it is accepted (the file journal accepts it), the
new transaction counts in full once committed, and an acknowledged commit is never lost. A new
use that is prepared must be reported prepared only: reporting it failed as well would make
the next open write a ROLLBACK that erases the in-doubt XA transaction.
"""

from __future__ import annotations

import pytest

from store.file import format as fmt
from store.file.journal import FileJournal
from store.file.options import FileJournalOptions
from store.file.reader import Cursor, scan
from store.journal.api import PreparedTransaction, RecordInfo, RecordType
from tests.support.faultfs import FaultFileSystem

DIRECTORY = "/store/journal"


def _fresh() -> FaultFileSystem:
    fs = FaultFileSystem()
    fs.makedirs(DIRECTORY)
    return fs


def _journal(fs: FaultFileSystem) -> FileJournal:
    return FileJournal(
        FileJournalOptions(
            directory=DIRECTORY,
            fs=fs,
            file_size=64 * 1024,
            buffer_timeout_ns=0,
            compact_min_files=0,
        )
    )


def _tear_prepare(fs: FaultFileSystem, tx_id: int) -> None:
    """Rewrites the prepare record of ``tx_id`` so that it counts one record more than its file
    holds (as if one of the transaction's records had been lost): the load discards it."""
    names = sorted(n for n in fs.listdir(DIRECTORY) if n.endswith(".jrn"))
    for name in names:
        path = f"{DIRECTORY}/{name}"
        raw = bytearray(fs.read_file(path))
        header = fmt.decode_header(bytes(raw), path)
        if header is None:
            continue
        for off, length, rtype, urt, cc, lsn, rid, tx, count, body in scan(
            bytes(raw), header.file_id, Cursor()
        ):
            if rtype == RecordType.PREPARE and tx == tx_id:
                rec = fmt.decode_record(bytes(raw), off, header.file_id)
                assert rec is not None
                raw[off : off + length] = fmt.encode_record(
                    rtype,
                    file_id=header.file_id,
                    lsn=lsn,
                    durable_lsn=rec.durable_lsn,
                    id=rid,
                    tx_id=tx,
                    user_type=urt,
                    tx_count=count + 1,
                    body=body,
                    compact_count=cc,
                    flags=rec.flags,
                )
                fs.write_file(path, bytes(raw))
                return
    raise AssertionError(f"no prepare of transaction {tx_id}")


@pytest.mark.parametrize("finish", ["prepare", "commit"])
def test_a_discarded_transaction_id_used_again_counts_in_full(finish: str) -> None:
    """Transaction 7 is torn (its prepare counts a record its file lacks): the load reports it
    failed and writes its ROLLBACK. The id is used again in the same file and prepared (or
    committed, acknowledged). Every later reopen reports the new use: prepared, and then never
    as failed too; or its record committed (the torn first use, still in the file, stays
    reported failed, as the replay rules say; the ROLLBACK each open writes for it comes after
    the commit and cannot undo it, which the second reopen checks)."""
    fs = _fresh()
    journal = _journal(fs)
    journal.load()
    journal.append_add(1, 1, b"before")
    journal.append_add_tx(7, 2, 1, b"first use")
    journal.append_prepare(7, b"xid-1")
    journal.close()
    _tear_prepare(fs, 7)

    journal = _journal(fs)
    first = journal.load()
    assert first.failed == [7] and first.prepared == []
    journal.append_add_tx(7, 3, 1, b"second use")
    if finish == "prepare":
        journal.append_prepare(7, b"xid-2", sync=True)
    else:
        journal.append_commit(7, sync=True)
    journal.close()

    for reopen in (1, 2):  # the second reopen sees what the first one's open wrote
        journal = _journal(fs)
        try:
            got = journal.load()
        finally:
            journal.close()
        if finish == "prepare":
            second = PreparedTransaction(7, b"xid-2", [RecordInfo(3, 1, b"second use", False)], [])
            assert got.failed == [], f"reopen {reopen}: {got}"
            assert got.records == [RecordInfo(1, 1, b"before", False)], f"reopen {reopen}"
            assert got.prepared == [second], f"reopen {reopen}"
        else:
            assert got.failed == [7], f"reopen {reopen}: {got}"
            assert got.records == [
                RecordInfo(1, 1, b"before", False),
                RecordInfo(3, 1, b"second use", False),
            ], f"reopen {reopen}"
            assert got.prepared == [], f"reopen {reopen}"


def test_a_failed_transaction_id_used_again_and_committed_is_not_lost() -> None:
    """Transaction 7 was left open by a crash (no prepare, commit or rollback): the load
    reports it failed and writes its ROLLBACK into the same file; the id is used again and
    its commit acknowledged. The next load must return the committed record."""
    fs = _fresh()
    journal = _journal(fs)
    journal.load()
    journal.append_add_tx(7, 1, 1, b"never committed")
    journal.close()

    journal = _journal(fs)
    assert journal.load().failed == [7]
    journal.append_add_tx(7, 2, 1, b"committed")
    journal.append_commit(7, sync=True)
    journal.close()

    journal = _journal(fs)
    try:
        got = journal.load()
    finally:
        journal.close()
    assert got.records == [RecordInfo(2, 1, b"committed", False)]
    assert got.failed == [] and got.prepared == []
