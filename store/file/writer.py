"""Write coalescing and group commit for the file journal (Artemis's TimedBuffer, reworked).

Appenders copy encoded records into one in-memory buffer under the journal's append lock; the
buffer is written to the file by whoever flushes, in one write per file touched, followed by one
sync that completes every waiter of the batch.

Who flushes (the policy, and why it differs from Artemis):

- A ``sync=True`` append (or :meth:`flush`) when nobody is flushing becomes the **leader**: it
  writes everything buffered, syncs once, and wakes every waiter the sync covered. Appends that
  arrive while the leader is in ``fdatasync`` wait; when it returns, leadership passes to the
  oldest of them, who flushes everything that accumulated meanwhile. So a lone writer pays one
  write + one sync and no thread hand-off, and 64 writers share each sync: the batch size adapts
  to the disk's latency. Artemis instead flushes on a fixed ``journal-buffer-timeout`` tick, which
  caps a blocking producer at one record per tick; here the timeout is only an upper bound.
- The waiters a sync covered are woken as a **chain**: the flusher releases the first, and each
  woken waiter releases the next before it returns to its caller; the next leader is the link
  before the last. Released all at once, a dozen threads wake together and fight for the
  interpreter lock (half of the process's CPU went to the kernel's futex and scheduler work);
  woken one after another, each finds the interpreter free, appends its next record, and
  blocks again before the next wakes, so those records are in the buffer when the next
  leader, woken late, flushes. It wakes the last link before it flushes, so that link's work
  runs while the leader's write and sync have given up the interpreter lock. Measured in
  ``bench/RESULTS.md``: the leader last, 64 threads about 1.2x the records per second of all
  at once; next to last, durable send+ack of 16+16 threads 1.3x (fewer, fuller syncs).
- Non-sync appends are written by the background flusher at most ``journal-buffer-timeout`` after
  they were buffered, or at once by the appender when the buffer reaches ``journal-buffer-size``.
  ``journal-buffer-timeout = 0`` means no buffering: every append is written before it returns.
- :meth:`sync_future` returns one shared Future per pending batch (cheap at high call rates); the
  background flusher completes it after the sync that covers it.

Invariants the reader relies on (see ``store.file.format``):

- bytes reach a file in append order, contiguously; with aligned I/O each flush is padded with
  zeros to the alignment and the next flush starts at the boundary;
- a file is synced before the first write to the next file, so only the last file written can
  have an unsynced tail;
- ``durable_lsn`` is stamped into each record as it is appended (:attr:`stamp_lsn`): everything
  up to it was synced, or will have been by the time the record reaches the disk — which
  includes every record of the file written before this one (it is synced first), so a record's
  ``durable_lsn`` is never below the last lsn of the previous file (``FLAG_FLOOR``, see
  ``store.file.format``).

A failed write or sync poisons the writer: every waiter and every later append gets the error.

Thread-safety: all public methods may be called from any thread. Methods ending in ``_locked``
must be called with :attr:`lock` held.
"""

from __future__ import annotations

import collections
import concurrent.futures
import itertools
import logging
import threading

from store.errors import JournalClosedError, StoreError, StoreIOError
from store.file.io import IOBackend
from store.file.segments import Segment

__all__ = ["GroupCommitWriter", "Waiter"]

log = logging.getLogger(__name__)


class Waiter:
    """A blocked sync appender: released by the flusher or by the waiter before it in the
    chain (``next``), possibly as the next leader."""

    __slots__ = ("leader", "lock", "lsn", "next")

    def __init__(self, lsn: int) -> None:
        self.lsn = lsn
        self.leader = False
        self.next: Waiter | None = None
        self.lock = threading.Lock()
        self.lock.acquire()


_LEADER = Waiter(0)  # token: "you became the leader"; never waited on
_LEADER.lock.release()


