"""Group commit for a database journal: one writer thread commits batches of appends, each in
one database transaction (reference §4.5), and :func:`commit_batch` is the one place where a
batch's transaction is built.

Policy (the same as the file journal's TimedBuffer):

- appends go into the *pending* batch; the writer thread takes it whole and commits it;
- while a batch commits, new appends queue in the next pending batch;
- a ``sync=True`` append, ``flush()`` or ``sync_future()`` marks the pending batch urgent: an idle
  writer commits it at once, a busy one as soon as the current commit returns. A lone sync
  writer therefore waits for exactly one commit, and 64 concurrent ones share commits;
- a batch with only non-sync appends is committed ``jdbc-journal-sync-period`` ms after its
  first append at the latest.

A batch is one transaction: inserts, then the deletes of records, then the deletes of
transactions' rows, then the fence (the HA lease check, when there is one), then commit. If any
step fails the transaction is rolled back, every waiter of the batch and of the batch pending
behind it gets :class:`~store.errors.StoreUnavailableError`, and so does every later append:
the journal must be reopened (a fresh load tells what the database holds). Nothing is retried,
because a commit that failed may still have been applied.

Waiting is cheap because it happens in bulk: every waiter of a batch blocks on the batch's one
lock, which the writer releases once; each waiter releases it for the next (a chain of
hand-overs instead of a condition variable with one lock per waiter). When the next batch is
ready as a commit returns, the writer sends that batch first and releases the committed one's
waiters while the database syncs: woken threads then run while the writer waits on the
network, instead of competing with it for the GIL between its statements. (Measured on
PostgreSQL with 64 threads: ~10% more appends per second; see bench/RESULTS.md.)

Thread-safety: :class:`GroupCommitWriter` is shared by all appending threads; its ``lock``
guards the pending batch and is also the journal's lock (the journal updates its row index
and queues the rows under it, so that the order of rows is the order of ``seq``).
"""

from __future__ import annotations

import concurrent.futures
import copy
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from store.db.dialects import JournalSQL
from store.errors import JournalClosedError, StoreError, StoreUnavailableError

__all__ = ["Batch", "Fence", "GroupCommitWriter", "commit_batch"]

_log = logging.getLogger(__name__)

#: A check run inside every batch's transaction just before it commits; it raises (e.g.
#: LockLostError) to abort the batch. The HA node manager installs one (fencing).
Fence = Callable[[Any], None]


class Batch:
    """The appends committed together: encoded rows and the delete work they caused.

    Thread-safety: filled under the writer's lock; after the writer takes it, only the writer
    touches it until ``done`` is released.
    """

    __slots__ = (
        "done",
        "error",
        "first_at",
        "future",
        "inserts",
        "records",
        "rows",
        "size",
        "transactions",
        "tx_records",
        "urgent",
    )

    def __init__(self) -> None:
        self.inserts: list[Any] = []
        self.records: list[tuple[int, int]] = []
        self.tx_records: list[tuple[int, int, int, int]] = []
        self.transactions: list[tuple[int, int, int]] = []
        self.rows: list[Any] = []
        #: operations queued (a delete queues work but no row); 0 means empty.
        self.size = 0
        self.urgent = False
        self.first_at = 0.0
        self.error: StoreError | None = None
        self.future: concurrent.futures.Future[None] | None = None
        # Held until the batch is committed or failed; waiters pass it along (see docstring).
        self.done = threading.Lock()
        self.done.acquire()

    def wait(self) -> None:
        """Block until the batch is committed. Raises the batch's error if it failed."""
        with self.done:
            pass
        if self.error is not None:
            # A copy per waiter: one exception object raised in many threads would share (and
            # garble) its traceback.
            raise copy.copy(self.error) from self.error


