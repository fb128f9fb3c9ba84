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
  first append at the latest, and at once when it is full (see "Back-pressure" below).

A batch is one transaction: the fence (the HA lease check, when there is one), then inserts,
then the deletes of records, then the deletes of transactions' rows, then the fence's last
check (share-locking the lease row, where the fence has one), then commit. If any
step fails the transaction is rolled back (where the connection still answers) and the
database is taken to be away: an outage (below).

Outages (docs/db.md "Outages"): a database restart, a killed connection or a network cut fails the
running batch; the writer then rides the outage out instead of giving up:

- new appends are refused at once with StoreUnavailableError (``in_doubt`` False: the append
  applied nothing), also those waiting for room; what was queued before stays queued. An
  operation of several appends (the storage manager's send: the message, its refs, its
  duplicate id) makes them in one :meth:`GroupCommitWriter.group`: the refusal comes at its
  entry or not at all, so an outage noticed between two of its appends never leaves its first
  records queued while it raises "nothing written";
- the writer reconnects (pauses of 50 ms doubling up to 0.4 s) and *settles* the failed
  batch before anything else: its rows are looked up by their ``seq`` keys on a fresh
  connection; found, the commit had been applied and only its answer was lost; not found, the
  batch is committed again (a batch is one transaction, so it is all there or none of it is;
  a batch whose every insert it deleted itself leaves nothing to find, and committing it again
  leaves the same rows). The fence runs first in that transaction, so under a node manager the
  generation is checked before the first write after the outage;
- a caller waiting for a batch's commit gets the answer once it is settled: durable, with no
  error, when the database is back within ``jdbc-network-timeout`` of its wait; past that it
  gets StoreUnavailableError with ``in_doubt=True`` (its operation stays queued and is applied
  once the database answers); a ``sync_future`` fails with the same error then;
- when a commit succeeds again the outage is over: one WARNING was logged when it began, one
  INFO with its length when it ends, and :attr:`Health.outages` counts it.

The writer stops for good (every waiter and later append gets the error, the journal must be
reopened) only when the failure is not an outage: the fence's LockLostError, a batch that
fails again on :data:`_RERUNS` fresh connections (a statement the database refuses), or a
close while the database stays away for ``jdbc-network-timeout`` (then in doubt). Where a
batch can fail and what its callers learn:

=================================  ===================================================
failure                            the callers of the batch (and of later appends)
=================================  ===================================================
connect, a statement, the commit   wait; durable once settled, or ``in_doubt`` after
(connection lost, server gone)     the timeout; later appends refused until it answers
the commit's answer lost           settled by reading back the rows: durable, once
the fence (LockLostError)          LockLostError, for good (docs/ha.md#fencing)
the same batch refused 3 times     StoreUnavailableError, for good; reopen the store
close during an outage             close raises StoreUnavailableError, ``in_doubt``
=================================  ===================================================

Waiting is cheap because it happens in bulk: every waiter of a batch blocks on the batch's one
lock, which the writer releases once; each waiter releases it for the next (a chain of
hand-overs instead of a condition variable with one lock per waiter). When the next batch is
ready as a commit returns, the writer sends that batch first and releases the committed one's
waiters while the database syncs: woken threads then run while the writer waits on the
network, instead of competing with it for the GIL between its statements. (Measured on
PostgreSQL with 64 threads: ~10% more appends per second; see bench/RESULTS.md.)

Back-pressure (a bounded backlog). Appends only queue work; without a bound, non-sync
appenders outrun the writer without limit (measured on PostgreSQL before the bound: 525,000
appends queued in 10 s, then ``close()`` took 374 s to commit them), memory grows with the
backlog, and "``jdbc-journal-sync-period`` is the longest a non-sync append waits for its
commit" is false. So the backlog (operations appended and not yet committed: the pending batch
plus the one committing) is bounded in operations and in bytes (:class:`BacklogLimits`):