class GroupCommitWriter:
    """Buffers appended bytes and makes them durable in shared flushes (see module docstring)."""

    def __init__(
        self,
        backend: IOBackend,
        current: Segment,
        *,
        buffer_size: int,
        buffer_timeout_ns: int,
        name: str = "journal",
    ) -> None:
        self.backend = backend
        self.lock = threading.Lock()
        self.lsn = 0
        self.durable_lsn = 0
        #: What appends stamp as ``durable_lsn``: max(durable_lsn, last lsn of the previous file).
        self.stamp_lsn = 0
        self.current = current
        self.buf = bytearray()
        self.buf_start = current.end
        self._align_current()
        self.buffer_size = buffer_size
        self._timeout = buffer_timeout_ns / 1e9
        self.direct = buffer_timeout_ns <= 0
        self._chunks: list[tuple[Segment, int, bytearray]] = []
        self._waiters: collections.deque[Waiter] = collections.deque()
        self._flushing = False
        self._sync_req = 0
        self._future: concurrent.futures.Future[None] | None = None
        self._error: StoreError | None = None
        self._unsynced: dict[Segment, None] = {}
        self._closed = False
        self._paused = False
        #: True while appends must go through check_locked (paused, failed or closed): one
        #: attribute test per append instead of a method call.
        self.refusing = False
        #: True once an append set ``_wake`` and the flusher has not yet taken it: later
        #: appends skip ``Event.set`` (cleared by the flusher under the lock).
        self.woken = False
        self._stop = threading.Event()
        self._unpaused = threading.Condition(self.lock)
        self._wake = threading.Event()
        self._bg_sync = False
        self._thread = threading.Thread(
            target=self._background, name=f"{name}-flusher", daemon=True
        )
        self._thread.start()

    # -- called by the journal under the lock ------------------------------------------------

    def _align_current(self) -> None:
        align = self.backend.alignment
        if align > 1:
            start = -(-self.buf_start // align) * align
            self.current.end = self.buf_start = start

    def check_locked(self) -> None:
        """Wait while paused; raise the error that poisoned the writer, or JournalClosedError."""
        while self._paused:
            self._unpaused.wait()
        if self._error is not None:
            raise StoreIOError(
                f"journal failed earlier and refuses writes: {self._error}",
                hint="close and reopen the store once the cause is fixed",
            )
        if self._closed:
            raise JournalClosedError("journal is closed")

    def switch_segment_locked(self, new: Segment) -> None:
        """Continue appending into ``new`` (the previous current file is full)."""
        if self.buf:
            self._chunks.append((self.current, self.buf_start, self.buf))
            self._pad_last_chunk_locked()
            self.buf = bytearray()
        # Nothing reaches ``new`` before the current file is synced (see _write).
        self.stamp_lsn = max(self.stamp_lsn, self.lsn)
        self.current = new
        self.buf_start = new.end
        self._align_current()

    def _pad_last_chunk_locked(self) -> None:
        """Zero-pad the newest chunk to the I/O alignment (ASYNCIO writes whole blocks)."""
        align = self.backend.alignment
        if align <= 1 or not self._chunks:
            return
        seg, start, buf = self._chunks[-1]
        end = start + len(buf)
        if end % align:
            pad = min(align - end % align, seg.size - end)
            buf.extend(bytes(pad))
            end += pad
        seg.end = max(seg.end, end)

    def after_append_locked(self, sync: bool) -> Waiter | None:
        """Decide what the appender does next; returns a token for :meth:`wait` or None."""
        if sync:
            self._sync_req = self.lsn
            if not self._flushing:
                self._flushing = True
                return _LEADER
            w = Waiter(self.lsn)
            self._waiters.append(w)
            return w
        if self.direct or len(self.buf) >= self.buffer_size:
            if not self._flushing:
                self._flushing = True
                return _LEADER
            return None
        if not self.woken:
            self.wake_locked()
        return None

    def wake_locked(self) -> None:
        """Have the background flusher write the buffer within the buffer timeout."""
        self.woken = True
        self._wake.set()

    # -- waiting and flushing ----------------------------------------------------------------

    def wait(self, token: Waiter) -> None:
        """Block until the append that produced ``token`` is durable (or written, if not sync).

        Raises StoreIOError when the flush that covered it failed.
        """
        if token is _LEADER:
            self._run_flusher()
        else:
            try:
                token.lock.acquire()
            except BaseException:
                self._abandon(token)
                raise
            self._pass_on(token)
        if self._error is not None:
            raise StoreIOError(f"journal write failed: {self._error}") from self._error

    def _abandon(self, token: Waiter) -> None:
        """The thread waiting on ``token`` was interrupted (KeyboardInterrupt in the main
        thread). Not covered by a sync yet: it is dropped from the waiters. Covered: it is in
        a chain, whose every link is durable already, so its duties (wake the next, flush as
        the leader) are done now rather than when its turn comes, or every waiter after it
        would hang."""
        with self.lock:
            if token in self._waiters:  # else popped into a chain (linked under this lock)
                self._waiters.remove(token)  # or released by a failure
                return
        self._pass_on(token)

    def _pass_on(self, token: Waiter) -> None:
        """Once ``token`` is released: wake the next waiter of its chain, and flush if it was
        made the leader."""
        nxt = token.next
        if nxt is not None:
            nxt.lock.release()
        if token.leader:
            self._run_flusher()  # raises nothing: a failure poisons the writer instead

    def flush(self) -> None:
        """Return once everything appended so far is durable. Raises StoreIOError on failure."""
        with self.lock:
            if self._error is not None:
                self.check_locked()
            if self.lsn <= self.durable_lsn and not self.buf and not self._chunks:
                return
            token = self.after_append_locked(True)
        if token is not None:
            self.wait(token)

    def sync_future(self) -> concurrent.futures.Future[None]:
        """A Future completed when everything appended so far is durable (shared per batch)."""
        # Fast path without the lock: a pending future covers every record appended before
        # this call. The flusher takes the pending future and the batch snapshot in one locked
        # step, so once our append (made under the lock) is done, ``_future`` is either a future
        # whose round has not snapshotted yet (it will include our record) or None / a newer one.
        pending = self._future
        if pending is not None and self._error is None:
            return pending
        fut: concurrent.futures.Future[None] = concurrent.futures.Future()
        with self.lock:
            if self._error is not None:
                fut.set_exception(StoreIOError(f"journal write failed: {self._error}"))
                return fut
            if self.lsn <= self.durable_lsn and not self.buf and not self._chunks:
                fut.set_result(None)
                return fut
            if self._future is None:
                self._future = fut
            self._sync_req = self.lsn
            self._bg_sync = True
            fut = self._future
        self._wake.set()
        return fut

    def _take_batch_locked(self) -> list[tuple[Segment, int, bytearray]]:
        if self.buf:
            self._chunks.append((self.current, self.buf_start, self.buf))
            self._pad_last_chunk_locked()
            self.buf = bytearray()
            self.buf_start = self.current.end
        chunks = self._chunks
        self._chunks = []
        return chunks

    def _run_flusher(self) -> None:
        """Flush rounds until nothing needs flushing; the caller owns ``_flushing``."""
        while True:
            with self.lock:
                chunks = self._take_batch_locked()
                upto = self.lsn
                # A pending future is itself a request: it may have been created while an
                # earlier round already covered every record, and must not be stranded.
                want_sync = self._sync_req > self.durable_lsn or self._future is not None
                fut = None
                if want_sync:  # only a syncing round may complete the pending future
                    fut = self._future
                    self._future = None
                if not chunks and not want_sync:
                    self._flushing = False
                    return
            try:
                self._write(chunks, sync=want_sync)
            except StoreError as exc:
                self._fail(exc, fut)
                return
            except Exception as exc:
                # Anything else (a backend bug, an OS error not wrapped) must still release
                # every waiter: a flusher that dies with _flushing set would hang them all.
                self._fail(StoreIOError(f"journal write failed: {exc!r}"), fut)
                return
            with self.lock:
                if (want_sync or not self.backend.datasync) and upto > self.durable_lsn:
                    self.durable_lsn = upto
                    if upto > self.stamp_lsn:
                        self.stamp_lsn = upto
                durable = self.durable_lsn
                waiters = self._waiters
                released = []
                while waiters and waiters[0].lsn <= durable:
                    released.append(waiters.popleft())
                next_leader = None
                again = False
                if waiters:
                    next_leader = waiters.popleft()
                    next_leader.leader = True
                    # Next to last: it flushes what the links before it appended once woken,
                    # and wakes the last link before its round (see the module docstring).
                    released.insert(max(0, len(released) - 1), next_leader)
                elif (
                    self._sync_req > durable
                    or self._future is not None
                    or (self.buf and (self.direct or len(self.buf) >= self.buffer_size))
                    or self._chunks
                ):
                    again = True
                else:
                    self._flushing = False
                    if self.buf and not self.woken:
                        # Appended (without sync) while this round wrote: the background
                        # flusher may have looked while we held _flushing and gone back to
                        # sleep. Have it write them within the buffer timeout.
                        self.wake_locked()
                for w, nxt in itertools.pairwise(released):  # linked under the lock (see
                    w.next = nxt  # _abandon)
            if released:
                released[0].lock.release()
            if fut is not None:
                fut.set_result(None)
            if next_leader is not None or not again:
                return

    def _write(self, chunks: list[tuple[Segment, int, bytearray]], *, sync: bool) -> None:
        backend = self.backend
        unsynced = self._unsynced
        for seg, offset, data in chunks:
            if unsynced and (seg not in unsynced or len(unsynced) > 1):
                # A file is synced before anything is written to the next one.
                for other in list(unsynced):
                    if other is not seg:
                        backend.sync(other)
                        del unsynced[other]
                        self._retire(other)
            backend.write(seg, offset, data)
            unsynced[seg] = None
        if sync:
            for seg in list(unsynced):
                backend.sync(seg)
                del unsynced[seg]
                if seg is not self.current:
                    self._retire(seg)

    def _retire(self, seg: Segment) -> None:
        """A full file that is synced: release its descriptors (reopened if ever needed)."""
        self.backend.close_segment(seg)

    def _fail(self, exc: StoreError, fut: concurrent.futures.Future[None] | None) -> None:
        log.error("journal write failed; the journal refuses further writes: %s", exc)
        with self.lock:
            self._error = exc
            self.refusing = True
            self._flushing = False
            waiters = list(self._waiters)
            self._waiters.clear()
            pending = self._future
            self._future = None
        for w in waiters:
            w.lock.release()
        for f in (fut, pending):
            if f is not None and not f.done():
                f.set_exception(StoreIOError(f"journal write failed: {exc}"))

    def pause(self) -> None:
        """Make appenders wait (in :meth:`check_locked`) until :meth:`resume`; for compaction."""
        with self.lock:
            self._paused = True
            self.refusing = True

    def resume(self) -> None:
        with self.lock:
            self._paused = False
            self.refusing = self._error is not None or self._closed
            self._unpaused.notify_all()

    # -- background flusher ------------------------------------------------------------------

    def _background(self) -> None:
        while not self._closed:
            # The timeout is only a safety net: every append that needs the flusher sets _wake.
            if not self._wake.wait(1.0):
                continue
            if self._closed:
                return
            with self.lock:
                urgent = self._bg_sync
            if not urgent and self._timeout > 0:
                self._stop.wait(self._timeout)  # close() cuts the wait short
            # Clear before looking at the state: a wake-up that arrives after this point is
            # seen by the next turn of the loop, never lost.
            self._wake.clear()
            with self.lock:
                self.woken = False
                self._bg_sync = False
                if self._flushing or self._error is not None:
                    continue
                if not (self.buf or self._chunks or self._future is not None):
                    continue
                self._flushing = True
            self._run_flusher()

    def close(self) -> None:
        """Flush everything (durably), stop the background flusher, release the backend."""
        if self._closed:
            return
        err: StoreError | None = None
        try:
            self.flush()
        except StoreError as exc:
            err = exc
        with self.lock:
            self._closed = True
            self.refusing = True
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=10)
        if err is not None:
            raise err
