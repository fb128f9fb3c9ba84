"""store.file.survey: the read-only replay of ``store data print`` returns what a load returns."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from store.file import survey
from store.file.journal import FileJournal
from store.file.options import FileJournalOptions
from store.journal.api import RecordType
from tests.file.handbuilt import SIZE, A, Builder, ids, load


def test_offline_replay_fails_transactions_whose_record_count_does_not_match(
    tmp_path: Path,
) -> None:
    """A prepare or commit says how many of its transaction's records its file holds; when the
    count is off (records lost), the load reports the transaction failed, and so does the
    offline replay."""
    b = Builder().file(A).rec(id=1)
    b.rec(RecordType.ADD_TX, tx_id=9, id=90).rec(RecordType.COMMIT, tx_id=9, tx_count=2, body=b"")
    b.rec(RecordType.ADD_TX, tx_id=8, id=80).rec(RecordType.ADD_TX, tx_id=8, id=81)
    b.rec(RecordType.COMMIT, tx_id=8, tx_count=2, body=b"")
    b.rec(RecordType.ADD_TX, tx_id=7, id=70)
    b.rec(RecordType.PREPARE, tx_id=7, tx_count=0, body=b"xid-7")
    b.write(tmp_path / "j")
    offline = survey.scan_journal(str(tmp_path / "j"), replay=True)
    assert offline.replay is not None
    result = offline.replay.result()
    assert ids(result) == [1, 80, 81]
    assert sorted(result.failed) == [7, 9] and result.prepared == []
    assert result == load(tmp_path / "j")


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_offline_replay_returns_what_a_load_returns(tmp_path: Path, seed: int) -> None:
    """Random adds, updates, deletes and transactions (committed, rolled back, prepared, left
    open) written by the real journal: the read-only replay of print / recover agrees with
    FileJournal.load(), also across files."""
    rng = random.Random(seed)
    directory = tmp_path / "j"
    opts = FileJournalOptions(directory=str(directory), file_size=SIZE, compact_min_files=0)
    live: set[int] = set()
    with FileJournal(opts) as j:
        j.load()
        next_id = 1
        for tx in range(1, 40):
            op = rng.random()
            if op < 0.4 or not live:
                j.append_add(next_id, rng.randrange(256), rng.randbytes(rng.randrange(80)))
                live.add(next_id)
                next_id += 1
            elif op < 0.55:
                j.append_update(rng.choice(sorted(live)), 3, b"upd")
            elif op < 0.7:
                victim = rng.choice(sorted(live))
                j.append_delete(victim)
                live.discard(victim)
            else:
                added = []
                for _ in range(rng.randrange(1, 4)):
                    j.append_add_tx(tx, next_id, 5, rng.randbytes(30))
                    added.append(next_id)
                    next_id += 1
                gone = rng.choice(sorted(live)) if rng.random() < 0.5 else None
                if gone is not None:
                    j.append_delete_tx(tx, gone)
                end = rng.choice(["commit", "rollback", "prepare", "open"])
                if end == "commit":
                    j.append_commit(tx)
                    live.update(added)
                    live.discard(gone if gone is not None else 0)
                elif end == "rollback":
                    j.append_rollback(tx)
                elif end == "prepare":
                    j.append_prepare(tx, f"xid-{tx}".encode())
    offline = survey.scan_journal(str(directory), replay=True)
    assert offline.replay is not None
    assert offline.replay.result() == load(directory)

