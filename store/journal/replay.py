"""The replay rules every back-end shares: a stream of journal operations in journal order
becomes a :class:`~store.journal.api.LoadResult`.

The file journal feeds it records as it scans its files, the database store rows as it
streams its table ordered by ``seq``, and the compactor the records of the files it rewrites.
Keeping one implementation is what makes "the same replay rules" true rather than hoped for.

Rules (docs/journal.md, reference behaviours J-18..J-72):

- an add appends an entry; an update appends its own later entry; a non-transactional delete
  removes every entry of its id (adds and updates, also several adds of the same id);
- transactional records are collected per transaction and applied, in the order written, at the
  position of the commit; a delete inside the transaction removes the entries that exist at
  that point (including the transaction's own earlier ones);
- a commit or rollback of a transaction with nothing collected is legal and ignored (its body
  may have been reclaimed, or it was empty);
- a prepare marks the transaction prepared and keeps its XID; at the end, prepared transactions
  that were neither committed nor rolled back are returned with their records and deleted ids;
- a transaction with records but neither prepare, commit nor rollback, or one the caller
  declared broken with :meth:`Replayer.discard`, is *failed*: it contributes nothing and its id
  is reported once, in order of first appearance;
- events are never returned.

Thread-safety: none; one replayer belongs to one load.
"""

from __future__ import annotations

from typing import Final

from store.journal.api import LoadResult, PreparedTransaction, RecordInfo

__all__ = ["OP_ADD", "OP_DELETE", "OP_UPDATE", "Replayer", "TxOp"]

# Operation kinds inside a collected transaction (the first item of a TxOp). Not record types
# (those are store.journal.api.ADD_TX, …): a transaction's operations are replayed as plain
# adds, updates and deletes at its commit.
OP_ADD: Final = 0
OP_UPDATE: Final = 1
OP_DELETE: Final = 2

_new_info = tuple.__new__

TxOp = tuple[int, int, int, bytes]
"""(kind: OP_ADD, OP_UPDATE or OP_DELETE, id, user_record_type, data) of one transactional
record."""


class _Tx:
    __slots__ = ("ops", "prepared", "xid")

    def __init__(self) -> None:
        self.ops: list[TxOp] = []
        self.prepared = False
        self.xid = b""


