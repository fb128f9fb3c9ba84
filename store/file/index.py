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

from collections.abc import Iterable

from store.file.segments import Segment
from store.journal.replay import OP_DELETE, OP_UPDATE

__all__ = ["LiveIndex", "TxState", "reclaimable"]


class TxState:
    """An open transaction: its operations and how many of its records each file holds."""

    __slots__ = ("files", "ops", "prepared")

    def __init__(self) -> None:
        # (kind, id, file, size) in the order written; kinds are store.journal.replay's OP_*.
        self.ops: list[tuple[int, int, Segment, int]] = []
        self.files: dict[Segment, int] = {}
        self.prepared = False


class LiveIndex:
    """Live ids, their record locations, and open transactions (see module docstring)."""

    __slots__ = ("records", "txs", "updated_only")

    def __init__(self) -> None:
        # id -> (file, size) of its one positive record, or a flat list
        # [file, size, file, size, ...] once it has several (the tuple is the common case and
        # is cheaper to build for every record of a load).
        self.records: dict[int, tuple[Segment | int, ...] | list[Segment | int]] = {}
        self.txs: dict[int, TxState] = {}
        #: ids in ``records`` whose only positives are updates (committed transactional
        #: updates of an id never added): they load, but they are not live (DESIGN §4).
        self.updated_only: set[int] = set()

    # -- non-transactional -----------------------------------------------------------------

    def is_live(self, id: int) -> bool:
        """True if ``id`` has an add no delete removed since (not only updates)."""
        return id in self.records and not (self.updated_only and id in self.updated_only)

    def add(self, id: int, f: Segment, size: int, *, update: bool = False) -> None:
        """A positive of ``id`` in ``f``: an add, or (``update``) an update."""
        f.pos += 1
        f.live_bytes += size
        records = self.records
        where = records.get(id)
        if not update and self.updated_only:
            self.updated_only.discard(id)
        if where is None:
            if update:
                self.updated_only.add(id)
            records[id] = (f, size)
        elif type(where) is tuple:
            records[id] = [*where, f, size]
        else:
            where.append(f)  # type: ignore[union-attr]
            where.append(size)  # type: ignore[union-attr]

    def delete(self, id: int, d: Segment) -> None:
        """Delete written in file ``d``: cancels every positive of ``id``."""
        where = self.records.pop(id, None)
        if where is None:
            return
        if self.updated_only:
            self.updated_only.discard(id)
        neg = d.neg
        for i in range(0, len(where), 2):
            f: Segment = where[i]  # type: ignore[assignment]
            f.live_bytes -= where[i + 1]  # type: ignore[operator]
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
