"""The one row dispatch of a database journal table: what each row means to a load.

``DatabaseJournal.load`` (:mod:`store.db.journal`) and ``store data verify``
(:mod:`store.data.db_check.verify`) both feed the table's rows, in ``seq`` order, through
:class:`RowReplay`, so the verifier's judgement of a table is the load's own. A row is a tuple
in the order of :data:`store.db.dialects.LOAD_COLUMNS`: ``(id, recordtype, txid,
userrecordtype, record, txdata, seq)``; ``record`` and ``txdata`` may be None (empty).

The rules (the row layout is in :mod:`store.db.journal`'s docstring):

=================================  ==========================================================
``recordtype``                     what the row does
=================================  ==========================================================
ADD, UPDATE                        the record to the :class:`~store.journal.replay.Replayer`;
                                   its id to :attr:`RowReplay.plain`, counted into the
                                   :class:`~store.db.rows.RowIndex` in bulk before the next
                                   row of any other kind (so the index sees table order)
ADD_TX, UPDATE_TX, DELETE_TX       the transaction's record to both
PREPARE                            the transaction prepared (``txdata`` is its XID)
COMMIT, ROLLBACK                   the transaction completed; a row of no open transaction is
                                   an orphan: its deletion goes to the sink
DELETE                             the record deleted; the row itself is an orphan
EVENT                              an orphan (the database store keeps no retention)
anything else                      CorruptionError naming the table and ``seq``
=================================  ==========================================================

The load replays runs of ADD and UPDATE rows in C where it can (``replay_rows`` in
``store/_speedups_load.c``, the same two rules, appending to the same :attr:`RowReplay.plain`; a
differential test in ``tests/db/test_journal.py`` ties the two) and hands every other row to
:meth:`RowReplay.feed`.

Thread-safety: none; one load or one verify owns a RowReplay.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

from store.db.rows import CleanupSink, RowIndex
from store.errors import CorruptionError
from store.journal.api import ADD as _ADD
from store.journal.api import ADD_TX as _ADD_TX
from store.journal.api import COMMIT as _COMMIT
from store.journal.api import DELETE as _DELETE
from store.journal.api import DELETE_TX as _DELETE_TX
from store.journal.api import EVENT as _EVENT
from store.journal.api import PREPARE as _PREPARE
from store.journal.api import ROLLBACK as _ROLLBACK
from store.journal.api import UPDATE as _UPDATE
from store.journal.api import UPDATE_TX as _UPDATE_TX
from store.journal.replay import Replayer

__all__ = ["RowReplay"]

_EMPTY: Final = b""


class RowReplay:
    """Feeds one table's rows to a replayer and a row index by the load's rules (module
    docstring); the delete work a load queues goes to ``sink``.

    ``plain`` holds the ids of ADD and UPDATE rows not yet counted into the index; call
    :meth:`flush` after the last row. Thread-safety: none.
    """

    __slots__ = ("index", "plain", "replayer", "sink", "table")

    def __init__(self, replayer: Replayer, index: RowIndex, sink: CleanupSink, table: str) -> None:
        self.replayer = replayer
        self.index = index
        self.sink = sink
        self.table = table
        self.plain: list[int] = []

    def feed(self, rows: Iterable[Sequence[Any]]) -> None:
        """Apply the rules to ``rows``, in order. Raises CorruptionError at a row whose
        ``recordtype`` is not 10..19 (the rows before it are applied, ``plain`` counted)."""
        replayer = self.replayer
        add, update, note = replayer.add, replayer.update, self.plain.append
        for id, rt, txid, urt, record, txdata, seq in rows:
            if rt == _ADD:
                add(id, urt, record or _EMPTY)
                note(id)
            elif rt == _UPDATE:
                update(id, urt, record or _EMPTY)
                note(id)
            else:
                self.flush()
                self._other(id, rt, txid, urt, record, txdata, seq)

    def flush(self) -> None:
        """Count the ADD and UPDATE rows fed so far into the index."""
        plain = self.plain
        self.index.add_many(plain)
        plain.clear()

    def _other(
        self,
        id: int,
        rt: int,
        txid: int,
        urt: int,
        record: bytes | None,
        txdata: bytes | None,
        seq: int,
    ) -> None:
        replayer, index, sink = self.replayer, self.index, self.sink
        data = record if record is not None else _EMPTY
        if rt == _ADD_TX:
            replayer.add_tx(txid, id, urt, data)
            index.tx_record(txid, rt, id, seq)
        elif rt == _UPDATE_TX:
            replayer.update_tx(txid, id, urt, data)
            index.tx_record(txid, rt, id, seq)
        elif rt == _DELETE_TX:
            replayer.delete_tx(txid, id)
            index.tx_record(txid, rt, id, seq)
        elif rt == _PREPARE:
            replayer.prepare(txid, txdata if txdata is not None else _EMPTY)
            index.prepare(txid, seq)
        elif rt == _COMMIT:
            replayer.commit(txid)
            if not index.commit(txid, seq, sink):
                index.orphan_row(seq, sink)
        elif rt == _ROLLBACK:
            replayer.rollback(txid)
            if not index.rollback(txid, seq, sink):
                index.orphan_row(seq, sink)
        elif rt == _DELETE:
            replayer.delete(id)
            index.delete(id, seq, sink)
            index.orphan_row(seq, sink)
        elif rt == _EVENT:
            index.orphan_row(seq, sink)
        else:
            raise CorruptionError(
                self.table,
                seq,
                f"row has record type {rt}, not one of 10..19",
                hint="this table was not written by a journal; check bindings/message-table-name",
            )
