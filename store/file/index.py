"""In-memory bookkeeping of the file journal: which ids are live, where their records are, and
the per-file positive/negative counts that decide when a file can be reclaimed.

The same methods run for every record a load reads and for every record an append writes, so
the state after a restart is the state before it (the runtime never keeps a second version of
these rules).

Counting (reference §2.8, Artemis's Reclaimer):

- an add or update written in file F is a **positive** of F (``F.pos``);
- a delete written in file D cancels every positive of its id: ``D.neg[F] += 1`` for each;
- a transaction pins each file it writes records into with one positive; its commit or rollback
  written in file C unpins them with ``C.neg[F] += 1``; on commit its adds and updates become
  positives of the files they were written in, and each of its deletes counts as a negative of
  the file the delete record was written in (that file must outlive the deleted record);
- ``live_bytes`` of a file is the size of its records that are still needed.

Thread-safety: none. The journal calls these methods under its append lock, or single-threaded
during load.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from store.file.segments import Segment
from store.journal.replay import OP_DELETE, OP_UPDATE

__all__ = ["ENTRY_SHIFT", "ENTRY_SIZE", "LiveIndex", "TxState", "reclaimable"]


class TxState:
    """An open transaction: its operations and how many of its records each file holds."""

    __slots__ = ("files", "ops", "prepared", "runs")

    def __init__(self) -> None:
        # (kind, id, file, size) in the order written; kinds are store.journal.replay's OP_*,
        # and OP_DELETES: the deletes of the ids of ``runs[id]``, ``size`` bytes in all.
        self.ops: list[tuple[int, int, Segment, int]] = []
        self.runs: list[Sequence[int]] = []
        self.files: dict[Segment, int] = {}
        self.prepared = False


#: A run of a transaction's deletes in one op (``LiveIndex.tx_records``): no tuple per id.
OP_DELETES: Final = 3


#: An index entry packs the file id of the file holding a positive with the size of its
#: record: ``file_id << ENTRY_SHIFT | size`` (a record is under 4 GiB: its length is a u32).
#: An int is not tracked by the cyclic garbage collector and is half the size of a
#: ``(segment, size)`` tuple: at a million live records the difference is 40 MB, and every
#: tuple allocated by an append counted towards the next collection.
ENTRY_SHIFT = 32
ENTRY_SIZE = (1 << ENTRY_SHIFT) - 1


class LiveIndex:
    """Live ids, their record locations, and open transactions (see module docstring)."""

    __slots__ = ("files", "records", "txs", "updated_only")

    def __init__(self) -> None:
        # id -> the entry of its one positive record (ENTRY_SHIFT), or a list of entries once
        # it has several (the int is the common case and the cheapest to build).
        self.records: dict[int, int | list[int]] = {}
        #: The files entries can name, by file id: every file a record is added or replayed
        #: into is entered first (:meth:`enter`), and leaves when it is reclaimed.
        self.files: dict[int, Segment] = {}
        self.txs: dict[int, TxState] = {}
        #: ids in ``records`` whose only positives are updates (committed transactional
        #: updates of an id never added): they load, but they are not live (docs/journal.md).
        self.updated_only: set[int] = set()

    def enter(self, f: Segment) -> None:
        """``f`` (with its current file id) may hold records from now on."""
        self.files[f.file_id] = f

    def leave(self, f: Segment) -> None:
        """``f`` holds no live record any more (reclaimed): forget its file id."""
        if self.files.get(f.file_id) is f:
            del self.files[f.file_id]

    def files_of(self, id: int) -> list[Segment]:
        """The files holding the positives of ``id``, oldest first (none if not in the index)."""
        where = self.records.get(id)
        if where is None:
            return []
        entries = [where] if type(where) is int else where
        return [self.files[e >> ENTRY_SHIFT] for e in entries]  # type: ignore[union-attr]

    # -- non-transactional -----------------------------------------------------------------

    def is_live(self, id: int) -> bool:
        """True if ``id`` has an add no delete removed since (not only updates)."""
        return id in self.records and not (self.updated_only and id in self.updated_only)

    def add(self, id: int, f: Segment, size: int, *, update: bool = False) -> None:
        """A positive of ``id`` in ``f`` (entered): an add, or (``update``) an update."""
        f.pos += 1
        f.live_bytes += size
        records = self.records
        where = records.get(id)
        if not update and self.updated_only:
            self.updated_only.discard(id)
        entry = f.file_id << ENTRY_SHIFT | size
        if where is None:
            if update:
                self.updated_only.add(id)
            records[id] = entry
        elif type(where) is int:
            records[id] = [where, entry]
        else:
            where.append(entry)  # type: ignore[union-attr]

    def delete(self, id: int, d: Segment) -> None:
        """Delete written in file ``d``: cancels every positive of ``id``."""
        where = self.records.pop(id, None)
        if where is None:
            return
        if self.updated_only:
            self.updated_only.discard(id)
        neg = d.neg
        files = self.files
        if type(where) is int:
            f = files[where >> ENTRY_SHIFT]
            f.live_bytes -= where & ENTRY_SIZE
            neg[f] = neg.get(f, 0) + 1
            return
        for entry in where:  # type: ignore[union-attr]
            f = files[entry >> ENTRY_SHIFT]
            f.live_bytes -= entry & ENTRY_SIZE
            neg[f] = neg.get(f, 0) + 1

    # -- transactional ---------------------------------------------------------------------

    def tx(self, tx_id: int) -> TxState:
        state = self.txs.get(tx_id)
        if state is None:
            state = self.txs[tx_id] = TxState()
        return state

    def tx_record(self, tx_id: int, kind: int, id: int, f: Segment, size: int) -> None:
        state = self.tx(tx_id)
        files = state.files
        count = files.get(f)
        if count is None:
            files[f] = 1
            f.pos += 1  # the pin, cancelled by the commit or rollback
        else:
            files[f] = count + 1
        f.live_bytes += size
        state.ops.append((kind, id, f, size))

    def tx_records(self, tx_id: int, kind: int, ids: Sequence[int], f: Segment, size: int) -> None:
        """:meth:`tx_record` of each of ``ids``, all written in ``f`` and ``size`` bytes each,
        in one step (``FileJournal.append_deletes_tx``)."""
        if not ids:
            return
        state = self.tx(tx_id)
        files = state.files
        count = files.get(f)
        if count is None:
            files[f] = len(ids)
            f.pos += 1  # the pin, cancelled by the commit or rollback
        else:
            files[f] = count + len(ids)
        f.live_bytes += size * len(ids)
        if kind == OP_DELETE:  # one op for the run: a tuple per id costs 5 ms a 50,000
            state.ops.append((OP_DELETES, len(state.runs), f, size * len(ids)))
            state.runs.append(ids)
        else:
            state.ops.extend([(kind, id, f, size) for id in ids])

    def tx_count(self, tx_id: int, f: Segment) -> int:
        """How many records of ``tx_id`` file ``f`` holds (written into prepare/commit)."""
        state = self.txs.get(tx_id)
        return 0 if state is None else state.files.get(f, 0)

    def prepare_in(self, tx_id: int, f: Segment) -> None:
        """A prepare record written in ``f``: the transaction also pins that file."""
        state = self.tx(tx_id)
        state.prepared = True
        if f not in state.files:
            state.files[f] = 0
            f.pos += 1

    def commit(self, tx_id: int, c: Segment) -> None:
        state = self.txs.pop(tx_id, None)
        if state is None:
            return
        self._unpin(state, c)
        for kind, id, f, size in state.ops:
            if kind == OP_DELETE:
                f.live_bytes -= size
                self.delete(id, f)
            elif kind == OP_DELETES:
                f.live_bytes -= size
                for one in state.runs[id]:
                    self.delete(one, f)
            else:
                f.live_bytes -= size  # re-added as a positive just below
                self.add(id, f, size, update=kind == OP_UPDATE)

    def rollback(self, tx_id: int, r: Segment) -> None:
        state = self.txs.pop(tx_id, None)
        if state is None:
            return
        self._unpin(state, r)
        for _kind, _id, f, size in state.ops:
            f.live_bytes -= size

    def discard(self, tx_id: int, r: Segment) -> None:
        """A transaction found broken at load: forget it as if rolled back in ``r``."""
        self.rollback(tx_id, r)

    @staticmethod
    def _unpin(state: TxState, c: Segment) -> None:
        neg = c.neg
        for f in state.files:
            neg[f] = neg.get(f, 0) + 1

    def live_count(self) -> int:
        return len(self.records)


def reclaimable(
    files: list[Segment], current: Segment, blocked: Iterable[Segment] = ()
) -> list[Segment]:
    """The data files that can be reused without bringing a deleted record back.

    ``files`` are the data files in journal order (``current`` excluded); ``blocked`` are files
    that must stay for another reason (a retention copy pending). A file qualifies when every
    positive in it is cancelled (by negatives in any present file) and it holds no negative
    aimed at a present file that stays (reclaiming it would resurrect that file's deleted
    records). The second rule depends on the answer for other files, so it is iterated to a
    fixed point.
    """
    present = [*files, current]
    blocked_set = set(blocked)
    cancelled: dict[Segment, int] = {}
    for f in present:
        for target, n in f.neg.items():
            cancelled[target] = cancelled.get(target, 0) + n
    candidates = {f for f in files if f not in blocked_set and cancelled.get(f, 0) >= f.pos}
    present_set = set(present)
    changed = True
    while changed:
        changed = False
        for f in list(candidates):
            for target, n in f.neg.items():
                if n and target is not f and target in present_set and target not in candidates:
                    candidates.discard(f)
                    changed = True
                    break
    return [f for f in files if f in candidates]
