"""A journal in a database table: :class:`DatabaseJournal` implements the journal contract
(:mod:`store.journal.api`) on the table layout of :mod:`store.db.schema` (docs/db.md,
reference §4.4-§4.7).

Each append becomes (at most) one row with the next ``seq``; ``seq`` is the table's primary
key and the load order. Rows are written by the group-commit writer (:mod:`store.db.writer`,
whose docstring has the batching policy), one database transaction per batch. Deletes remove
rows physically and transaction rows go as soon as none of their records is live
(:mod:`store.db.rows`); nothing waits for a compaction.

Load streams the table once, in ``seq`` order, with a server-side cursor where the database
has one (memory grows with the live records), through the shared replay rules
(:class:`store.journal.replay.Replayer`) and the table's row dispatch (:mod:`store.db.row_replay`,
which ``store data verify`` uses too). Rows no replay needs (transactions that never completed,
stray commit rows, unknown kinds) are deleted by the first batch after the load.

Rows this store writes (Artemis's numbers; ``-1`` where Artemis puts -1 or 0):

===========  ===========  ====  ======  ==================  ================
append       recordtype   id    txid    userrecordtype      record / txdata
===========  ===========  ====  ======  ==================  ================
add          11           id    0       urt                 data / NULL
update       12           id    0       urt                 data / NULL
add_tx       13           id    tx      urt                 data / NULL
update_tx    14           id    tx      urt                 data / NULL
delete_tx    15           id    tx      -1                  empty / NULL
prepare      17           -1    tx      -1                  empty / XID
commit       18           -1    tx      -1                  empty / NULL
delete       no row: the record's rows are deleted
rollback     no row: the transaction's rows are deleted
event        accepted and dropped (the database store keeps no retention)
===========  ===========  ====  ======  ==================  ================

``journal-sync-non-transactional = false`` makes non-transactional appends never wait for
their commit, ``journal-sync-transactional = false`` prepare / commit / rollback; each still
waits for room when the backlog is full (:mod:`store.db.writer`).

Thread-safety: every public method may be called from any number of threads (the contract's
rule); appends serialise on the writer's lock for a few microseconds each.
"""

from __future__ import annotations

import concurrent.futures
import gc
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Final

from sqlalchemy.engine import Engine

from store.db.dialects import JournalSQL
from store.db.probes import Probes
from store.db.reconnects import reconnects
from store.db.row_replay import RowReplay
from store.db.rows import RowIndex
from store.db.settle import invalidate, reconnect, reporter
from store.db.writer import (
    Backlog,
    BacklogLimits,
    Batch,
    Fence,
    GroupCommitWriter,
    commit_batch,
    refusal,
)
from store.errors import (
    JournalClosedError,
    JournalStateError,
    RecordTooLargeError,
    StoreError,
    StoreUnavailableError,
    UnknownRecordError,
    UnknownTransactionError,
)
from store.journal.api import ADD as _ADD
from store.journal.api import ADD_TX as _ADD_TX
from store.journal.api import COMMIT as _COMMIT
from store.journal.api import DELETE_TX as _DELETE_TX
from store.journal.api import MAX_ID, MIN_ID, Journal, JournalStats, LoadResult
from store.journal.api import PREPARE as _PREPARE
from store.journal.api import UPDATE as _UPDATE
from store.journal.api import UPDATE_TX as _UPDATE_TX
from store.journal.api import RecordInfo as _INFO
from store.journal.replay import Replayer
from store.speedups import SPEEDUPS

__all__ = ["DatabaseJournal", "JournalOptions"]

_log = logging.getLogger(__name__)

_NONE: Final = -1  # id / userrecordtype of bookkeeping rows
_EMPTY: Final = b""
#: The compiled loop over a load's ADD and UPDATE rows (None: the Python loop alone).
_replay_rows = getattr(SPEEDUPS, "replay_rows", None)
_NO_IDS: Final[set[int]] = set()  # replay_rows's updated_only: unused without a live index