class Replayer:
    """Accumulates journal operations and produces the load result (see module docstring)."""

    __slots__ = ("_discarded", "_entries", "_index", "_order", "_txs")

    def __init__(self) -> None:
        # Committed entries in journal order; a deleted entry becomes None, dropped at the end.
        self._entries: list[RecordInfo | None] = []
        # id -> index of its entry (int) or indexes of its entries (list) in _entries.
        self._index: dict[int, int | list[int]] = {}
        self._txs: dict[int, _Tx] = {}
        # Transaction ids in order of first appearance (for the failed list).
        self._order: dict[int, None] = {}
        self._discarded: dict[int, None] = {}

    # -- non-transactional -------------------------------------------------------------------

    # add/update are the hot path of every load: the entry bookkeeping is written out in each
    # (one call less per record) and RecordInfo is built with tuple.__new__ (its generated
    # __new__ is a Python-level function).

    def add(self, id: int, user_record_type: int, data: bytes) -> None:
        entries = self._entries
        pos = len(entries)
        entries.append(_new_info(RecordInfo, (id, user_record_type, data, False)))
        index = self._index
        where = index.get(id)
        if where is None:
            index[id] = pos
        elif type(where) is int:
            index[id] = [where, pos]
        else:
            where.append(pos)  # type: ignore[union-attr]

    def update(self, id: int, user_record_type: int, data: bytes) -> None:
        entries = self._entries
        pos = len(entries)
        entries.append(_new_info(RecordInfo, (id, user_record_type, data, True)))
        index = self._index
        where = index.get(id)
        if where is None:
            index[id] = pos
        elif type(where) is int:
            index[id] = [where, pos]
        else:
            where.append(pos)  # type: ignore[union-attr]

    def containers(self) -> tuple[list[RecordInfo | None], dict[int, int | list[int]]]:
        """The entries list and the id index that :meth:`add` and :meth:`update` fill, for a
        compiled loop that applies the same two rules (``store.file.reader.replay_file``)."""
        return self._entries, self._index

    def delete(self, id: int) -> None:
        where = self._index.pop(id, None)
        if where is None:
            return
        entries = self._entries
        if type(where) is int:
            entries[where] = None
        else:
            for i in where:  # type: ignore[union-attr]
                entries[i] = None

    def is_live(self, id: int) -> bool:
        """True if ``id`` has a committed entry right now."""
        return id in self._index

    # -- transactional -----------------------------------------------------------------------

    def _tx(self, tx_id: int) -> _Tx:
        tx = self._txs.get(tx_id)
        if tx is None:
            tx = self._txs[tx_id] = _Tx()
            self._order[tx_id] = None
        return tx

    def add_tx(self, tx_id: int, id: int, user_record_type: int, data: bytes) -> None:
        self._tx(tx_id).ops.append((OP_ADD, id, user_record_type, data))

    def update_tx(self, tx_id: int, id: int, user_record_type: int, data: bytes) -> None:
        self._tx(tx_id).ops.append((OP_UPDATE, id, user_record_type, data))

    def delete_tx(self, tx_id: int, id: int) -> None:
        self._tx(tx_id).ops.append((OP_DELETE, id, 0, b""))

    def prepare(self, tx_id: int, xid: bytes) -> None:
        tx = self._tx(tx_id)
        tx.prepared = True
        tx.xid = xid

    def commit(self, tx_id: int) -> None:
        tx = self._txs.pop(tx_id, None)
        self._order.pop(tx_id, None)
        if tx is None:
            return
        for kind, id, urt, data in tx.ops:
            if kind == OP_ADD:
                self.add(id, urt, data)
            elif kind == OP_UPDATE:
                self.update(id, urt, data)
            else:
                self.delete(id)

    def rollback(self, tx_id: int) -> None:
        self._txs.pop(tx_id, None)
        self._order.pop(tx_id, None)

    def discard(self, tx_id: int) -> None:
        """Drop ``tx_id`` as broken (torn or invalid); it is reported as failed."""
        self._txs.pop(tx_id, None)
        self._order.pop(tx_id, None)
        self._discarded[tx_id] = None

    def is_open(self, tx_id: int) -> bool:
        """True if records, a prepare or anything else was collected for ``tx_id``."""
        return tx_id in self._txs

    def open_transactions(self) -> dict[int, list[TxOp]]:
        """Transactions collected and not completed so far: id -> operations (for the compactor)."""
        return {tx_id: list(tx.ops) for tx_id, tx in self._txs.items()}

    def prepared_xid(self, tx_id: int) -> bytes | None:
        """The XID of ``tx_id`` if it is open and prepared, else None."""
        tx = self._txs.get(tx_id)
        return tx.xid if tx is not None and tx.prepared else None

    # -- result ------------------------------------------------------------------------------

    def result(self) -> LoadResult:
        """The load result; the replayer should not be fed after this."""
        records = [e for e in self._entries if e is not None]
        prepared: list[PreparedTransaction] = []
        failed: list[int] = []
        for tx_id in self._order:
            tx = self._txs[tx_id]
            if tx.prepared:
                infos = [
                    RecordInfo(id, urt, data, kind == OP_UPDATE)
                    for kind, id, urt, data in tx.ops
                    if kind != OP_DELETE
                ]
                deleted = [id for kind, id, _u, _d in tx.ops if kind == OP_DELETE]
                prepared.append(PreparedTransaction(tx_id, tx.xid, infos, deleted))
            else:
                failed.append(tx_id)
        for tx_id in self._discarded:
            if tx_id not in self._order:
                failed.append(tx_id)
        return LoadResult(records, prepared, failed)