def commit_batch(
    conn: Any,
    sql: JournalSQL,
    batch: Batch,
    *,
    table: str,
    fence: Fence | None = None,
    sent: Callable[[], None] | None = None,
) -> None:
    """Run ``batch`` as one transaction on the DBAPI connection ``conn``: inserts, deletes of
    records, deletes of transactions' rows, deletes of single rows, ``fence``, commit.

    This is the only function that builds a batch's transaction; the HA lease check (fencing)
    goes in through ``fence``. ``sent`` is called once everything but the commit's answer is
    on its way (the writer wakes the previous batch's waiters then). Returns None. Raises
    StoreUnavailableError naming ``table`` and the step that failed (never parameters),
    after rolling back; or what ``fence`` raises.
    """
    step = ["begin"]  # what is running, for the error message
    try:
        if fence is None and not (
            batch.records or batch.tx_records or batch.transactions or batch.rows
        ):
            # Inserts only and nothing to check: one self-committing statement where the
            # database has one (it is still all or nothing).
            step[0] = "insert rows"
            if _with_cursor(conn, lambda c: sql.insert_committed(c, batch.inserts, sent)):
                return
            step[0] = "begin"
        sql.begin(conn)
        _with_cursor(conn, lambda c: _statements(c, sql, batch, step))
        if fence is not None:
            step[0] = "fence"
            fence(conn)
        step[0] = "commit"
        if sent is not None:
            sent()
        sql.commit(conn)
    except StoreError:
        _rollback_quietly(sql, conn)
        raise
    except Exception as exc:
        _rollback_quietly(sql, conn)
        raise StoreUnavailableError(
            f"database write to table {table} failed at {step[0]!r}: {type(exc).__name__}: "
            f"{_first_line(exc)}",
            hint="the journal refuses writes until the store is reopened; "
            "everything acknowledged before is in the database",
        ) from exc


def _with_cursor(conn: Any, work: Callable[[Any], Any]) -> Any:
    cursor = conn.cursor()
    try:
        return work(cursor)
    finally:
        cursor.close()


def _statements(cursor: Any, sql: JournalSQL, batch: Batch, step: list[str]) -> None:
    """The batch's statements in their fixed order; ``step[0]`` names the running one."""
    if batch.inserts:
        step[0] = "insert rows"
        sql.insert_rows(cursor, batch.inserts)
    if batch.records:
        step[0] = "delete records"
        sql.delete_records(cursor, batch.records)
    if batch.tx_records:
        step[0] = "delete transaction records"
        sql.delete_tx_records(cursor, batch.tx_records)
    if batch.transactions:
        step[0] = "delete transactions"
        sql.delete_transactions(cursor, batch.transactions)
    if batch.rows:
        step[0] = "delete rows"
        sql.delete_rows(cursor, batch.rows)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else ""


def _rollback_quietly(sql: JournalSQL, conn: Any) -> None:
    try:
        sql.rollback(conn)
    except Exception:  # the connection may be gone; the failure is being reported already
        _log.debug("rollback after a failed batch failed too", exc_info=True)