@dataclass(frozen=True, kw_only=True)
class JournalOptions:
    """How one database journal behaves (immutable).

    ``sync_period``: ``jdbc-journal-sync-period`` in seconds (default 0.005): the longest a
    non-sync append waits for its commit. ``sync_transactional`` / ``sync_non_transactional``:
    ``journal-sync-*`` (default True): False makes those appends not wait for the commit.
    ``max_record_size``: the largest body accepted, in bytes (the database's blob limit);
    ``fence``: run in every batch's transaction before commit (the HA lease check).
    ``seq_floor``: the least ``seq`` of this open's appends (default 0: after the largest
    loaded); the HA node manager sets it from its generation, so a new live node's rows never
    share a key with a frozen predecessor's uncommitted rows.
    ``network_timeout``: ``jdbc-network-timeout`` in seconds (default 0: none): the longest a
    caller waits for a commit in an outage before an in-doubt StoreUnavailableError
    (:mod:`store.db.writer`); ``reconnected``: run first on each connection of an outage
    (settle.revision_check), before the probes (store.db.probes). ``backlog``: bounds of
    what may be appended and not yet committed (:class:`~store.db.writer.BacklogLimits`).
    """

    sync_period: float = 0.005
    sync_transactional: bool = True
    sync_non_transactional: bool = True
    max_record_size: int = 2**31 - 1
    fence: Fence | None = None
    seq_floor: int = 0
    network_timeout: float = 0.0
    reconnected: Callable[[Any], None] | None = None
    backlog: BacklogLimits = field(default_factory=BacklogLimits)


