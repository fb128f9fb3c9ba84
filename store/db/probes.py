"""What a journal checks the database still holds when it reconnects after an outage
(docs/db.md "Outages"): acknowledged rows that a failover lost.

A database that fails over to a standby the primary replicated to synchronously loses nothing
committed. One that fails over to an asynchronous standby *behind* its primary (or is restored
from an older backup with the same schema revision) has lost commits the store confirmed: sends
whose rows are gone, and acks (deletes) that never happened there, so acknowledged messages
would come back. The store cannot know the database's history, but it knows what it committed
last, so on every fresh connection of an outage (before the failed batch is settled) it
checks two probes (and before its next commit whenever another part of the store noticed an
outage, :mod:`store.db.reconnects`):

- the newest committed plain insert (an ADD or UPDATE outside a transaction) of a record that
  is still live: its id must have a row at that ``seq`` or later (a delete and a new add of the
  same id leave later rows);
- the newest committed delete of a record that is not live again: its id must have no plain
  row older than the delete.

A probe that fails is :class:`~store.errors.LostDataError` naming the table, the record and the
``seq``: the writer stops for good (every waiter and later append gets the error) and the store
must be reopened once the operator has looked at what the database lost; it is never silent.
The probes are the newest of the last :data:`_KEPT` committed batches that still apply, so one
check is two indexed queries whatever the store's size.

Thread-safety: :meth:`Probes.committed` is called by the writer thread only, :meth:`check` on
the writer thread at reconnect; ``is_live`` reads the journal's row index (one dict lookup).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any, Final

import sqlalchemy as sa

from store.db.dialects import Compiled, JournalSQL
from store.db.reconnects import Reconnects
from store.db.writer import Batch
from store.errors import LostDataError

__all__ = ["Probes"]

#: Probes kept: those of the last committed batches that had a plain insert or a delete.
_KEPT: Final = 16


class Probes:
    """The probes of one journal table (module docstring)."""

    def __init__(
        self, sql: JournalSQL, table: str, is_live: Callable[[int], bool], shared: Reconnects
    ) -> None:
        c = sql.table.c
        self._shared = shared
        self._seen = shared.count
        bind = sa.bindparam
        self._table = table
        self._is_live = is_live
        self._newest = Compiled(
            sa.select(sa.func.max(c.seq)).where(c.id == bind("id", 0, type_=sa.BigInteger)),
            sql.dialect,
            ("id",),
        )
        self._older = Compiled(
            sa.select(sa.func.count()).where(
                c.id == bind("id", 0, type_=sa.BigInteger),
                c.seq < bind("seq", 0, type_=sa.BigInteger),
                c.txid == bind("tx", 0, type_=sa.BigInteger),
            ),
            sql.dialect,
            ("id", "seq", "tx"),
        )
        self._max = Compiled(sa.select(sa.func.max(c.seq)), sql.dialect, ())
        self._inserts: deque[tuple[int, int]] = deque(maxlen=_KEPT)  # (seq, id)
        self._deletes: deque[tuple[int, int]] = deque(maxlen=_KEPT)  # (seq, id)
        self._committed = 0  # the highest seq of a committed batch

    def committed(self, batch: Batch) -> None:
        """``batch`` committed: its probes (set by the journal as it queued rows) are kept.
        Raises nothing."""
        if batch.probe_seq:
            self._inserts.append((batch.probe_seq, batch.probe_id))
        if batch.gone_seq:
            self._deletes.append((batch.gone_seq, batch.gone_id))
        self._committed = max(self._committed, batch.last_seq, batch.gone_seq)

    def due(self) -> bool:
        """Whether a part of the store noticed an outage since the last :meth:`check`.
        Raises nothing."""
        return self._shared.count != self._seen

    def check(self, conn: Any, *, reconnected: bool = False) -> None:
        """On the DB-API connection ``conn``: raise LostDataError when a probe shows lost
        commits (module docstring); the read transaction is ended. ``reconnected``: this
        journal is reconnecting after an outage (the other parts are told first). Raises
        what the driver raises."""
        if reconnected:
            self._shared.bump()
        seen = self._shared.count
        insert = next(((s, i) for s, i in reversed(self._inserts) if self._is_live(i)), None)
        delete = next(((s, i) for s, i in reversed(self._deletes) if not self._is_live(i)), None)
        if insert is None and delete is None:
            self._seen = seen
            return
        cursor = conn.cursor()
        top = 0
        try:
            lost = None
            if insert is not None:
                seq, rid = insert
                cursor.execute(self._newest.sql, (rid,))
                row = cursor.fetchone()
                newest = row[0] if row else None
                if newest is None or int(newest) < seq:
                    lost = (
                        seq,
                        f"record {rid}, committed at seq {seq}, has no row at or after it "
                        f"(newest: {newest if newest is not None else 'none'})",
                    )
            if lost is None and delete is not None:
                seq, rid = delete
                values = {"id": rid, "seq": seq, "tx": 0}
                cursor.execute(self._older.sql, tuple(values[n] for n in self._older.order))
                row = cursor.fetchone()
                if row and int(row[0]):
                    lost = (seq, f"record {rid}, deleted at seq {seq}, has its rows again")
            if lost is not None:
                cursor.execute(self._max.sql)
                row = cursor.fetchone()
                top = int(row[0]) if row and row[0] is not None else 0
        finally:
            cursor.close()
        conn.rollback()
        if lost is None:
            self._seen = seen
        if lost is not None:
            raise LostDataError(
                self._table,
                lost[0],
                f"after the database came back it lacks commits the store confirmed: "
                f"{lost[1]}; the table's newest row is seq {top}, this store committed up "
                f"to seq {self._committed}: commits in seq {top + 1}..{self._committed} may "
                "be gone (a failover to a standby behind its primary, or a restore?); the "
                "store stops writing",
                hint="find what the database lost (the old primary may still hold it), then "
                "reopen the store; acknowledged messages may be missing or come back",
            )