class GroupCommitWriter:
    """The writer thread of one journal (policy in the module docstring).

    ``run_batch(batch, sent)`` commits one batch (it calls :func:`commit_batch`, which calls
    ``sent()`` once the batch is on its way and only its commit is awaited); ``period`` is
    ``jdbc-journal-sync-period`` in seconds.
    """

    def __init__(
        self, *, name: str, period: float, run_batch: Callable[[Batch, Callable[[], None]], None]
    ) -> None:
        self.lock = threading.Lock()
        self._cond = threading.Condition(self.lock)
        self._name = name
        self._period = period
        self._run_batch = run_batch
        self.pending = Batch()
        self._inflight: Batch | None = None
        self._idle = False
        self._closing = False
        #: set once a batch failed: every later append raises it.
        self.failed: StoreError | None = None
        #: batches and operations committed so far (how well appends share commits).
        self.batches = 0
        self.operations = 0
        self._thread = threading.Thread(
            target=self._loop, name=f"store-db-writer-{name}", daemon=True
        )
        self._thread.start()

    # -- called by appenders, with ``lock`` held --------------------------------------------

    def check_open_locked(self) -> None:
        """Raise the failure that stopped the writer, or JournalClosedError after close."""
        if self.failed is not None:
            raise StoreUnavailableError(str(self.failed), hint=self.failed.hint) from self.failed
        if self._closing:
            raise JournalClosedError(f"journal {self._name} is closed")

    def queued_locked(self, urgent: bool) -> Batch:
        """Account for one operation just queued in ``pending``; wake the writer if needed.

        Returns the batch the operation belongs to (wait on it for durability).
        """
        batch = self.pending
        batch.size += 1
        if batch.size == 1:
            batch.first_at = time.monotonic()
            if self._idle:
                self._cond.notify()
        if urgent and not batch.urgent:
            batch.urgent = True
            if self._idle:
                self._cond.notify()
        return batch

    def future_locked(self) -> concurrent.futures.Future[None]:
        """The future of the batch that makes everything queued so far durable; the same object
        for every caller until that batch is taken."""
        batch = self.pending if self.pending.size else self._inflight
        if batch is None:
            return _done_future(self.failed)
        if batch is self.pending and not batch.urgent:
            batch.urgent = True
            if self._idle:
                self._cond.notify()
        if batch.future is None:
            batch.future = concurrent.futures.Future()
        return batch.future

    def last_locked(self) -> Batch | None:
        """The batch whose commit makes everything queued so far durable (None: nothing
        pending); marks it urgent."""
        if self.pending.size:
            batch = self.pending
            if not batch.urgent:
                batch.urgent = True
                if self._idle:
                    self._cond.notify()
            return batch
        return self._inflight

    # -- lifecycle ----------------------------------------------------------------------------

    def close(self) -> None:
        """Commit what is pending, then stop the thread. Idempotent; raises nothing."""
        with self.lock:
            self._closing = True
            self.pending.urgent = True
            self._cond.notify()
        if threading.current_thread() is not self._thread:
            self._thread.join()

    # -- the writer thread --------------------------------------------------------------------

    def _take(self) -> Batch | None:
        with self.lock:
            while True:
                batch = self.pending
                if batch.size == 0:
                    if self._closing or self.failed is not None:
                        return None
                    self._idle = True
                    self._cond.wait()
                    self._idle = False
                    continue
                if not batch.urgent and not self._closing:
                    delay = batch.first_at + self._period - time.monotonic()
                    if delay > 0:
                        self._idle = True
                        self._cond.wait(delay)
                        self._idle = False
                        continue
                return self._next_locked()

    def _next_locked(self) -> Batch:
        batch = self.pending
        self.pending = Batch()
        self._inflight = batch
        return batch

    def _loop(self) -> None:
        batch = self._take()
        # A committed batch whose waiters are released once the next batch is on the wire:
        # they wake while the database syncs, instead of fighting the writer for the GIL
        # between its statements.
        sent = _Deferred(None, None)
        while batch is not None:
            error: StoreError | None = None
            try:
                self._run_batch(batch, sent)
            except StoreError as exc:
                error = exc
            except BaseException as exc:  # never leave waiters blocked
                error = StoreUnavailableError(f"journal {self._name}: writer failed: {exc!r}")
                error.__cause__ = exc
            finally:
                sent()
            following: Batch | None = None
            behind: Batch | None = None
            with self.lock:
                self._inflight = None
                if error is None:
                    self.batches += 1
                    self.operations += batch.size
                    ready = self.pending
                    if ready.size and (ready.urgent or self._closing):
                        following = self._next_locked()
                else:
                    self.failed = error
                    _log.error(
                        "journal %s: batch failed, refusing further writes: %s", self._name, error
                    )
                    behind, self.pending = self.pending, Batch()
                future = batch.future
            if following is not None:
                sent = _Deferred(batch, future)
            else:
                sent = _Deferred(None, None)
                _complete(batch, future, error)
            if behind is not None:
                _complete(behind, behind.future, error)
            batch = following if following is not None else self._take()
        with self.lock:
            pending = self.pending if self.pending.size else None
            failure = self.failed
        if pending is not None:  # queued after a failure: fail it too
            _complete(pending, pending.future, failure)


class _Deferred:
    """Completes a committed batch once: when the next batch is on the wire, or at the latest
    when that next batch is done (successfully or not: this one was committed either way).

    Thread-safety: the writer thread only.
    """

    __slots__ = ("batch", "future")

    def __init__(self, batch: Batch | None, future: concurrent.futures.Future[None] | None) -> None:
        self.batch = batch
        self.future = future

    def __call__(self) -> None:
        batch, self.batch = self.batch, None
        if batch is not None:
            _complete(batch, self.future, None)


def _complete(
    batch: Batch, future: concurrent.futures.Future[None] | None, error: StoreError | None
) -> None:
    batch.error = error
    batch.done.release()
    if future is not None and not future.done():
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(error)


def _done_future(error: StoreError | None) -> concurrent.futures.Future[None]:
    future: concurrent.futures.Future[None] = concurrent.futures.Future()
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)
    return future