- each batch takes at most half of each bound, so one batch fills while the other commits
  (the writer never idles while appenders wait) and the two never exceed the bound;
- an append that would overfill the pending batch blocks until the writer takes that batch
  (that is, until the batch before it committed), and marks it urgent so it goes at once; a
  batch that fills up is committed at once too, without waiting for the sync period;
- the operation bound adapts to the writer: it is the number of operations the writer commits
  in one sync period at the rate measured on recent substantial batches (operations / seconds
  of the batch's transaction, smoothed), kept between ``min_records`` and ``max_records``.
  If 2 batches of b operations take ``2 * (c0 + c1 * b)`` (c0 per commit, c1 per operation),
  measuring at ``b = bound / 2`` makes the bound the fixed point where the backlog commits in
  one sync period; when even that is impossible (a commit alone takes half a period), the
  bound stays at ``min_records``: batches big enough to keep throughput, waits longer than
  the period. With the default 5 ms period the floor is what usually applies: the writers
  measured here commit from 6,500 (``store perf``'s mix on PostgreSQL) to 150,000 (1 KiB adds
  on SQLite) operations/s, so 1,024 commit in 7-160 ms, where before the bound the wait grew
  without limit;
- the byte bound is fixed (``max_bytes``, record data and XIDs): it caps memory for large
  records, where the operation bound alone would admit gigabytes. A single record larger
  than half of it is admitted alone, into an empty batch.

The trade-off: a bound near one sync period's work gives up the throughput of huge batches
(a commit's fixed cost is shared by fewer rows) for latency that holds and memory that stays
flat; ``store perf --no-sync`` now reports the rate the database sustains, drain included.
Nothing is dropped: a blocked append raises only what any append raises then, the batch's
StoreUnavailableError once the writer failed, JournalClosedError once the journal closes.
Every append is admitted this way (sync, non-sync, transactional); a load's cleanup and
compaction queue their work unbounded (their size is known and one-off), and an append from the
writer thread itself (a future's callback) is never made to wait, since only the writer could
release it.

Thread-safety: :class:`GroupCommitWriter` is shared by all appending threads; its ``lock``
guards the pending batch and is also the journal's lock (the journal updates its row index
and queues the rows under it, so that the order of rows is the order of ``seq``).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import copy
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from store.config.values import invalid
from store.db.dialects import JournalSQL
from store.errors import JournalClosedError, LockLostError, StoreError, StoreUnavailableError

__all__ = [
    "Backlog",
    "BacklogLimits",
    "Batch",
    "Fence",
    "GroupCommitWriter",
    "commit_batch",
    "fence_before_commit",
    "fenced_failure",
    "is_outage",
    "refusal",
]

_log = logging.getLogger(__name__)

#: A check run inside every batch's transaction before its statements, given the driver
#: connection; it raises (e.g. LockLostError) to abort the batch. The HA node manager
#: installs one (fencing, :mod:`store.ha.database`). A fence may also have a
#: ``before_commit(connection)`` attribute, run as the transaction's last statement (see
#: :func:`fence_before_commit`), and an ``after_failure()`` attribute returning the error a
#: failed batch should raise instead of StoreUnavailableError (see :func:`fenced_failure`),
#: and a ``gave_up(reason)`` attribute, called once when the writer stops for good (not for
#: LockLostError): the node manager then gives the live lock up (:mod:`store.ha.database`).
Fence = Callable[[Any], None]


def fence_before_commit(fence: Fence | None, conn: Any) -> None:
    """Run the fence's last check, just before the commit, when it has one. Raises what it
    raises (LockLostError); returns None."""
    last = getattr(fence, "before_commit", None)
    if last is not None:
        last(conn)


def fenced_failure(fence: Fence | None) -> StoreError | None:
    """After a batch failed with a database error: the fence's verdict (LockLostError when
    the live lock turns out to be lost, e.g. a node frozen mid-batch whose session was ended
    while the backup took over), or None. Raises nothing."""
    verdict = getattr(fence, "after_failure", None)
    if verdict is None:
        return None
    try:
        result: StoreError | None = verdict()
    except Exception:
        _log.debug("the fence's after-failure check failed", exc_info=True)
        return None
    return result


# Weight of the newest batch in the smoothed commit rate (the rest is the history's).
_RATE_WEIGHT = 0.3
#: How often (seconds) a caller waiting for a commit or for room looks at the database's health.
_WAIT_SLICE = 0.25
#: The first pause between reconnect attempts during an outage (seconds); it doubles up to
#: :data:`_RETRY_MAX`, so the store answers again within that much of the database answering.
_RETRY_FIRST = 0.05
_RETRY_MAX = 0.4
#: Reruns of a batch on a fresh connection that failed again: past this the failure is the
#: batch's (a statement the database refuses), not an outage, and the writer stops.
_RERUNS = 3


class ReconnectError(StoreUnavailableError):
    """Raised by a writer's ``retry`` when it cannot get a working connection: the outage
    goes on (no rerun of the batch was attempted)."""


#: DB-API (and SQLAlchemy) error classes that say the connection or the server went away.
_OUTAGE_CLASSES = frozenset({"OperationalError", "InterfaceError"})


def is_outage(error: BaseException) -> bool:
    """Whether ``error`` or what caused it says the database or the connection went away (a
    DB-API OperationalError or InterfaceError, a socket error), rather than that a statement
    is wrong (a missing table is a ProgrammingError). Raises nothing."""
    seen: BaseException | None = error
    for _ in range(8):
        if seen is None:
            return False
        if isinstance(seen, (ReconnectError, OSError)):
            return True
        if any(c.__name__ in _OUTAGE_CLASSES for c in type(seen).__mro__):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


class Health:
    """Whether the database answers, as the writer last saw it (module docstring, "Outages").

    ``down_since``: the monotonic time the current outage was noticed (None: up);
    ``committing_since``: when the running commit began (None: none running); ``outages``:
    outages ridden through since open (each one a reconnect); ``timeout``:
    ``jdbc-network-timeout`` in seconds (0: none, callers wait for the database).

    Thread-safety: written by the writer thread; read by any thread (single-attribute reads).
    """

    def __init__(self, name: str, timeout: float) -> None:
        self.name = name
        self.timeout = timeout
        self.down_since: float | None = None
        self.committing_since: float | None = None
        self.reason = ""
        self.outages = 0

    def stalled(self, started: float) -> StoreUnavailableError | None:
        """For a caller waiting since ``started`` for a commit: the in-doubt error to raise
        once it has waited ``timeout`` while the database is away or a commit has gone
        unanswered that long; else None. Raises nothing."""
        timeout = self.timeout
        now = time.monotonic()
        if timeout <= 0 or now - started < timeout:
            return None
        committing = self.committing_since
        if self.down_since is None and (committing is None or now - committing < timeout):
            return None
        return self.doubt()

    def doubt(self) -> StoreUnavailableError:
        """The in-doubt error of an operation the database has not confirmed for ``timeout``
        (see :meth:`stalled`). Raises nothing."""
        why = self.reason or "a commit has had no answer"
        return StoreUnavailableError(
            f"journal {self.name}: the database has not answered for {self.timeout:g} s ({why}); "
            "this operation is not confirmed",
            hint="it stays queued and is applied once the database answers again; a retried "
            "send with the same duplicate id is refused as a duplicate, never stored twice",
            in_doubt=True,
        )

    def refusal(self) -> StoreUnavailableError | None:
        """The error a new append raises while the database is away (it applies nothing),
        or None while it answers. Raises nothing."""
        down = self.down_since
        if down is None:
            return None
        return StoreUnavailableError(
            f"journal {self.name}: the database is away (for {time.monotonic() - down:.1f} s: "
            f"{self.reason}); nothing was written",
            hint="the store reconnects by itself; retry once the database answers",
        )


@dataclass(frozen=True, kw_only=True)
class BacklogLimits:
    """Bounds of the backlog: operations appended and not yet committed (the policy is in
    the module docstring, "Back-pressure"). An append that would exceed them waits.

    Thread-safety: immutable.
    """

    #: Default 1,024 operations. The least the operation bound adapts down to, whatever the
    #: measured rate. Lower keeps waits nearer the sync period when each operation is slow;
    #: higher keeps batches (half of it each) big enough to share a commit's fixed cost: with
    #: 2 ms commits and 20 us per row, batches of 512 keep 84% of the unbounded rate, batches
    #: of 128 (a floor of 256) 56%. Measured on loopback servers (0.5 ms commits), floors of
    #: 256 to 2,048 ran bursts equally fast (within noise); store perf's batches on
    #: PostgreSQL (6,500 operations/s) took ~75 ms each at 1,024 and ~20 ms at 256 (a wait
    #: is up to two of them).
    min_records: int = 1024
    #: Default 65,536 operations. The most it adapts up to (a long sync period on a fast
    #: database): higher lets batches grow, at about 200 bytes of memory per queued
    #: operation besides its data.
    max_records: int = 65_536
    #: Default 8 MiB. Record data and XIDs queued at most (each batch half of it): caps the
    #: memory of large records; lower makes batches of large records smaller and commits
    #: more frequent. A record larger than half of it is committed in a batch of its own.
    max_bytes: int = 8 * 1024 * 1024

    def __post_init__(self) -> None:
        if self.min_records < 2:
            raise invalid("min_records", self.min_records, "2 or more operations")
        if self.max_records < self.min_records:
            raise invalid(
                "max_records", self.max_records, f"at least min_records ({self.min_records})"
            )
        if self.max_bytes < 2:
            raise invalid("max_bytes", self.max_bytes, "2 or more bytes")


@dataclass(frozen=True, kw_only=True)
class Backlog:
    """A look at the backlog, taken without any I/O.

    ``records`` / ``bytes``: queued now (pending plus committing); ``limit_records`` /
    ``limit_bytes``: the current bounds; ``peak_records`` / ``peak_bytes``: the most queued at
    once since the journal was opened; ``waiting``: appenders blocked now; ``waits``: appends
    that had to wait since open; ``rate``: the smoothed commit rate in operations per second
    (0.0 until measured).

    Thread-safety: immutable.
    """

    records: int
    bytes: int
    limit_records: int
    limit_bytes: int
    peak_records: int
    peak_bytes: int
    waiting: int
    waits: int
    rate: float


class Batch:
    """The appends committed together: encoded rows and the delete work they caused.

    Thread-safety: filled under the writer's lock; after the writer takes it, only the writer
    touches it until ``done`` is released.
    """

    __slots__ = (
        "bytes",
        "done",
        "error",
        "first_at",
        "first_seq",
        "future",
        "gone_id",
        "gone_seq",
        "health",
        "inserts",
        "last_seq",
        "probe_id",
        "probe_seq",
        "records",
        "rows",
        "size",
        "transactions",
        "tx_records",
        "urgent",
    )

    def __init__(self, health: Health | None = None) -> None:
        self.inserts: list[Any] = []
        #: ``seq`` of the first and last row inserted (0: none); a lost commit's answer is
        #: settled by looking for these rows (:meth:`GroupCommitWriter` "Outages").
        self.first_seq = 0
        self.last_seq = 0
        #: the last plain insert (seq, id) and the last delete (seq, id), 0: none: what a
        #: reconnect checks the database still holds once this batch committed (store.db.probes)
        self.probe_seq = self.probe_id = self.gone_seq = self.gone_id = 0
        self.health = health
        self.records: list[tuple[int, int]] = []
        self.tx_records: list[tuple[int, int, int, int]] = []
        self.transactions: list[tuple[int, int, int]] = []
        self.rows: list[Any] = []
        #: operations queued (a delete queues work but no row); 0 means empty.
        self.size = 0
        #: record data and XIDs queued, in bytes (what the byte bound counts).
        self.bytes = 0
        self.urgent = False
        self.first_at = 0.0
        self.error: StoreError | None = None
        self.future: concurrent.futures.Future[None] | None = None
        # Held until the batch is committed or failed; waiters pass it along (see docstring).
        self.done = threading.Lock()
        self.done.acquire()

    def wait(self) -> None:
        """Block until the batch is committed. Raises the batch's error if it failed, and
        StoreUnavailableError with ``in_doubt=True`` once the database has been away for
        ``jdbc-network-timeout`` of this wait (the batch stays queued; see "Outages")."""
        done = self.done
        if not done.acquire(timeout=_WAIT_SLICE):
            started = time.monotonic() - _WAIT_SLICE
            health = self.health
            while not done.acquire(timeout=_WAIT_SLICE):
                stalled = None if health is None else health.stalled(started)
                if stalled is not None:
                    raise stalled
        done.release()
        if self.error is not None:
            # A copy per waiter: one exception object raised in many threads would share (and
            # garble) its traceback.
            raise copy.copy(self.error) from self.error


def refusal(failed: StoreError, *, in_doubt: bool = False) -> StoreError:
    """What a write raises once the writer failed with ``failed``: LockLostError stays
    LockLostError (a fenced-off node must see only that, docs/ha.md#fencing); anything else is
    StoreUnavailableError with the same message and hint (``in_doubt`` as given: a new write
    applies nothing). Returns a new exception."""
    if isinstance(failed, LockLostError):
        return LockLostError(str(failed), hint=failed.hint)
    return StoreUnavailableError(str(failed), hint=failed.hint, in_doubt=in_doubt)


def commit_batch(
    conn: Any,
    sql: JournalSQL,
    batch: Batch,
    *,
    table: str,
    fence: Fence | None = None,
    sent: Callable[[], None] | None = None,
) -> None:
    """Run ``batch`` as one transaction on the DBAPI connection ``conn``: ``fence``, inserts,
    deletes of records, deletes of transactions' rows, deletes of single rows, commit.

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
        if fence is not None:
            # First, before any statement: a fenced-off writer fails with the fence's error
            # (LockLostError), never with an error of a statement it should not have run.
            step[0] = "fence"
            fence(conn)
        _with_cursor(conn, lambda c: _statements(c, sql, batch, step))
        if fence is not None:
            step[0] = "fence"
            fence_before_commit(fence, conn)
        step[0] = "commit"
        if sent is not None:
            sent()
        sql.commit(conn)
    except StoreError:
        _rollback_quietly(sql, conn)
        raise
    except Exception as exc:
        _rollback_quietly(sql, conn)
        lost = fenced_failure(fence)
        if lost is not None:
            raise lost from exc
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
    ``jdbc-journal-sync-period`` in seconds; ``limits`` bound the backlog (back-pressure).
    ``retry(batch)``, when given, rides out an outage (module docstring, "Outages"): on a
    fresh connection it settles whether a failed batch was applied and commits it if not,
    raising :class:`ReconnectError` while no connection works; ``timeout`` is
    ``jdbc-network-timeout`` in seconds (0: none). Without ``retry`` a failed batch stops
    the writer for good. ``gave_up(error)`` is called once when the writer stops for good
    with anything but LockLostError (the HA fence's ``gave_up``).
    """

    def __init__(
        self,
        *,
        name: str,
        period: float,
        run_batch: Callable[[Batch, Callable[[], None]], None],
        limits: BacklogLimits | None = None,
        retry: Callable[[Batch], None] | None = None,
        timeout: float = 0.0,
        gave_up: Callable[[StoreError], None] | None = None,
    ) -> None:
        self.lock = threading.Lock()
        self._cond = threading.Condition(self.lock)
        # Appenders waiting for room in the pending batch (back-pressure); same lock.
        self._room = threading.Condition(self.lock)
        self._name = name
        self._period = period
        self._run_batch = run_batch
        self._limits = limits = limits or BacklogLimits()
        self._retry = retry
        self._gave_up = gave_up
        #: the database's health as this writer sees it (outages ridden through: ``outages``).
        self.health = Health(name, timeout)
        self.pending = Batch(self.health)
        self._inflight: Batch | None = None
        self._idle = False
        self._closing = False
        #: set once a batch failed: every later append raises it.
        self.failed: StoreError | None = None
        #: batches and operations committed so far (how well appends share commits).
        self.batches = 0
        self.operations = 0
        # The backlog bound (module docstring): adapted to the measured rate after each
        # substantial batch; a batch takes at most half of it.
        self._limit = limits.min_records
        self._batch_records = max(1, self._limit // 2)
        self._batch_bytes = max(1, limits.max_bytes // 2)
        self._rate = 0.0
        self._peak_records = 0
        self._peak_bytes = 0
        self._waiting = 0
        self._waits = 0
        # ``grouped.on``: this thread is inside :meth:`group` (its appends are admitted).
        self._grouped = threading.local()
        self._thread = threading.Thread(
            target=self._loop, name=f"store-db-writer-{name}", daemon=True
        )
        self._thread.start()

    # -- called by appenders, with ``lock`` held --------------------------------------------

    def check_open_locked(self) -> None:
        """Raise the failure that stopped the writer, or JournalClosedError after close."""
        if self.failed is not None:
            raise refusal(self.failed) from self.failed
        if self._closing:
            raise JournalClosedError(f"journal {self._name} is closed")

    def admit_locked(self, nbytes: int) -> None:
        """Return once the pending batch has room for one more operation of ``nbytes`` bytes
        (back-pressure: until the writer takes the full batch), the writer still open.

        The lock is released while waiting; callers check their own state after this. Raises
        StoreUnavailableError once a batch failed, JournalClosedError after close (also when
        either happens while waiting).
        """
        while True:
            self.check_open_locked()
            # The writer's own appends and those of an admitted group are never held.
            grouped = getattr(self._grouped, "on", None)
            exempt = grouped is True or threading.current_thread() is self._thread
            refused = None if exempt else self.health.refusal()
            if refused is not None:
                raise refused
            batch = self.pending
            if (
                batch.size == 0
                or (batch.size < self._batch_records and batch.bytes + nbytes <= self._batch_bytes)
                or exempt
            ):
                if grouped is False:
                    self._grouped.on = True  # the group's first: the rest are admitted
                return
            if not batch.urgent:  # full: the writer takes it as soon as it can
                batch.urgent = True
                if self._idle:
                    self._cond.notify()
            self._waiting += 1
            self._waits += 1
            try:
                self._room.wait(_WAIT_SLICE)  # an outage refuses waiting appenders too
            finally:
                self._waiting -= 1

    @contextlib.contextmanager
    def group(self, admit: bool = False) -> Iterator[None]:
        """Admit the appends this thread makes inside as one operation (module docstring,
        "Outages"): the first is admitted as any append is (it waits for room, and is refused
        in an outage with nothing of the group queued); the later ones are neither refused
        nor held by back-pressure (a group is a few records past the bound): they are queued
        and committed once the database answers, as the batch in flight is. With ``admit``
        the entry itself is that first admission (raising as :meth:`admit_locked`), for an
        operation that writes elsewhere first (a page, another journal). Appends still raise
        once the writer stopped for good or closed. A group entered inside another joins it."""
        grouped = self._grouped
        if getattr(grouped, "on", None) is not None:
            yield
            return
        if admit:
            with self.lock:
                self.admit_locked(0)
        grouped.on = admit  # False: open, nothing admitted yet; True: admitted
        try:
            yield
        finally:
            grouped.on = None

    def queued_locked(self, urgent: bool, nbytes: int = 0) -> Batch:
        """Account for one operation of ``nbytes`` bytes just queued in ``pending``; wake the
        writer if needed (a full batch is urgent).

        Returns the batch the operation belongs to (wait on it for durability).
        """
        batch = self.pending
        batch.size += 1
        batch.bytes += nbytes
        if batch.size == 1:
            batch.first_at = time.monotonic()
            if self._idle:
                self._cond.notify()
        if not urgent and (batch.size >= self._batch_records or batch.bytes >= self._batch_bytes):
            urgent = True
        if urgent and not batch.urgent:
            batch.urgent = True
            if self._idle:
                self._cond.notify()
        inflight = self._inflight
        records, queued_bytes = batch.size, batch.bytes
        if inflight is not None:
            records += inflight.size
            queued_bytes += inflight.bytes
        if records > self._peak_records:
            self._peak_records = records
        if queued_bytes > self._peak_bytes:
            self._peak_bytes = queued_bytes
        return batch

    def backlog_locked(self) -> Backlog:
        """The backlog now (see :class:`Backlog`). Raises nothing."""
        records, nbytes = self.pending.size, self.pending.bytes
        if self._inflight is not None:
            records += self._inflight.size
            nbytes += self._inflight.bytes
        return Backlog(
            records=records,
            bytes=nbytes,
            limit_records=self._limit,
            limit_bytes=self._limits.max_bytes,
            peak_records=self._peak_records,
            peak_bytes=self._peak_bytes,
            waiting=self._waiting,
            waits=self._waits,
            rate=self._rate,
        )

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
        """Commit what is pending, then stop the thread. Idempotent; raises nothing.

        Appenders waiting for room are released with JournalClosedError.
        """
        with self.lock:
            self._closing = True
            self.pending.urgent = True
            self._cond.notify()
            self._room.notify_all()
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
        self.pending = Batch(self.health)
        self._inflight = batch
        if self._waiting:
            self._room.notify_all()  # the pending batch is empty again
        return batch

    def _measured_locked(self, batch: Batch, seconds: float) -> None:
        """Adapt the operation bound to a committed batch's rate (module docstring). Small
        quick batches say little about what the writer can do and are left out."""
        if batch.size * 4 < self._limit and seconds < self._period:
            return
        rate = batch.size / max(seconds, 1e-6)
        self._rate = rate if not self._rate else self._rate + _RATE_WEIGHT * (rate - self._rate)
        limits = self._limits
        target = int(self._rate * self._period)
        self._limit = min(limits.max_records, max(limits.min_records, target))
        self._batch_records = max(1, self._limit // 2)

    def _loop(self) -> None:
        batch = self._take()
        # A committed batch whose waiters are released once the next batch is on the wire:
        # they wake while the database syncs, instead of fighting the writer for the GIL
        # between its statements.
        sent = _Deferred(None, None)
        while batch is not None:
            error: StoreError | None = None
            gave_up: Callable[[StoreError], None] | None = None
            started = time.monotonic()
            health = self.health
            health.committing_since = started
            try:
                self._run_batch(batch, sent)
            except StoreError as exc:
                error = exc
            except BaseException as exc:  # never leave waiters blocked
                error = StoreUnavailableError(f"journal {self._name}: writer failed: {exc!r}")
                error.__cause__ = exc
            finally:
                sent()
            rode_out = (
                isinstance(error, StoreUnavailableError)
                and self._retry is not None
                and is_outage(error)
            )
            if rode_out:
                error = self._ride_out(batch, error)  # type: ignore[arg-type]
            health.committing_since = None
            seconds = time.monotonic() - started
            following: Batch | None = None
            behind: Batch | None = None
            with self.lock:
                self._inflight = None
                if error is None:
                    self.batches += 1
                    self.operations += batch.size
                    if not rode_out:  # an outage's length says nothing about the commit rate
                        self._measured_locked(batch, seconds)
                    ready = self.pending
                    if ready.size and (ready.urgent or self._closing):
                        following = self._next_locked()
                else:
                    self.failed = error
                    gave_up = None if isinstance(error, LockLostError) else self._gave_up
                    _log.error(
                        "journal %s: batch failed, refusing further writes: %s", self._name, error
                    )
                    behind, self.pending = self.pending, Batch(self.health)
                    self._room.notify_all()  # blocked appenders get the failure
                future = batch.future
            if following is not None:
                sent = _Deferred(batch, future)
            else:
                sent = _Deferred(None, None)
                _complete(batch, future, error)
            if behind is not None:
                _complete(behind, behind.future, error)
            if error is not None and gave_up is not None:
                try:
                    gave_up(error)
                except Exception:
                    _log.exception("journal %s: reporting the stopped writer failed", self._name)
            batch = following if following is not None else self._take()
        with self.lock:
            pending = self.pending if self.pending.size else None
            failure = self.failed
        if pending is not None:  # queued after a failure: fail it too
            _complete(pending, pending.future, failure)

    def _ride_out(self, batch: Batch, error: StoreUnavailableError) -> StoreError | None:
        """The writer thread, after ``batch`` failed with ``error``: reconnect until the batch
        is settled and committed (returns None), or return the error that stops the writer
        (the fence's LockLostError, a batch that fails again on working connections, or the
        journal closing while the database stays away). New appends are refused meanwhile;
        what is queued stays queued. Module docstring, "Outages"."""
        health = self.health
        began = time.monotonic()
        health.reason = _first_line(error)
        health.down_since = began
        with self.lock:
            queued = batch.size + self.pending.size
        _log.warning(
            "journal %s: the database went away (%s); new writes are refused until it answers, "
            "the %d operations queued are kept",
            self._name,
            health.reason,
            queued,
        )
        reruns = 0
        delay = _RETRY_FIRST
        while True:
            try:
                assert self._retry is not None
                self._retry(batch)
            except ReconnectError as exc:  # no working connection yet: the outage goes on
                health.reason = _first_line(exc)
            except StoreUnavailableError as exc:  # connected, and the batch failed again
                reruns += 1
                if reruns >= _RERUNS:
                    return exc
            except StoreError as exc:  # the fence's verdict (LockLostError): never retried
                return exc
            except BaseException as exc:
                failed = StoreUnavailableError(f"journal {self._name}: writer failed: {exc!r}")
                failed.__cause__ = exc
                return failed
            else:
                took = time.monotonic() - began
                health.down_since = None
                health.reason = ""
                health.outages += 1
                _log.info(
                    "journal %s: the database answers again after %.1f s; the store carries on",
                    self._name,
                    took,
                )
                return None
            with self.lock:
                away = time.monotonic() - began
                if self._closing and (health.timeout <= 0 or away >= health.timeout):
                    return StoreUnavailableError(
                        f"journal {self._name}: closed while the database was away "
                        f"({away:.1f} s: {health.reason}); what was queued is not confirmed",
                        hint="a fresh open of the store shows what the database holds",
                        in_doubt=True,
                    )
                # Futures (sync_future) are answered in doubt after the timeout, as waiters are.
                late = (
                    [b.future for b in (batch, self.pending) if b.future and not b.future.done()]
                    if 0 < health.timeout <= away
                    else []
                )
            for future in late:  # (outside the lock: a future's callbacks run here)
                if not future.done():
                    future.set_exception(health.doubt())
            with self.lock:
                self._cond.wait(delay)
            delay = min(delay * 2, _RETRY_MAX)


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
