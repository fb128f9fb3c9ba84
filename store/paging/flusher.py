"""Group commit of page records, shared by the file and the database page stores.

Policy (the same idea as the journals' TimedBuffer, ``page-sync-timeout``):

- an append encodes its record and queues it as pending for its page store; pending records
  of every address of one manager wait in one queue, in append order;
- one flusher thread per manager takes *everything* pending at once and hands it to the
  back-end's ``write`` (which writes and syncs it: fdatasync, or one database transaction),
  at most ``page-sync-timeout`` nanoseconds after the oldest pending record was appended;
- ``append(sync=True)``, ``flush()`` and a read of a page with pending records make the
  pending batch *urgent*: an idle flusher takes it at once, a busy one as soon as its write
  returns. A caller then waits until every record appended before it is durable (the
  sequence number of its last record is covered by a completed write);
- back-pressure: when the pending records reach ``max_pending_bytes`` (default 16 MiB),
  appenders wait until the flusher takes them, so memory stays bounded;
- a write that fails fails the manager: every waiter of that batch, everything pending and
  every later call gets the error (:class:`~store.errors.StoreIOError` or
  :class:`~store.errors.StoreUnavailableError`, whatever the back-end raised). Nothing
  appended is dropped silently: whoever appended it is told;
- except a database outage (a back-end with ``retry``, the database page store, whose write
  raised StoreUnavailableError): the flusher rides it out as the journals' writer does
  (docs/db.md "Outages"). New appends are refused at once (StoreUnavailableError, nothing
  written); the flusher calls ``retry(batch)`` every 50-400 ms, which settles whether the
  failed batch was applied (its pages' lengths read back) and writes it if not; a caller
  waiting for it is answered durable once that succeeds, or gets StoreUnavailableError with
  ``in_doubt=True`` after waiting ``outage_timeout`` seconds of the outage (its records stay queued
  and are written once the database answers). A close during an outage gives up after
  ``outage_timeout`` (the failure is then in doubt).

``lock`` is the manager's one lock: page stores update their roll state and queue records
under it, so the queue order is the position order. ``io_lock`` is held by the flusher while
it takes and writes a batch (never while it waits for work); a manager takes it (before
``lock``, never after) to delete pages or stores, so no write is in flight for what it
deletes.

Thread-safety: everything here may be called from any thread, as each method says which
lock it expects.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

from store.errors import JournalClosedError, StoreError, StoreUnavailableError

__all__ = ["Chunk", "Flusher", "WriteBatch"]

_log = logging.getLogger(__name__)

#: How often (seconds) a waiting caller looks at the database's health.
_WAIT_SLICE = 0.25
#: Pauses between retries in an outage: 50 ms doubling up to 400 ms.
_RETRY_FIRST = 0.05
_RETRY_MAX = 0.4


@dataclass(slots=True)
class Chunk:
    """Consecutive encoded records of one page of one page store, in position order."""

    page: int
    data: bytearray = field(default_factory=bytearray)
    records: int = 0


#: What the flusher hands to the back-end: per page store (its key), its chunks in order.
WriteBatch = list[tuple[Hashable, list[Chunk]]]


class Flusher:
    """The flusher thread of one paging manager (policy in the module docstring).

    ``write(batch)`` writes and syncs a batch; it raises a StoreError to report a failure.
    ``timeout_ns`` is ``page-sync-timeout``.
    """

    def __init__(
        self,
        *,
        name: str,
        timeout_ns: int,
        write: Callable[[WriteBatch], None],
        max_pending_bytes: int = 16 * 1024 * 1024,
    ) -> None:
        self.lock = threading.Lock()
        self.io_lock = threading.Lock()
        self._work = threading.Condition(self.lock)  # the flusher waits here
        self._durable_cond = threading.Condition(self.lock)  # callers wait for durability
        self._room = threading.Condition(self.lock)  # appenders wait for room
        self._name = name
        self._timeout = max(0, timeout_ns) / 1e9
        self._write = write
        self._max_pending = max(1, max_pending_bytes)
        self._pending: dict[Hashable, list[Chunk]] = {}
        self._pending_bytes = 0
        self._first_at = 0.0
        self._urgent = False
        self._appended = 0  # sequence number of the last queued record
        self._durable = 0  # every record up to this sequence number is durable
        self._closing = False
        #: rides an outage out (module docstring): settles a failed batch and writes it if
        #: it was not applied; None (the default): a failed write stops the manager.
        self.retry: Callable[[WriteBatch], None] | None = None
        #: the longest (seconds) a caller waits in an outage before its answer is in doubt
        #: (``jdbc-network-timeout``; 0: no limit).
        self.outage_timeout = 0.0
        #: whether a failed write is an outage to ride out (the back-end's judgement).
        self.is_outage: Callable[[StoreError], bool] = lambda error: False
        #: when the current outage was noticed (None: the database answers).
        self.down_since: float | None = None
        #: outages ridden out since open.
        self.outages = 0
        #: set once a write failed: every later call raises a copy of it.
        self.failed: StoreError | None = None
        #: batches written so far (how well appends share syncs).
        self.batches = 0
        self._thread = threading.Thread(
            target=self._loop, name=f"store-paging-flusher-{name}", daemon=True
        )
        self._thread.start()

    # -- called with ``lock`` held ---------------------------------------------------------

    def check_locked(self) -> None:
        """Returns None while the manager works. Raises a copy of the failure that stopped
        it, or JournalClosedError after close."""
        if self.failed is not None:
            raise copy.copy(self.failed) from self.failed
        if self._closing:
            raise JournalClosedError(f"the paging manager of {self._name} is closed")

    def admit_locked(self, nbytes: int) -> bool:
        """Return once ``nbytes`` more pending bytes fit (back-pressure); the lock is released
        while waiting. Returns whether it waited (the caller's own checks made under the lock
        are then to be made again). Raises as :meth:`check_locked` (also when that happens
        while waiting)."""
        waited = False
        while True:
            if self.failed is not None or self._closing:  # (no call per append when well)
                self.check_locked()
            if self.down_since is not None and threading.current_thread() is not self._thread:
                raise StoreUnavailableError(
                    f"paging {self._name}: the database is away (for "
                    f"{time.monotonic() - self.down_since:.1f} s); nothing was written",
                    hint="the store reconnects by itself; retry once the database answers",
                )
            if (
                self._pending_bytes == 0
                or self._pending_bytes + nbytes <= self._max_pending
                or threading.current_thread() is self._thread
            ):
                return waited
            self._make_urgent_locked()
            self._room.wait(_WAIT_SLICE)  # an outage refuses waiting appenders too
            waited = True

    def queue_locked(self, owner: Hashable, page: int, encoded: bytes) -> int:
        """Queue one encoded record of ``owner`` for ``page``; returns its sequence number
        (pass it to :meth:`wait`). Raises nothing (call :meth:`admit_locked` first)."""
        chunks = self._pending.get(owner)
        if chunks is None:  # (not setdefault: a list made per append costs more than it)
            chunks = self._pending[owner] = []
        if not chunks or chunks[-1].page != page:
            chunks.append(Chunk(page))
        chunk = chunks[-1]
        chunk.data += encoded
        chunk.records += 1
        if self._pending_bytes == 0:
            self._first_at = time.monotonic()
            self._work.notify()
        self._pending_bytes += len(encoded)
        self._appended += 1
        if self._pending_bytes >= self._max_pending:
            self._make_urgent_locked()
        return self._appended

    def drop_locked(self, owner: Hashable) -> None:
        """Forget ``owner``'s pending records (its store is being removed). Raises nothing."""
        for chunk in self._pending.pop(owner, []):
            self._pending_bytes -= len(chunk.data)

    def last_locked(self) -> int:
        """The sequence number of the last record queued (0: none). Raises nothing."""
        return self._appended

    def is_durable_locked(self, seq: int) -> bool:
        """Whether every record up to ``seq`` is durable. Raises nothing."""
        return self._durable >= seq

    # -- called without ``lock`` -----------------------------------------------------------

    def wait(self, seq: int) -> None:
        """Return once every record up to ``seq`` is durable (writing the pending batch now
        if needed). Raises the failure of the write that should have made it durable, or
        JournalClosedError when the manager was closed before it could be."""
        started = time.monotonic()
        with self.lock:
            while self._durable < seq:
                if self.failed is not None:
                    raise copy.copy(self.failed) from self.failed
                if self._closing and not self._thread.is_alive():
                    raise JournalClosedError(f"the paging manager of {self._name} is closed")
                down = self.down_since
                timeout = self.outage_timeout
                now = time.monotonic()
                if down is not None and timeout > 0 and now - max(down, started) >= timeout:
                    raise StoreUnavailableError(
                        f"paging {self._name}: the database has not answered for "
                        f"{timeout:g} s; these page records are not confirmed",
                        hint="they stay queued and are written once the database answers",
                        in_doubt=True,
                    )
                self._make_urgent_locked()
                self._durable_cond.wait(_WAIT_SLICE)

    def close(self) -> StoreError | None:
        """Write and sync everything pending, then stop the thread. Idempotent. Returns the
        failure that stopped the manager (None when everything appended is durable)."""
        with self.lock:
            self._closing = True
            self._urgent = True
            self._work.notify()
            self._room.notify_all()
        if threading.current_thread() is not self._thread:
            self._thread.join()
        return self.failed

    # -- the flusher thread ----------------------------------------------------------------

    def _make_urgent_locked(self) -> None:
        if not self._urgent:
            self._urgent = True
            self._work.notify()

    def _ready(self) -> bool:
        """Wait until a batch should be written; returns False when the flusher should stop.
        Called without any lock (the flusher never waits for work holding ``io_lock``)."""
        with self.lock:
            while True:
                if self.failed is not None:
                    return False
                if not self._pending:
                    if self._closing:
                        return False
                    self._urgent = False
                    self._work.wait()
                    continue
                if not self._urgent and not self._closing:
                    delay = self._first_at + self._timeout - time.monotonic()
                    if delay > 0:
                        self._work.wait(delay)
                        continue
                return True

    def _take_locked(self) -> tuple[WriteBatch, int]:
        """Everything pending and the sequence number writing it makes durable."""
        batch = list(self._pending.items())
        self._pending = {}
        self._pending_bytes = 0
        self._urgent = False
        self._room.notify_all()
        return batch, self._appended

    def _loop(self) -> None:
        while self._ready():
            error: StoreError | None = None
            with self.io_lock:
                with self.lock:
                    batch, upto = self._take_locked()
                try:
                    if batch:  # a store removed meanwhile may have left nothing
                        self._write(batch)
                except StoreError as exc:
                    error = exc
                except BaseException as exc:  # never leave waiters blocked
                    error = StoreUnavailableError(f"paging {self._name}: write failed: {exc!r}")
                    error.__cause__ = exc
                if (
                    isinstance(error, StoreUnavailableError)
                    and self.retry is not None
                    and self.is_outage(error)
                ):
                    error = self._ride_out(batch, error)
            with self.lock:
                if error is None:
                    self._durable = max(self._durable, upto)
                    self.batches += 1
                else:
                    self.failed = error
                    _log.error(
                        "paging %s: write failed, refusing further appends: %s", self._name, error
                    )
                    self._pending = {}
                    self._pending_bytes = 0
                    self._room.notify_all()
                self._durable_cond.notify_all()
        with self.lock:
            self._durable_cond.notify_all()
            self._room.notify_all()

    def _ride_out(self, batch: WriteBatch, error: StoreUnavailableError) -> StoreError | None:
        """The flusher thread, ``io_lock`` held, after ``batch`` failed in an outage: retry
        until it is settled and written (None), or return the error that stops the manager
        (module docstring)."""
        began = time.monotonic()
        with self.lock:
            self.down_since = began
        _log.warning(
            "paging %s: the database went away (%s); new appends are refused until it answers",
            self._name,
            error,
        )
        delay = _RETRY_FIRST
        while True:
            try:
                assert self.retry is not None
                self.retry(batch)
            except StoreUnavailableError as exc:
                if not self.is_outage(exc):  # a statement refused (a table gone): no outage
                    return exc
                error = exc
            except StoreError as exc:
                return exc
            except BaseException as exc:
                failed = StoreUnavailableError(f"paging {self._name}: write failed: {exc!r}")
                failed.__cause__ = exc
                return failed
            else:
                with self.lock:
                    self.down_since = None
                    self.outages += 1
                _log.info(
                    "paging %s: the database answers again after %.1f s; paging carries on",
                    self._name,
                    time.monotonic() - began,
                )
                return None
            with self.lock:
                away = time.monotonic() - began
                timeout = self.outage_timeout
                if self._closing and (timeout <= 0 or away >= timeout):
                    return StoreUnavailableError(
                        f"paging {self._name}: closed while the database was away ({away:.1f} "
                        f"s: {error}); the page records queued are not confirmed",
                        in_doubt=True,
                    )
                self._work.wait(delay)
            delay = min(delay * 2, _RETRY_MAX)
