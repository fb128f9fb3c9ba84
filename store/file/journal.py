"""The native file journal: the default back-end of :class:`~store.journal.api.Journal`.

It ties the pieces together: ``format`` (bytes), ``segments`` (files and their reuse),
``writer`` (group commit), ``io`` (NIO / MAPPED / ASYNCIO), ``reader`` (scanning),
``index`` (live ids and reclaim counts), ``compact`` (the compactor), ``retention`` (history
copies) and ``lock`` (one writer per directory).

Lifecycle: constructing the journal creates the directory (if allowed) and takes the directory
lock at once (a second writer gets :class:`~store.errors.StoreLockedError`); :meth:`load`
finishes any interrupted compaction, reads every file, and starts the writer; :meth:`close`
makes everything durable and releases the lock.

Background work happens on one maintenance thread, woken after every file roll: reclaim files
whose records are all dead, copy finished files to the retention folder, and start compaction
when ``journal-compact-min-files`` / ``journal-compact-percentage`` say so.

Thread-safety: every public method may be called from any thread. The append lock is the
writer's ``lock``; the index and file lists change only under it.
"""

from __future__ import annotations

import concurrent.futures
import gc
import itertools
import logging
import os
import threading
import zlib

from store.errors import (
    ConfigError,
    CorruptionError,
    JournalClosedError,
    JournalStateError,
    RecordTooLargeError,
    StoreError,
    UnknownRecordError,
    UnknownTransactionError,
)
from store.file import format as fmt
from store.file.index import TX_ADD, TX_DELETE, TX_UPDATE, LiveIndex, reclaimable
from store.file.io import IOBackend, make_backend
from store.file.lock import DirectoryLock
from store.file.options import FileJournalOptions
from store.file.reader import Cursor, Tail, classify, find_after, replay_file, scan
from store.file.segments import Segment, SegmentManager, SegmentNaming, close
from store.file.writer import GroupCommitWriter
from store.journal.api import MAX_ID, MIN_ID, Journal, JournalStats, LoadResult, RecordType
from store.journal.replay import Replayer

__all__ = ["FileJournal"]

log = logging.getLogger(__name__)

_ADD = int(RecordType.ADD)
_UPDATE = int(RecordType.UPDATE)
_DELETE = int(RecordType.DELETE)
_ADD_TX = int(RecordType.ADD_TX)
_UPDATE_TX = int(RecordType.UPDATE_TX)
_DELETE_TX = int(RecordType.DELETE_TX)
_PREPARE = int(RecordType.PREPARE)
_COMMIT = int(RecordType.COMMIT)
_ROLLBACK = int(RecordType.ROLLBACK)
_EVENT = int(RecordType.EVENT)

_pack_head = fmt.RECORD_HEAD.pack
_pack_tail = fmt.RECORD_TAIL.pack
_crc32 = zlib.crc32
_OVERHEAD = fmt.OVERHEAD
_FLOOR = fmt.FLAG_FLOOR


