"""A child process of ``test_speedups.py``'s round trip between the compiled part and the
pure-Python code: ``python -m tests.file.speedups_child DIR ROUND``.

It loads the file journal in ``DIR`` and prints what the load returned, then appends round
``ROUND``'s records (adds, updates, deletes, transactions committed, rolled back and left
prepared; small files, so the journal rolls over and compacts), closes, loads again in a new
journal and prints that too. Each print is one JSON line: the records, the prepared and failed
transactions, the live record count and live bytes, and whether the compiled part ran
(``STORE_NO_SPEEDUPS=1`` in the environment turns it off).

Thread-safety: single-threaded.
"""

from __future__ import annotations

import json
import random
import sys

from store.file.journal import FileJournal
from store.file.options import FileJournalOptions
from store.speedups import SPEEDUPS

FILE_SIZE = 16384


def digest(journal: FileJournal) -> str:
    """What a load of ``journal`` returned, as a JSON line."""
    result = journal.load()
    stats = journal.stats()
    records = [[r.id, r.user_record_type, r.data.hex(), r.is_update] for r in result.records]
    prepared = sorted(
        [p.tx_id, p.xid.hex(), [[r.id, r.data.hex()] for r in p.records], sorted(p.deleted_ids)]
        for p in result.prepared
    )
    return json.dumps(
        {
            "compiled": SPEEDUPS is not None,
            "records": records,
            "prepared": prepared,
            "failed": sorted(result.failed),
            "live": [stats.records_live, stats.bytes_live],
        }
    )


def append_round(journal: FileJournal, round_no: int) -> None:
    """Round ``round_no``'s records (seeded: the same round writes the same records)."""
    rng = random.Random(round_no)
    base = round_no * 10_000
    live: list[int] = []
    for i in range(600):
        rid = base + i
        journal.append_add(rid, rng.randrange(1, 40), rng.randbytes(rng.choice([0, 9, 120, 700])))
        live.append(rid)
        if rng.random() < 0.3:
            journal.append_update(rng.choice(live), 7, rng.randbytes(rng.randrange(30)))
        if rng.random() < 0.25:
            journal.append_delete(live.pop(rng.randrange(len(live))))
    for t in range(12):
        tx = base + 5000 + t
        for k in range(rng.randrange(1, 6)):
            journal.append_add_tx(tx, base + 6000 + t * 10 + k, 3, rng.randbytes(rng.randrange(50)))
        if live and rng.random() < 0.5:
            journal.append_delete_tx(tx, live.pop(rng.randrange(len(live))))
        ending = t % 3
        if ending == 0:
            journal.append_commit(tx, sync=False)
        elif ending == 1:
            journal.append_rollback(tx, sync=False)
        else:
            journal.append_prepare(tx, f"xid-{tx}".encode(), sync=False)
            if t % 2:
                journal.append_commit(tx, sync=False)
    journal.compact()


def main(directory: str, round_no: int) -> None:
    opts = FileJournalOptions(directory=directory, file_size=FILE_SIZE, min_files=2)
    with FileJournal(opts) as journal:
        print(digest(journal), flush=True)
        append_round(journal, round_no)
    with FileJournal(opts) as journal:
        print(digest(journal), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