class DatabaseJournal(Journal):
    """A journal kept in one database table (module docstring, also on thread-safety)."""

    def __init__(
        self, *, name: str, engine: Engine, sql: JournalSQL, options: JournalOptions
    ) -> None:
        self.name = name
        self.table_name = sql.table.name
        self._engine = engine
        self._sql = sql
        self._options = options
        self._encode: Callable[..., Any] = sql.encode_row
        self._index = RowIndex()
        self._writer: GroupCommitWriter | None = None
        self._seq = 0
        self._loaded = False
        self._closed = False
        self._writer_conn: Any = None
        self._probes = Probes(sql, self.table_name, self._index.is_live, reconnects(engine))

    # -- load ---------------------------------------------------------------------------------

    def load(self) -> LoadResult:
        """Replay the table; returns the committed records, prepared and failed transactions.

        Raises JournalStateError on a second call, JournalClosedError after close,
        StoreUnavailableError when the database fails, CorruptionError for a row of an
        unknown kind.
        """
        if self._closed:
            raise JournalClosedError(f"journal {self.name} is closed")
        if self._loaded or self._writer is not None:
            raise JournalStateError(f"journal {self.name} was loaded already")
        first = Batch()
        result, last = self._read(first)
        self._index.fail_open(last, first)
        self._seq = max(last, self._options.seq_floor)
        writer = GroupCommitWriter(
            name=self.name,
            period=self._options.sync_period,
            run_batch=self._run_batch,
            limits=self._options.backlog,
            retry=self._retry_batch,
            timeout=self._options.network_timeout,
            gave_up=reporter(self._options.fence, self.table_name),
        )
        cleanup = len(first.records) + len(first.transactions) + len(first.rows)
        if cleanup:
            with writer.lock:
                pending = writer.pending
                pending.records, pending.transactions = first.records, first.transactions
                pending.tx_records, pending.rows = first.tx_records, first.rows
                writer.queued_locked(False)
            _log.info("journal %s: %d dead rows to delete after load", self.name, cleanup)
        self._writer = writer
        self._loaded = True
        return result

    def replay(self) -> LoadResult:
        """What :meth:`load` returns, read without changing anything: no writer is started
        and the dead rows a load would delete stay (the read-only tools,
        :class:`~store.journal.readonly.ReadOnlyJournal`). This journal is not loaded by it.
        Raises as :meth:`load`."""
        if self._closed:
            raise JournalClosedError(f"journal {self.name} is closed")
        return self._read(Batch())[0]

    def _read(self, first: Batch) -> tuple[LoadResult, int]:
        """Replay the table into a new Replayer, the rows to clean up into ``first``; returns
        the load's result and the last seq."""
        replayer = Replayer()
        # A load creates millions of long-lived objects and no cycles; the cyclic collector
        # would walk them again and again (as in the file journal's load), so it waits.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            last = self._replay(replayer, first)
            return replayer.result(), last
        except StoreError:
            raise
        except Exception as exc:
            raise StoreUnavailableError(
                f"load of table {self.table_name} failed: {type(exc).__name__}: {exc}"
            ) from exc
        finally:
            if gc_was_enabled:
                gc.enable()

    def _replay(self, replayer: Replayer, sink: Batch) -> int:
        """Feed every row to the replayer and the row index by the rules of
        :class:`~store.db.row_replay.RowReplay` (shared with ``store data verify``); returns
        the last seq.

        With the compiled module, each run of ADD and UPDATE rows of a fetched chunk is
        replayed by ``replay_rows`` (the same two rules, in C); the row it stops at goes
        through :meth:`RowReplay.feed`, and the run after it to C again."""
        rows_replay = RowReplay(replayer, self._index, sink, self.table_name)
        plain = rows_replay.plain  # the C loop appends the ids of its rows here
        compiled = _replay_rows if type(replayer) is Replayer else None
        entries, ids = replayer.containers()
        conn = self._engine.raw_connection()
        try:
            for rows in self._sql.stream(conn.driver_connection):
                if compiled is None or type(rows) is not list:
                    rows_replay.feed(rows)
                    continue
                at, end = 0, len(rows)
                args = (entries, ids, _INFO, None, _NO_IDS, 0, _ADD, _UPDATE, _EMPTY, plain)
                while (at := compiled(rows, at, *args)) < end:
                    rows_replay.feed(rows[at : at + 1])
                    at += 1
            # The last seq, read apart: a dialect may leave seq out of plain rows (MySQL).
            cursor = conn.cursor()
            try:
                cursor.execute(self._sql.max_seq.sql)
                row = cursor.fetchone()
                last = row[0] if row else None
            finally:
                cursor.close()
            conn.rollback()  # ends the read transaction
        finally:
            conn.close()
        rows_replay.flush()
        return int(last or 0)

    def _run_batch(self, batch: Batch, sent: Callable[[], None]) -> None:
        conn = self._writer_conn
        if conn is None:
            try:
                conn = self._engine.raw_connection()
                self._sql.prepare_writer(conn.driver_connection)
                self._writer_conn = conn
            except Exception as exc:
                raise StoreUnavailableError(
                    f"database write to table {self.table_name} failed: cannot connect: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
        try:
            if self._probes.due():  # another part reconnected after an outage
                self._probes.check(conn.driver_connection)
            commit_batch(
                conn.driver_connection,
                self._sql,
                batch,
                table=self.table_name,
                fence=self._options.fence,
                sent=sent,
            )
            self._probes.committed(batch)
        except BaseException:
            self._writer_conn = None
            invalidate(conn)  # never hand a connection in an unknown state back to the pool
            raise

    def _retry_batch(self, batch: Batch) -> None:
        """The writer's ``retry`` in an outage: settle ``batch`` on a fresh connection and
        commit it again if it was not applied (:mod:`store.db.settle`). Raises ReconnectError
        while no connection works, what :meth:`_run_batch` raises when it fails again."""
        self._writer_conn, done = reconnect(
            self._engine, self._sql, batch, self.table_name, self._reconnected
        )
        if not done:
            self._run_batch(batch, _nothing)
        else:
            self._probes.committed(batch)

    def _reconnected(self, conn: Any) -> None:
        """First on each connection of an outage: the schema revision, then the probes."""
        if self._options.reconnected is not None:
            self._options.reconnected(conn)
        self._probes.check(conn, reconnected=True)

    def _started(self) -> GroupCommitWriter:
        writer = self._writer
        if writer is None:
            if self._closed:
                raise JournalClosedError(f"journal {self.name} is closed")
            raise JournalStateError(f"journal {self.name}: load() must be called before appends")
        return writer

    def _check(self, id: int, urt: int, data: bytes) -> None:
        if not MIN_ID <= id <= MAX_ID:
            raise ValueError(f"ids must be signed 64-bit integers, not {id}")
        if not 0 <= urt <= 255:
            raise ValueError(f"user_record_type must be 0..255, not {urt}")
        if len(data) > self._options.max_record_size:
            raise RecordTooLargeError(
                f"record of {len(data)} bytes is larger than the {self._options.max_record_size} "
                f"bytes a row of table {self.table_name} takes"
            )

    def _row(self, id: int, rt: int, tx: int, urt: int, data: bytes, txdata: bytes | None) -> Any:
        # Called with the writer's lock held: seq order is queue order.
        self._seq += 1
        seq = self._seq
        batch = self._writer.pending  # type: ignore[union-attr]  # appends come after load
        batch.first_seq = batch.first_seq or seq
        batch.last_seq = seq
        if not tx:  # a plain ADD or UPDATE: the newest probe (store.db.probes)
            batch.probe_seq, batch.probe_id = seq, id
        return self._encode(id, rt, tx, urt, data, txdata, seq)

    def append_add(
        self, id: int, user_record_type: int, data: bytes, *, sync: bool = False
    ) -> None:
        """Append an add of ``id``; with ``sync`` returns once it is committed. Every append
        first waits while the backlog is full (back-pressure, see the module docstring).

        Raises RecordTooLargeError, JournalStateError before load, JournalClosedError (also
        when the journal closes while waiting for room), StoreUnavailableError once a batch
        failed (also while waiting), ValueError for ids or types out of range.
        """
        data = bytes(data)
        self._check(id, user_record_type, data)
        w = self._started()
        wait = sync and self._options.sync_non_transactional
        with w.lock:
            w.admit_locked(len(data))
            w.pending.inserts.append(self._row(id, _ADD, 0, user_record_type, data, None))
            self._index.add(id)
            batch = w.queued_locked(wait, len(data))
        if wait:
            batch.wait()

    def append_update(
        self, id: int, user_record_type: int, data: bytes, *, sync: bool = False
    ) -> None:
        """Append an update of a live ``id``. Raises UnknownRecordError if it is not live, and
        as :meth:`append_add`."""
        data = bytes(data)
        self._check(id, user_record_type, data)
        w = self._started()
        wait = sync and self._options.sync_non_transactional
        with w.lock:
            w.admit_locked(len(data))
            if not self._index.update(id):
                raise UnknownRecordError(f"record {id} is not live in table {self.table_name}")
            w.pending.inserts.append(self._row(id, _UPDATE, 0, user_record_type, data, None))
            batch = w.queued_locked(wait, len(data))
        if wait:
            batch.wait()

    def append_delete(self, id: int, *, sync: bool = False) -> None:
        """Delete a live ``id`` (its rows go in the next batch). Raises UnknownRecordError if it
        is not live, and as :meth:`append_add`."""
        self._check(id, 0, _EMPTY)
        w = self._started()
        wait = sync and self._options.sync_non_transactional
        with w.lock:
            w.admit_locked(0)
            if not self._index.is_live(id):
                raise UnknownRecordError(f"record {id} is not live in table {self.table_name}")
            self._seq += 1
            self._index.delete(id, self._seq, w.pending)
            w.pending.gone_seq, w.pending.gone_id = self._seq, id
            batch = w.queued_locked(wait)
        if wait:
            batch.wait()

    def _append_tx(self, tx_id: int, rt: int, id: int, urt: int, data: bytes) -> None:
        w = self._started()
        with w.lock:
            w.admit_locked(len(data))
            w.pending.inserts.append(self._row(id, rt, tx_id, urt, data, None))
            self._index.tx_record(tx_id, rt, id, self._seq)
            w.queued_locked(False, len(data))

    def append_add_tx(self, tx_id: int, id: int, user_record_type: int, data: bytes) -> None:
        """Add ``id`` inside ``tx_id``. Raises as :meth:`append_add`."""
        data = bytes(data)
        self._check(id, user_record_type, data)
        self._check(tx_id, 0, _EMPTY)
        self._append_tx(tx_id, _ADD_TX, id, user_record_type, data)

    def append_update_tx(self, tx_id: int, id: int, user_record_type: int, data: bytes) -> None:
        """Update ``id`` inside ``tx_id`` (it need not exist yet). Raises as :meth:`append_add`."""
        data = bytes(data)
        self._check(id, user_record_type, data)
        self._check(tx_id, 0, _EMPTY)
        self._append_tx(tx_id, _UPDATE_TX, id, user_record_type, data)

    def append_delete_tx(self, tx_id: int, id: int) -> None:
        """Delete ``id`` when ``tx_id`` commits. Raises as :meth:`append_add`."""
        self._check(id, 0, _EMPTY)
        self._check(tx_id, 0, _EMPTY)
        self._append_tx(tx_id, _DELETE_TX, id, _NONE, _EMPTY)

    def append_prepare(self, tx_id: int, xid: bytes, *, sync: bool = True) -> None:
        """Prepare ``tx_id`` with ``xid`` (kept across restarts until commit or rollback).

        Raises as :meth:`append_add`; RecordTooLargeError for an XID over the blob limit.
        """
        xid = bytes(xid)
        self._check(tx_id, 0, xid)
        w = self._started()
        wait = sync and self._options.sync_transactional
        with w.lock:
            w.admit_locked(len(xid))
            w.pending.inserts.append(self._row(_NONE, _PREPARE, tx_id, _NONE, _EMPTY, xid))
            self._index.prepare(tx_id, self._seq)
            batch = w.queued_locked(wait, len(xid))
        if wait:
            batch.wait()

    def append_commit(self, tx_id: int, *, sync: bool = True) -> None:
        """Commit ``tx_id``. Raises UnknownTransactionError if it is not open, and as
        :meth:`append_add`."""
        self._check(tx_id, 0, _EMPTY)
        w = self._started()
        wait = sync and self._options.sync_transactional
        with w.lock:
            w.admit_locked(0)
            if not self._index.is_open(tx_id):
                raise UnknownTransactionError(
                    f"transaction {tx_id} is not open in table {self.table_name}"
                )
            w.pending.inserts.append(self._row(_NONE, _COMMIT, tx_id, _NONE, _EMPTY, None))
            self._index.commit(tx_id, self._seq, w.pending)
            batch = w.queued_locked(wait)
        if wait:
            batch.wait()

    def append_rollback(self, tx_id: int, *, sync: bool = True) -> None:
        """Roll back ``tx_id`` (its rows are deleted). Raises UnknownTransactionError if it is
        not open, and as :meth:`append_add`."""
        self._check(tx_id, 0, _EMPTY)
        w = self._started()
        wait = sync and self._options.sync_transactional
        with w.lock:
            w.admit_locked(0)
            if not self._index.is_open(tx_id):
                raise UnknownTransactionError(
                    f"transaction {tx_id} is not open in table {self.table_name}"
                )
            self._seq += 1
            self._index.rollback(tx_id, self._seq, w.pending)
            batch = w.queued_locked(wait)
        if wait:
            batch.wait()

    def group(self, admit: bool = False) -> AbstractContextManager[None]:
        """This thread's appends inside admitted as one operation: refused for an outage at
        the first (or, with ``admit``, at entry) or not at all (:meth:`GroupCommitWriter.group`)."""
        return self._started().group(admit)

    # -- durability ---------------------------------------------------------------------------

    def flush(self) -> None:
        """Return once everything appended so far is committed.

        Raises StoreUnavailableError if a batch failed.
        """
        w = self._writer
        if w is None:
            return
        with w.lock:
            if w.failed is not None:
                w.check_open_locked()
            batch = w.last_locked()
        if batch is not None:
            batch.wait()

    def sync_future(self) -> concurrent.futures.Future[None]:
        """A future completed (with None) once everything appended so far is committed, or
        failed with StoreUnavailableError. Every caller before the same commit gets the same
        future. Raises nothing."""
        w = self._writer
        if w is None:
            done: concurrent.futures.Future[None] = concurrent.futures.Future()
            done.set_result(None)
            return done
        with w.lock:
            return w.future_locked()

    # -- maintenance --------------------------------------------------------------------------

    def compact(self) -> None:
        """Delete every row no load needs, now (see :mod:`store.db.maintenance`).

        Raises JournalStateError before load, StoreUnavailableError on database failure.
        """
        from store.db.maintenance import sweep_dead_rows

        w = self._started()
        self.flush()
        with w.lock:
            w.check_open_locked()
            upto = self._seq
        dead = sweep_dead_rows(self._engine, self._sql, self._index, w.lock, upto)
        if dead:
            with w.lock:
                w.check_open_locked()
                w.pending.rows.extend((seq,) for seq in dead)
                batch = w.queued_locked(True)
            batch.wait()
            _log.info("journal %s: compaction deleted %d dead rows", self.name, len(dead))

    def backlog(self) -> Backlog:
        """The backlog of appended, not yet committed operations, its bounds and its peak
        since open (:class:`~store.db.writer.Backlog`); cheap, no I/O, never flushes.

        Raises JournalStateError before load.
        """
        w = self._started()
        with w.lock:
            return w.backlog_locked()

    def stats(self) -> JournalStats:
        """Counts: ``records_live`` live ids, ``files`` rows in the table, ``bytes_live`` bytes
        of live records' bodies, ``bytes_total`` bytes of all bodies and XIDs; ``extra`` has
        ``rows_needed``, ``rows_dead``, ``live_entries``, ``open_transactions``, ``batches``,
        ``batched_operations`` (commits and the appends they carried since open) and the
        backlog's ``backlog_peak_records`` / ``backlog_peak_bytes`` (most not yet committed at
        once), ``backlog_limit_records`` / ``backlog_limit_bytes`` and ``backlog_waits``.

        Raises JournalStateError before load, StoreUnavailableError on database failure.
        """
        from store.db.maintenance import table_totals

        w = self._started()
        self.flush()
        with w.lock:
            counts = self._index.counts()
            counts["batches"] = w.batches
            counts["batched_operations"] = w.operations
            backlog = w.backlog_locked()
        for key in ("peak_records", "peak_bytes", "limit_records", "limit_bytes", "waits"):
            counts[f"backlog_{key}"] = getattr(backlog, key)
        rows, total_bytes, record_bytes = table_totals(self._engine, self._sql)
        extra = dict(counts)
        extra["rows_dead"] = max(0, rows - counts["rows_needed"])
        return JournalStats(
            records_live=counts["live_ids"],
            files=rows,
            bytes_live=min(record_bytes, total_bytes),
            bytes_total=total_bytes,
            extra=extra,
        )

    def close(self) -> None:
        """Commit everything appended, stop the writer and return its connection. Idempotent.

        Raises StoreUnavailableError if that last commit failed (a failure reported earlier to
        the appenders is not raised again).
        """
        if self._closed:
            return
        self._closed = True
        w = self._writer
        if w is None:
            return
        failed_before = w.failed
        w.close()
        conn, self._writer_conn = self._writer_conn, None
        if conn is not None:
            try:
                self._sql.release_writer(conn.driver_connection)
                conn.close()
            except Exception:
                _log.debug("closing the writer's connection failed", exc_info=True)
        if w.failed is not None and failed_before is None:
            in_doubt = isinstance(w.failed, StoreUnavailableError) and w.failed.in_doubt
            raise refusal(w.failed, in_doubt=in_doubt) from w.failed

    def __repr__(self) -> str:
        return f"DatabaseJournal(name={self.name!r}, table={self.table_name!r})"


def _nothing() -> None:
    pass