class FileJournal(Journal):
    """An append-only journal in pre-allocated files (see the module docstring)."""

    def __init__(self, options: FileJournalOptions) -> None:
        self.options = options
        self._fs = options.fs
        directory = options.directory
        if not self._fs.exists(directory):
            if not options.create_directory:
                raise ConfigError(
                    f"journal directory {directory} does not exist and creating it is disabled",
                    key="create-journal-dir",
                    value=False,
                    allowed="true, or create the directory first",
                )
            self._fs.makedirs(directory)
        self._naming = SegmentNaming(directory, options.prefix)
        self._lock_file: DirectoryLock | None = None
        if options.lock and self._fs.native:
            self._lock_file = DirectoryLock(directory)
            self._lock_file.acquire()
        self.backend: IOBackend = make_backend(
            options.journal_type,
            self._fs,
            directory,
            datasync=options.datasync,
            max_io=options.max_io,
        )
        if options.io_alignment:
            if self.backend.name != "NIO" or options.io_alignment % fmt.PAD_UNIT:
                raise ValueError(
                    f"io_alignment {options.io_alignment} needs the NIO backend and a multiple "
                    f"of {fmt.PAD_UNIT}"
                )
            self.backend.alignment = options.io_alignment
        self.file_size = _aligned_file_size(options.file_size, self.backend.alignment)
        self.segments = SegmentManager(
            self._fs,
            self._naming,
            kind=options.kind,
            file_size=self.file_size,
            pool_files=options.pool_files,
            max_attic_files=options.max_attic_files,
        )
        self.segments.align = self.backend.alignment
        self.index = LiveIndex()
        self.data_files: list[Segment] = []
        self.writer: GroupCommitWriter | None = None
        self._state_lock = threading.Lock()
        self._load_called = False
        self._closed = False
        self._max_record = 0
        self._maint_lock = threading.Lock()  # one reclaim/compaction/retention pass at a time
        self._maint_wake = threading.Event()
        self._maint_thread: threading.Thread | None = None
        self._retention_pending: list[Segment] = []
        self._recycling = 0  # files taken out of data_files and not yet back in the pool
        self.compactions = 0

    # -- load ------------------------------------------------------------------------------

    def load(self) -> LoadResult:
        """Replay the journal files. Raises JournalStateError on a second call, CorruptionError
        (ChecksumError) for damaged data, StoreIOError when a file cannot be read."""
        with self._state_lock:
            if self._closed:
                raise JournalClosedError(f"journal {self.options.directory} is closed")
            if self._load_called:
                raise JournalStateError(f"journal {self.options.directory} is already loaded")
            self._load_called = True
        from store.file import compact

        compact.recover(self._fs, self._naming)
        replayer = Replayer()
        # A load creates millions of long-lived objects and no cycles; the cyclic collector
        # would walk them all again and again (a third of the load time), so it waits.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            data, tails, free, max_lsn = self._read_files(replayer)
            result = replayer.result()
        finally:
            if gc_was_enabled:
                gc.enable()
        self._start(data, tails, free, max_lsn, result.failed)
        return result

    def _list_files(self) -> list[tuple[int, Segment]]:
        found: list[tuple[int, Segment]] = []
        for name in self._fs.listdir(self._naming.directory):
            if self._naming.parse(name) is None:
                continue
            path = os.path.join(self._naming.directory, name)
            handle = self._fs.open(path)
            size = handle.size()
            header = fmt.decode_header(handle.pread(fmt.HEADER_SIZE, 0), path)
            seg = Segment(path, 0, size, handle)
            if header is None:
                log.warning("journal file %s has no header (never finished); moved to attic", path)
                self.segments.to_attic(seg)
                continue
            if header.kind != self.options.kind:
                handle.close()
                raise CorruptionError(
                    path,
                    0,
                    f"file of journal kind {header.kind} in a journal of kind {self.options.kind}",
                )
            seg.file_id = header.file_id
            self.segments.note_existing_id(header.file_id)
            found.append((header.file_id, seg))
        found.sort(key=lambda item: item[0])
        for (a, sa), (b, _sb) in itertools.pairwise(found):
            if a == b:
                raise CorruptionError(sa.path, 0, f"two journal files carry file id {a}")
        return found

    def _read_files(
        self, replayer: Replayer
    ) -> tuple[list[Segment], list[tuple[Segment, Tail]], list[Segment], int]:
        files = self._list_files()
        index = self.index
        data: list[Segment] = []
        free: list[Segment] = []
        tails: list[tuple[Segment, Tail, int, Cursor]] = []
        max_lsn = 0
        for _fid, seg in files:
            assert seg.handle is not None
            raw = seg.handle.pread(seg.size, 0)
            cur = Cursor()
            replay_file(scan(raw, seg.file_id, cur), seg, replayer, index)
            seg.end = cur.end
            tail = Tail(cur.end, find_after(raw, seg.file_id, cur.end))
            # Only records in sequence count: a torn tail is zeroed before anything new is
            # written, and new records must continue the sequence right after the last good one.
            max_lsn = max(max_lsn, cur.last_lsn)
            tails.append((seg, tail, max_lsn, cur))
            if cur.count:
                data.append(seg)
            else:
                free.append(seg)
        last = max(
            (i for i, (_s, t, _m, c) in enumerate(tails) if c.count or t.records), default=-1
        )
        prev_max = 0
        for i, (seg, tail, upto, cur) in enumerate(tails):
            missing = cur.last_lsn + 1 if cur.count else prev_max + 1
            classify(seg.path, tail, missing_lsn=missing, is_last=i == last)
            prev_max = upto
        torn = [(seg, tail) for seg, tail, _m, _c in tails if tail.records]
        return data, torn, free, max_lsn

    def _start(
        self,
        data: list[Segment],
        torn: list[tuple[Segment, Tail]],
        free: list[Segment],
        max_lsn: int,
        failed: list[int],
    ) -> None:
        opts = self.options
        for seg, tail in torn:
            # An unsynced tail of the last write: zero it so it can never be read again.
            assert seg.handle is not None
            log.warning(
                "ignoring torn tail of %s at offset %d (%d bytes)",
                seg.path,
                tail.end,
                tail.extent - tail.end,
            )
            seg.handle.pwrite(bytes(tail.extent - tail.end), tail.end)
            seg.handle.datasync()
        for seg in free:
            close(seg)
            self.segments.adopt_free(seg)
        align = self.backend.alignment
        current = data.pop() if data else self.segments.take()
        if current.size != self.file_size or (align > 1 and current.size % align):
            # A file from another configuration (other size, or not block-aligned for
            # ASYNCIO): keep it as a data file and append into a fresh one.
            data.append(current)
            current = self.segments.take()
        if align > 1 and current.end % align:
            # Aligned writers start at the next boundary: make sure the gap reads as padding.
            gap_end = min(current.size, -(-current.end // align) * align)
            assert current.handle is not None
            current.handle.pwrite(bytes(gap_end - current.end), current.end)
        if current.handle is not None:
            current.handle.datasync()
        for seg in data:
            close(seg)
        self.data_files = data
        self._max_record = self.file_size - (-(-fmt.DATA_START // align) * align)
        writer = GroupCommitWriter(
            self.backend,
            current,
            buffer_size=opts.buffer_size,
            buffer_timeout_ns=opts.buffer_timeout_ns,
            name=opts.prefix,
        )
        writer.lsn = writer.durable_lsn = writer.stamp_lsn = max_lsn
        self.writer = writer
        self._ensure_min_files()
        self.segments.prepare_async()
        for tx_id in failed:
            # Make sure a failed transaction's records can never be committed later.
            self._append(_ROLLBACK, 0, tx_id, 0, b"", False, check=False)
        if failed:
            writer.flush()
        if opts.retention is not None:
            self._retention_pending.extend(self.data_files)
        self._maint_thread = threading.Thread(
            target=self._maintenance, name=f"{opts.prefix}-maintenance", daemon=True
        )
        self._maint_thread.start()
        self._maint_wake.set()

    def _ensure_min_files(self) -> None:
        have = len(self.data_files) + 1 + len(list(self.segments.unused()))
        self.segments.files_in_use = len(self.data_files) + 1
        while have < self.options.min_files:
            self.segments.adopt_free(_closed(self.segments.create()))
            have += 1

    # -- appends ---------------------------------------------------------------------------

    def _not_ready(self) -> StoreError:
        if self._closed:
            return JournalClosedError(f"journal {self.options.directory} is closed")
        return JournalStateError(f"journal {self.options.directory}: load() must be called first")

    def _append(
        self,
        rtype: int,
        id: int,
        tx_id: int,
        urt: int,
        data: bytes,
        wait: bool,
        *,
        check: bool = True,
    ) -> None:
        n = _OVERHEAD + len(data)
        if n > self._max_record:
            if self.writer is None:
                raise self._not_ready()
            raise RecordTooLargeError(
                f"record of {len(data)} bytes does not fit a journal file of "
                f"{self.file_size} bytes (at most {self._max_record - _OVERHEAD})"
            )
        if not (MIN_ID <= id <= MAX_ID and MIN_ID <= tx_id <= MAX_ID):
            raise ValueError(
                f"record and transaction ids must be signed 64-bit integers: {id}, {tx_id}"
            )
        if not 0 <= urt <= 255:
            raise ValueError(f"user_record_type must be 0..255, not {urt}")
        body_crc = _crc32(data)
        w = self.writer
        if w is None:
            raise self._not_ready()
        with w.lock:
            w.check_locked()  # waits while a compaction runs, which replaces the index
            index = self.index
            if check:
                if rtype == _UPDATE or rtype == _DELETE:
                    if id not in index.records or (
                        index.updated_only and id in index.updated_only
                    ):
                        raise UnknownRecordError(
                            f"record {id} is not live in journal {self.options.directory}"
                        )
                elif (rtype == _COMMIT or rtype == _ROLLBACK) and tx_id not in index.txs:
                    raise UnknownTransactionError(
                        f"transaction {tx_id} is not open in journal {self.options.directory}"
                    )
            seg = w.current
            if seg.end + n > seg.size:
                seg = self._roll_locked()
            tx_count = index.tx_count(tx_id, seg) if rtype == _PREPARE or rtype == _COMMIT else 0
            lsn = w.lsn + 1
            w.lsn = lsn
            head = _pack_head(
                n, rtype, urt, 0, _FLOOR, seg.file_id, lsn, w.stamp_lsn, id, tx_id, tx_count
            )
            buf = w.buf
            buf += head
            buf += data
            buf += _pack_tail(_crc32(head, body_crc), n)
            seg.end += n
            if rtype == _ADD or rtype == _UPDATE:
                index.add(id, seg, n)
            elif rtype == _DELETE:
                index.delete(id, seg)
            elif rtype == _ADD_TX:
                index.tx_record(tx_id, TX_ADD, id, seg, n)
            elif rtype == _UPDATE_TX:
                index.tx_record(tx_id, TX_UPDATE, id, seg, n)
            elif rtype == _DELETE_TX:
                index.tx_record(tx_id, TX_DELETE, id, seg, n)
            elif rtype == _PREPARE:
                index.prepare_in(tx_id, seg)
            elif rtype == _COMMIT:
                index.commit(tx_id, seg)
            elif rtype == _ROLLBACK:
                index.rollback(tx_id, seg)
            token = w.after_append_locked(wait)
        if token is not None:
            w.wait(token)

    def append_add(
        self, id: int, user_record_type: int, data: bytes, *, sync: bool = False
    ) -> None:
        self._append(
            _ADD, id, 0, user_record_type, data, sync and self.options.sync_non_transactional
        )

    def append_update(
        self, id: int, user_record_type: int, data: bytes, *, sync: bool = False
    ) -> None:
        self._append(
            _UPDATE, id, 0, user_record_type, data, sync and self.options.sync_non_transactional
        )

    def append_delete(self, id: int, *, sync: bool = False) -> None:
        self._append(_DELETE, id, 0, 0, b"", sync and self.options.sync_non_transactional)

    def append_add_tx(self, tx_id: int, id: int, user_record_type: int, data: bytes) -> None:
        self._append(_ADD_TX, id, tx_id, user_record_type, data, False)

    def append_update_tx(self, tx_id: int, id: int, user_record_type: int, data: bytes) -> None:
        self._append(_UPDATE_TX, id, tx_id, user_record_type, data, False)

    def append_delete_tx(self, tx_id: int, id: int) -> None:
        self._append(_DELETE_TX, id, tx_id, 0, b"", False)

    def append_prepare(self, tx_id: int, xid: bytes, *, sync: bool = True) -> None:
        self._append(_PREPARE, 0, tx_id, 0, bytes(xid), sync and self.options.sync_transactional)

    def append_commit(self, tx_id: int, *, sync: bool = True) -> None:
        self._append(_COMMIT, 0, tx_id, 0, b"", sync and self.options.sync_transactional)

    def append_rollback(self, tx_id: int, *, sync: bool = True) -> None:
        self._append(_ROLLBACK, 0, tx_id, 0, b"", sync and self.options.sync_transactional)

    def append_event(self, id: int, user_record_type: int, data: bytes) -> None:
        self._append(_EVENT, id, 0, user_record_type, data, False)

    def flush(self) -> None:
        w = self.writer
        if w is None:
            raise self._not_ready()
        with w.lock:
            w.check_locked()
        w.flush()

    def sync_future(self) -> concurrent.futures.Future[None]:
        w = self.writer
        if w is None:
            raise self._not_ready()
        return w.sync_future()

    # -- files -----------------------------------------------------------------------------

    def _roll_locked(self) -> Segment:
        w = self.writer
        assert w is not None
        old = w.current
        new = self.segments.take()
        self.data_files.append(old)
        w.switch_segment_locked(new)
        self.segments.files_in_use = len(self.data_files) + 1
        if self.options.retention is not None:
            self._retention_pending.append(old)
        self._maint_wake.set()
        return new

    def reclaim(self) -> int:
        """Reuse every data file whose records are all dead; returns how many were reclaimed."""
        w = self.writer
        if w is None:
            raise self._not_ready()
        with self._maint_lock:
            return self._reclaim_locked()

    def _reclaim_locked(self) -> int:
        w = self.writer
        assert w is not None
        with w.lock:
            blocked = list(self._retention_pending)
            gone = reclaimable(self.data_files, w.current, blocked)  # type: ignore[arg-type]
            if not gone:
                return 0
            gone_set = set(gone)
            self.data_files = [f for f in self.data_files if f not in gone_set]
            for f in (*self.data_files, w.current):
                for target in [t for t in f.neg if t in gone_set]:
                    del f.neg[target]
            self.segments.files_in_use = len(self.data_files) + 1
            self._recycling = len(gone)
        try:
            # The deletes that made these files dead must be durable before the files are reused.
            w.flush()
            for seg in gone:
                self.backend.close_segment(seg)
                self.segments.recycle(seg)  # type: ignore[arg-type]
                with w.lock:
                    self._recycling -= 1
        finally:
            with w.lock:
                self._recycling = 0
        log.debug("reclaimed %d journal files", len(gone))
        return len(gone)

    def _maintenance(self) -> None:
        while True:
            self._maint_wake.wait()
            self._maint_wake.clear()
            if self._closed:
                return
            try:
                with self._maint_lock:
                    if self._closed:
                        return
                    self._retention_pass()
                    self._reclaim_locked()
                    if self._should_compact():
                        from store.file import compact

                        compact.compact(self)
                        self._reclaim_locked()
            except StoreError as exc:
                log.error("journal maintenance failed in %s: %s", self.options.directory, exc)
                log.debug("maintenance failure", exc_info=True)

    def _retention_pass(self) -> None:
        if self.options.retention is None or not self._retention_pending:
            return
        from store.file import retention

        assert self.writer is not None
        self.writer.flush()
        with self.writer.lock:
            pending = list(self._retention_pending)
        for seg in pending:
            retention.archive(self._fs, self._naming, self.options.retention, seg)
            with self.writer.lock:
                if seg in self._retention_pending:
                    self._retention_pending.remove(seg)
        retention.prune(self._fs, self._naming, self.options.retention, self.file_size)

    def _should_compact(self) -> bool:
        opts = self.options
        if opts.compact_min_files <= 0:
            return False
        w = self.writer
        assert w is not None
        with w.lock:
            files = len(self.data_files)
            if files <= opts.compact_min_files:
                return False
            live = sum(f.live_bytes for f in self.data_files)
            return live < opts.compact_percentage / 100 * files * self.file_size

    def compact(self) -> None:
        """Rewrite the live records of every finished file into as few files as possible.

        Crash-safe: see ``store.file.compact``. Raises StoreIOError on I/O failure (the journal
        keeps its old files then).
        """
        if self.writer is None:
            raise self._not_ready()
        from store.file import compact

        with self._maint_lock:
            self._reclaim_locked()
            compact.compact(self)
            self._reclaim_locked()

    # -- stats and close -------------------------------------------------------------------

    def stats(self) -> JournalStats:
        w = self.writer
        if w is None:
            return JournalStats(records_live=0, files=0, bytes_live=0, bytes_total=0)
        with w.lock:
            data = [*self.data_files, w.current]
            unused = self.segments.unused_count() + self._recycling
            live_bytes = sum(f.live_bytes for f in data)
            return JournalStats(
                records_live=len(self.index.records),
                files=len(data) + unused,
                bytes_live=live_bytes,
                bytes_total=sum(f.size for f in data) + unused * self.file_size,
                extra={
                    "data_files": len(data),
                    "free_files": unused,
                    "open_transactions": len(self.index.txs),
                    "lsn": w.lsn,
                    "durable_lsn": w.durable_lsn,
                    "compactions": self.compactions,
                },
            )

    def close(self) -> None:
        """Make everything appended durable, stop background work, release the directory lock."""
        with self._state_lock:
            if self._closed:
                return
            self._closed = True
        err: StoreError | None = None
        w = self.writer
        if w is not None:
            self._maint_wake.set()
            # Wait for a running maintenance pass to end; the thread then sees _closed and exits.
            self._maint_lock.acquire()
            self._maint_lock.release()
            if self._maint_thread is not None:
                self._maint_thread.join(timeout=30)
            try:
                w.close()
            except StoreError as exc:
                err = exc
            self.segments.wait_idle()
            for seg in (*self.data_files, w.current, *self.segments.unused()):
                close(seg)
        self.backend.close()
        if self._lock_file is not None:
            self._lock_file.release()
        if err is not None:
            raise err


def _aligned_file_size(size: int, align: int) -> int:
    """``size`` rounded to the nearest multiple of ``align`` (at least one block), as Artemis
    rounds the journal file size for AIO; logged when it changes."""
    if align <= 1 or size % align == 0:
        return size
    rounded = max(align, (size + align // 2) // align * align)
    log.warning("journal-file-size %d is not a multiple of %d; using %d", size, align, rounded)
    return rounded


def _closed(seg: Segment) -> Segment:
    close(seg)
    return seg
