"""Which rows of a journal table hold what: the in-memory index that lets a database journal
delete rows physically and clean up transaction rows without ever leaving one behind.

:class:`store.journal.replay.Replayer` decides what a load *returns*; this index decides which
*rows* may go. The journal feeds it every append, and a load feeds it every row, through the
same methods, so the bookkeeping after a restart is the bookkeeping before it.

Rows and the deletes they get (reference §4.5, §4.6; the bounds fix Artemis's leaks):

- A non-transactional add/update of ``id`` is one row. A delete of ``id`` removes the entries
  a load would show: the non-transactional rows (``delete_records(id, hi=<delete seq>)``) and
  the add/update rows of every *committed* transaction that still holds ``id``
  (``delete_tx_records(id, tx, lo, hi)``, ``[lo, hi)`` being that transaction's rows). Rows
  of *open* transactions are never touched: a prepared transaction keeps its records.
- The ``hi`` bound makes the order of a batch's statements irrelevant: an id deleted and
  added again within one batch keeps its new row (Artemis deletes it).
- The ``lo`` bound keeps two transactions that reuse one id apart.
- A transaction's rows (its records, delete-tx rows, prepare and commit) stay while any id it
  committed is still live; the delete that kills its last id also deletes them all
  (``delete_transactions(tx, lo, hi)``). A rollback deletes them at once (no rollback row is
  stored). At load, transactions that never completed, commit rows whose transaction left no
  rows, and rows of kinds this store never writes are deleted in the first batch.

Each change appends its delete work to ``out``, an object with the four lists
``records``, ``tx_records``, ``transactions`` and ``rows`` (the pending batch); appending to
the batch under the journal's lock is what puts a delete in the same database transaction as
the record that caused it.

Counts: ``rows`` is the number of rows the journal needs (what the table holds once pending
batches commit and dead rows are gone); ``entries`` the number of live entries (adds plus
updates); ``len(live)`` the number of live ids.

Thread-safety: none; the journal calls it under its lock.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Final, Protocol

from store.journal.api import ADD as _ADD
from store.journal.api import DELETE_TX as _DELETE_TX
from store.journal.api import UPDATE as _UPDATE
from store.journal.api import UPDATE_TX as _UPDATE_TX
from store.journal.api import RecordType

__all__ = ["CleanupSink", "RowIndex", "TxHolder"]

_TX_KINDS: Final = frozenset(
    int(t)
    for t in (
        RecordType.ADD_TX,
        RecordType.UPDATE_TX,
        RecordType.DELETE_TX,
        RecordType.PREPARE,
        RecordType.COMMIT,
    )
)


class CleanupSink(Protocol):
    """Where delete work goes: the pending batch's lists (see module docstring).

    Thread-safety: used under the journal's lock.
    """

    records: list[tuple[int, int]]
    tx_records: list[tuple[int, int, int, int]]
    transactions: list[tuple[int, int, int]]
    rows: list[Any]


class TxHolder:
    """One transaction instance: open (``ops`` collected) or committed (``alive`` ids left).

    Thread-safety: none; used under the journal's lock.
    """

    __slots__ = ("alive", "commit_seq", "first_seq", "ops", "prepared", "rows", "tx_id")

    def __init__(self, tx_id: int, first_seq: int) -> None:
        self.tx_id = tx_id
        self.first_seq = first_seq
        #: 0 while open; the seq of the commit row after.
        self.commit_seq = 0
        #: (kind, id, seq) of each record while open; None once committed.
        self.ops: list[tuple[int, int, int]] | None = []
        self.prepared = False
        #: ids whose entries from this transaction are still live (after commit).
        self.alive = 0
        #: rows of this transaction still in the table.
        self.rows = 0


class _Owners:
    """A live id with entries from transactions: its non-tx row count and, per committed
    transaction, how many of that transaction's rows hold it.

    Thread-safety: none; used under the journal's lock.
    """

    __slots__ = ("holders", "nontx")

    def __init__(self, nontx: int) -> None:
        self.nontx = nontx
        self.holders: dict[TxHolder, int] = {}


class RowIndex:
    """The row bookkeeping of one journal table (see module docstring).

    Thread-safety: none; the journal calls it under its lock.
    """

    __slots__ = ("committed", "entries", "live", "open_txs", "rows", "updated_only")

    def __init__(self) -> None:
        #: id -> number of non-tx rows (int), or _Owners when transactions hold it too.
        self.live: dict[int, int | _Owners] = {}
        self.open_txs: dict[int, TxHolder] = {}
        #: committed transactions with live records, by id (a tx id may be reused, hence lists).
        self.committed: dict[int, list[TxHolder]] = {}
        self.entries = 0
        self.rows = 0
        #: ids in ``live`` whose only entries are committed transactional updates: they load,
        #: but they are not live (docs/journal.md; Artemis refuses a plain update or delete too).
        self.updated_only: set[int] = set()

    # -- non-transactional --------------------------------------------------------------------

    def add(self, id: int) -> None:
        """Record a non-transactional add (or, at load, any non-tx record row)."""
        if self.updated_only:
            self.updated_only.discard(id)
        v = self.live.get(id, 0)
        if type(v) is int:
            self.live[id] = v + 1
        else:
            v.nontx += 1  # type: ignore[union-attr]
        self.entries += 1
        self.rows += 1

    def add_many(self, ids: list[int]) -> None:
        """Record many non-transactional rows at once (a load's adds and updates, in bulk: the
        counting runs in C rather than one call per row)."""
        if not ids:
            return
        if self.updated_only:
            self.updated_only.difference_update(ids)
        counts = Counter(ids)
        live = self.live
        if not live:
            live.update(counts)
        else:
            for id, n in counts.items():
                v = live.get(id, 0)
                if type(v) is int:
                    live[id] = v + n
                else:
                    v.nontx += n  # type: ignore[union-attr]
        self.entries += len(ids)
        self.rows += len(ids)

    def update(self, id: int) -> bool:
        """Record a non-transactional update; False (and nothing recorded) if ``id`` is not live."""
        v = self.live.get(id)
        if v is None or (self.updated_only and id in self.updated_only):
            return False
        if type(v) is int:
            self.live[id] = v + 1
        else:
            v.nontx += 1  # type: ignore[union-attr]
        self.entries += 1
        self.rows += 1
        return True

    def delete(self, id: int, seq: int, out: CleanupSink) -> bool:
        """Delete ``id`` at position ``seq``; False if it is not live."""
        return self._delete(id, seq, out, None, 0)

    def _delete(
        self, id: int, hi: int, out: CleanupSink, committing: TxHolder | None, self_hi: int
    ) -> bool:
        v = self.live.pop(id, None)
        if v is None:
            return False
        if self.updated_only:
            self.updated_only.discard(id)
        if type(v) is int:
            self.entries -= v
            self.rows -= v
            out.records.append((id, hi))
            return True
        owners: _Owners = v  # type: ignore[assignment]
        if owners.nontx:
            self.entries -= owners.nontx
            self.rows -= owners.nontx
            out.records.append((id, hi))
        for holder, n in owners.holders.items():
            self.entries -= n
            self.rows -= n
            holder.rows -= n
            holder.alive -= 1
            if holder is committing:
                # The committing transaction's own earlier rows of id, and only those.
                out.tx_records.append((id, holder.tx_id, holder.first_seq, self_hi))
            else:
                out.tx_records.append((id, holder.tx_id, holder.first_seq, holder.commit_seq))
                if holder.alive == 0:
                    self._drop(holder, holder.commit_seq, out)
        return True

    def is_live(self, id: int) -> bool:
        """True if ``id`` is live: it has entries and they are not only transactional updates."""
        return id in self.live and not (self.updated_only and id in self.updated_only)

    # -- transactional ------------------------------------------------------------------------

    def tx_record(self, tx_id: int, kind: int, id: int, seq: int) -> None:
        """Record an add-tx / update-tx / delete-tx row (``kind`` is its RecordType)."""
        holder = self.open_txs.get(tx_id)
        if holder is None:
            holder = self.open_txs[tx_id] = TxHolder(tx_id, seq)
        holder.ops.append((kind, id, seq))  # type: ignore[union-attr]
        holder.rows += 1
        self.rows += 1

    def prepare(self, tx_id: int, seq: int) -> None:
        """Record a prepare row (a transaction may be prepared with no records)."""
        holder = self.open_txs.get(tx_id)
        if holder is None:
            holder = self.open_txs[tx_id] = TxHolder(tx_id, seq)
        holder.prepared = True
        holder.rows += 1
        self.rows += 1

    def is_open(self, tx_id: int) -> bool:
        """True if ``tx_id`` has records, or a prepare, and no commit or rollback yet."""
        return tx_id in self.open_txs

    def commit(self, tx_id: int, seq: int, out: CleanupSink) -> bool:
        """Commit ``tx_id`` with its commit row at ``seq``; False if it is not open."""
        holder = self.open_txs.pop(tx_id, None)
        if holder is None:
            return False
        holder.commit_seq = seq
        holder.rows += 1
        self.rows += 1
        ops, holder.ops = holder.ops, None
        for kind, id, op_seq in ops or ():
            if kind == _DELETE_TX:
                self._delete(id, seq, out, holder, op_seq)
            else:
                self._own(id, holder, update=kind == _UPDATE_TX)
        if holder.alive == 0:
            self._drop(holder, seq, out)
        else:
            self.committed.setdefault(tx_id, []).append(holder)
        return True

    def _own(self, id: int, holder: TxHolder, *, update: bool) -> None:
        v = self.live.get(id)
        if update:
            if v is None:
                self.updated_only.add(id)
        elif self.updated_only:
            self.updated_only.discard(id)
        if v is None or type(v) is int:
            owners = _Owners(v or 0)  # type: ignore[arg-type]
            self.live[id] = owners
        else:
            owners = v  # type: ignore[assignment]
        n = owners.holders.get(holder)
        if n is None:
            owners.holders[holder] = 1
            holder.alive += 1
        else:
            owners.holders[holder] = n + 1
        self.entries += 1

    def rollback(self, tx_id: int, seq: int, out: CleanupSink) -> bool:
        """Roll back ``tx_id`` at ``seq``: all of its rows go; False if it is not open."""
        holder = self.open_txs.pop(tx_id, None)
        if holder is None:
            return False
        self._drop(holder, seq, out)
        return True

    def _drop(self, holder: TxHolder, hi: int, out: CleanupSink) -> None:
        out.transactions.append((holder.tx_id, holder.first_seq, hi))
        self.rows -= holder.rows
        holder.rows = 0
        if holder.commit_seq:
            same = self.committed.get(holder.tx_id)
            if same is not None and holder in same:
                same.remove(holder)
                if not same:
                    del self.committed[holder.tx_id]

    # -- compaction ---------------------------------------------------------------------------

    def row_needed(self, seq: int, id: int, rt: int, tx_id: int) -> bool:
        """Whether the row (``seq``, ``id``, ``rt``, ``tx_id``) holds something a load needs:
        a non-tx row of a live id, or a row inside a transaction that is open or committed
        with live records."""
        if rt in (_ADD, _UPDATE):
            v = self.live.get(id)
            return v is not None and (type(v) is int or v.nontx > 0)  # type: ignore[union-attr]
        if rt not in _TX_KINDS:
            return False
        holder = self.open_txs.get(tx_id)
        if holder is not None and holder.first_seq <= seq:
            return True
        return any(h.first_seq <= seq <= h.commit_seq for h in self.committed.get(tx_id, ()))

    # -- load only ----------------------------------------------------------------------------

    def orphan_row(self, seq: int, out: CleanupSink) -> None:
        """A loaded row no replay needs (a commit or rollback of no open transaction, an event,
        a delete row): delete it."""
        out.rows.append((seq,))

    def fail_open(self, last_seq: int, out: CleanupSink) -> list[int]:
        """End of a load: transactions neither prepared nor completed are dropped with their
        rows. Returns their ids in order of first appearance."""
        failed = [h for h in self.open_txs.values() if not h.prepared]
        for holder in failed:
            del self.open_txs[holder.tx_id]
            self._drop(holder, last_seq, out)
        return [h.tx_id for h in failed]

    def counts(self) -> dict[str, int]:
        """Bookkeeping figures for ``stats().extra``."""
        return {
            "live_ids": len(self.live),
            "live_entries": self.entries,
            "rows_needed": self.rows,
            "open_transactions": len(self.open_txs),
        }
