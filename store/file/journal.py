"""The native file journal: the default back-end of :class:`~store.journal.api.Journal`.

It ties the pieces together: ``format`` (bytes), ``segments`` (files and their reuse),
``writer`` (group commit), ``io`` (NIO / MAPPED / ASYNCIO), ``reader`` (scanning),
``index`` (live ids and reclaim counts), ``compact`` (the compactor), ``retention`` (history
copies) and ``lock`` (one writer per directory).

Lifecycle: constructing the journal creates the directory (if allowed) and takes the directory
lock at once (a second writer gets :class:`~store.errors.StoreLockedError`); :meth:`load`
finishes any interrupted compaction, reads every file, refuses a directory
``store.file.integrity`` finds damaged (the first problem, as a ``CorruptionError``), and
starts the writer; :meth:`close` makes everything durable and releases the lock.

File-list markers (``store.file.format``; why and the crash-safety argument in
``store.file.integrity``): the first record of every file the writer starts while other data
files exist is a ``FILES`` marker listing them with their lsns; reclaim and compaction append a
``CHANGE`` marker and flush it before a retired file is reused or removed; a load that finishes
a committed compaction appends the equivalent marker and flushes it before it deletes the
control file. ``_max_record`` leaves room for the shortest marker, so any accepted record fits
an empty file together with one.

Background work happens on one maintenance thread, woken after every file roll: reclaim files
whose records are all dead, copy finished files to the retention folder, and start compaction
when ``journal-compact-min-files`` / ``journal-compact-percentage`` say so.

Size: past docs/conventions.md#13's ~600 lines since the file-list markers; they stay here because
they are appended under the append lock into the writer's buffer, exactly like records, at the
three places (roll, reclaim, compaction) that change the set of data files. The load's judgement
of a directory lives apart, in ``store.file.integrity``.

Thread-safety: every public method may be called from any thread. The append lock is the
writer's ``lock``; the index and file lists change only under it.
"""

from __future__ import annotations

import concurrent.futures
import gc
import logging
import os
import threading
import zlib
from collections.abc import Sequence

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
from store.file import compact, integrity
from store.file import format as fmt
from store.file.index import ENTRY_SHIFT, LiveIndex, reclaimable
from store.file.io import IOBackend, make_backend
from store.file.lock import DirectoryLock
from store.file.options import FileJournalOptions
from store.file.reader import (
    SPEEDUPS,
    Cursor,
    Tail,
    find_after,
    scan,
    scan_and_replay,
)
from store.file.segments import Segment, SegmentManager, SegmentNaming, close
from store.file.writer import GroupCommitWriter
from store.journal.api import (
    ADD,
    ADD_TX,
    COMMIT,
    DELETE,
    DELETE_TX,
    EVENT,
    MAX_ID,
    MIN_ID,
    PREPARE,
    ROLLBACK,
    UPDATE,
    UPDATE_TX,
    Journal,
    JournalStats,
    LoadResult,
)
from store.journal.replay import OP_ADD, OP_DELETE, OP_UPDATE, Replayer

__all__ = ["FileJournal"]

log = logging.getLogger(__name__)

# The append hot path packs records itself where the compiled encoder is missing (the one
# exception store.file.format's docstring names); everything else calls fmt.encode_record.
_pack_head = fmt.RECORD_HEAD.pack
_pack_tail = fmt.RECORD_TAIL.pack
_crc32 = zlib.crc32
_OVERHEAD = fmt.OVERHEAD
_FLOOR = fmt.FLAG_FLOOR
#: The records :meth:`FileJournal.append_deletes_tx` appends per hold of the append lock at
#: most (other appenders wait that long: about 0.3 ms).
_BULK_HOLD = 1024
# The compiled record encoder (store/_speedups_journal.c), or None: then the three steps below.
_append_record = getattr(SPEEDUPS, "append_record", None)
#: The compiled run of records without a body (``append_deletes_tx``), or None.
_append_records_run = getattr(SPEEDUPS, "append_records_run", None)


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
        if options.retention is not None:
            # The history folder exists from the start, not from the first finished file's
            # background copy: `store data recover` can be pointed at it at once.
            self._fs.makedirs(options.retention.directory)
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
        # A marker longer than this is written without its list (see _begin_file_locked).
        self._marker_budget = max(fmt.marker_size(0), self.file_size // 4)
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
        ctl = compact.finish_interrupted(self._fs, self._naming)
        retired = ctl.file_ids(self._naming)[0] if ctl is not None else []
        replayer = Replayer()
        # A load creates millions of long-lived objects and no cycles; the cyclic collector
        # would walk them all again and again (a third of the load time), so it waits.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            data, tails, free, max_lsn = self._read_files(replayer, retired)
            result = replayer.result()
        finally:
            if gc_was_enabled:
                gc.enable()
        self._start(data, tails, free, max_lsn, result.failed, ctl)
        return result

    def _list_files(self) -> list[tuple[Segment, fmt.FileHeader]]:
        found: list[tuple[Segment, fmt.FileHeader]] = []
        facts: list[integrity.HeaderFacts] = []
        for name in self._fs.listdir(self._naming.directory):
            if self._naming.parse(name) is None:
                continue
            path = os.path.join(self._naming.directory, name)
            handle = self._fs.open(path)
            size = handle.size()
            seg = Segment(path, 0, size, handle)
            try:
                header = fmt.decode_header(handle.pread(fmt.HEADER_SIZE, 0), path)
            except CorruptionError as exc:
                close(seg)
                facts.append(integrity.HeaderFacts(path, None, exc))
                continue
            if header is None:
                log.warning("journal file %s has no header (never finished); moved to attic", path)
                self.segments.to_attic(seg)
                continue
            facts.append(integrity.HeaderFacts(path, header))
            seg.file_id = header.file_id
            self.segments.note_existing_id(header.file_id)
            found.append((seg, header))
        found.sort(key=lambda item: item[0].file_id)
        problems = integrity.header_problems(facts, self.options.kind)
        if problems:
            for seg, _h in found:
                close(seg)
            raise problems[0].error
        return found

    def _read_files(
        self, replayer: Replayer, retired: list[int]
    ) -> tuple[list[Segment], list[tuple[Segment, Tail]], list[Segment], int]:
        """Replay every file, then judge the directory (``store.file.integrity``); raises the
        first problem found as a CorruptionError."""
        files = self._list_files()
        index = self.index
        data: list[Segment] = []
        free: list[Segment] = []
        facts: list[integrity.FileFacts] = []
        newest: tuple[int, bytes, int] | None = None
        max_lsn = 0
        for seg, header in files:
            assert seg.handle is not None
            raw = seg.handle.pread(seg.size, 0)
            cur = Cursor()
            scan_and_replay(raw, seg, cur, replayer, index)
            seg.end = cur.end
            tail = Tail(cur.end, find_after(raw, seg.file_id, cur.end))
            # Only records in sequence count: a torn tail is zeroed before anything new is
            # written, and new records must continue the sequence right after the last good one.
            max_lsn = max(max_lsn, cur.last_lsn)
            if cur.count:
                seg.first_lsn = cur.first_lsn
                seg.last_lsn = cur.last_lsn
                data.append(seg)
                newest = (len(facts), raw, seg.file_id)  # files come in file-id order
            else:
                free.append(seg)
            facts.append(
                integrity.FileFacts(
                    seg.path,
                    seg.file_id,
                    seg.size,
                    header.file_size,
                    cur.count,
                    seg.first_lsn,
                    cur.last_lsn,
                    tail,
                )
            )
        if newest is not None:
            # Only the newest file's markers say which files must exist: its records scanned
            # again (the replay above kept none of them), one file.
            at, raw, file_id = newest
            facts[at].markers = integrity.read_markers(raw, scan(raw, file_id, Cursor()))
        problems = integrity.judge(facts, naming=self._naming, retired=retired)
        if problems:
            for seg, _h in files:
                close(seg)
            raise problems[0].error
        torn = [(seg, f.tail) for (seg, _h), f in zip(files, facts, strict=True) if f.tail.records]
        return data, torn, free, max_lsn

    def _start(
        self,
        data: list[Segment],
        torn: list[tuple[Segment, Tail]],
        free: list[Segment],
        max_lsn: int,
        failed: list[int],
        ctl: compact.ControlFile | None = None,
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
        # Room for the shortest FILES marker in front of any record (see _begin_file_locked).
        self._max_record = (
            self.file_size - (-(-fmt.DATA_START // align) * align) - fmt.marker_size(0)
        )
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
            self._append(ROLLBACK, 0, tx_id, 0, b"", False, check=False)
        if failed:
            writer.flush()
        if ctl is not None:
            self._finish_compaction(ctl)
        if opts.retention is not None:
            self._retention_pending.extend(self.data_files)
        self._maint_thread = threading.Thread(
            target=self._maintenance, name=f"{opts.prefix}-maintenance", daemon=True
        )
        self._maint_thread.start()
        self._maint_wake.set()

    # -- what the compactor uses (store.file.compact.CompactionHost) ----------------------

    @property
    def naming(self) -> SegmentNaming:
        """The names of this journal's files (directory and prefix)."""
        return self._naming

    def install_compaction(self, index: LiveIndex, files: list[Segment]) -> None:
        """Switch to a committed compaction's output (``store.file.compact``, step 4):
        ``files`` become the data files and ``index`` (their and the current file's replay)
        the live index. Called by the compactor with appenders paused."""
        w = self.writer
        assert w is not None
        with w.lock:
            self.index = index
            self.data_files = list(files)
            self.segments.files_in_use = len(self.data_files) + 1
        self.compactions += 1

    def record_file_change(
        self, retired: list[fmt.MarkerEntry], added: list[fmt.MarkerEntry]
    ) -> None:
        """Append CHANGE markers saying ``retired`` files left the data files and ``added``
        joined them (``data_files`` already says so) and flush them: when this returns the
        change is durable and the caller may delete what stood for it. Raises StoreIOError."""
        w = self.writer
        assert w is not None
        with w.lock:
            self._change_marker_locked(retired, added)
        w.flush()

    def _finish_compaction(self, ctl: compact.ControlFile) -> None:
        """Record the compaction a load finished (``store.file.compact.finish_interrupted``) in a
        CHANGE marker, make it durable, then delete the control file that stood for it."""
        w = self.writer
        assert w is not None
        old_ids, new_ids = ctl.file_ids(self._naming)
        with w.lock:
            present = {f.file_id: f for f in self.data_files}
            added = [_entry(present[fid]) for fid in new_ids if fid in present]
            self._change_marker_locked([fmt.MarkerEntry(fid, 0, 0) for fid in old_ids], added)
        w.flush()
        compact.remove_control(self._fs, self._naming)

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

    def _refusal(self, size: int) -> StoreError:
        """Why a record of ``size`` body bytes cannot be appended now."""
        if self.writer is None:
            return self._not_ready()
        return RecordTooLargeError(
            f"record of {size} bytes does not fit a journal file of "
            f"{self.file_size} bytes (at most {self._max_record - _OVERHEAD})"
        )

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
        w = self.writer
        if n > self._max_record or w is None:
            raise self._refusal(len(data))
        if _append_record is None:  # the compiled encode makes these checks itself
            _check_fields(id, tx_id, urt)
        with w.lock:
            if w.refusing:
                w.check_locked()  # waits while a compaction runs, which replaces the index
            index = self.index
            if check and rtype != ADD:
                if rtype == UPDATE or rtype == DELETE:
                    if id not in index.records or (index.updated_only and id in index.updated_only):
                        raise UnknownRecordError(
                            f"record {id} is not live in journal {self.options.directory}"
                        )
                elif (rtype == COMMIT or rtype == ROLLBACK) and tx_id not in index.txs:
                    raise UnknownTransactionError(
                        f"transaction {tx_id} is not open in journal {self.options.directory}"
                    )
            seg = w.current
            if seg.end + n > seg.size:
                seg = self._roll_locked()
            if not seg.first_lsn:
                self._begin_file_locked(seg, n)
            tx_count = index.tx_count(tx_id, seg) if rtype == PREPARE or rtype == COMMIT else 0
            lsn = w.lsn + 1
            if _append_record is not None:
                _append_record(
                    w.buf, rtype, urt, _FLOOR, seg.file_id, lsn, w.stamp_lsn,
                    id, tx_id, tx_count, data,
                )  # fmt: skip
            else:
                head = _pack_head(
                    n, rtype, urt, 0, _FLOOR, seg.file_id, lsn, w.stamp_lsn, id, tx_id, tx_count
                )
                buf = w.buf
                buf += head
                buf += data
                buf += _pack_tail(_crc32(head, _crc32(data)), n)
            w.lsn = lsn
            seg.end += n
            if rtype == ADD:
                # LiveIndex.add of an add, written out: an add is most of all appends.
                seg.pos += 1
                seg.live_bytes += n
                if index.updated_only:
                    index.updated_only.discard(id)
                records = index.records
                entry = seg.file_id << ENTRY_SHIFT | n
                where = records.get(id)
                if where is None:
                    records[id] = entry
                elif type(where) is int:
                    records[id] = [where, entry]
                else:
                    where.append(entry)  # type: ignore[union-attr]
            elif rtype == UPDATE:
                index.add(id, seg, n)
            elif rtype == DELETE:
                index.delete(id, seg)
            elif rtype == ADD_TX:
                index.tx_record(tx_id, OP_ADD, id, seg, n)
            elif rtype == UPDATE_TX:
                index.tx_record(tx_id, OP_UPDATE, id, seg, n)
            elif rtype == DELETE_TX:
                index.tx_record(tx_id, OP_DELETE, id, seg, n)
            elif rtype == PREPARE:
                index.prepare_in(tx_id, seg)
            elif rtype == COMMIT:
                index.commit(tx_id, seg)
            elif rtype == ROLLBACK:
                index.rollback(tx_id, seg)
            if wait or w.direct or len(w.buf) >= w.buffer_size:
                token = w.after_append_locked(wait)
            else:
                token = None
                if not w.woken:
                    w.wake_locked()
        if token is not None:
            w.wait(token)

    def append_add(
        self, id: int, user_record_type: int, data: bytes, *, sync: bool = False
    ) -> None:
        self._append(
            ADD, id, 0, user_record_type, data, sync and self.options.sync_non_transactional
        )

    def append_update(
        self, id: int, user_record_type: int, data: bytes, *, sync: bool = False
    ) -> None:
        self._append(
            UPDATE, id, 0, user_record_type, data, sync and self.options.sync_non_transactional
        )

    def append_delete(self, id: int, *, sync: bool = False) -> None:
        self._append(DELETE, id, 0, 0, b"", sync and self.options.sync_non_transactional)

    def append_add_tx(self, tx_id: int, id: int, user_record_type: int, data: bytes) -> None:
        self._append(ADD_TX, id, tx_id, user_record_type, data, False)

    def append_update_tx(self, tx_id: int, id: int, user_record_type: int, data: bytes) -> None:
        self._append(UPDATE_TX, id, tx_id, user_record_type, data, False)

    def append_delete_tx(self, tx_id: int, id: int) -> None:
        self._append(DELETE_TX, id, tx_id, 0, b"", False)

    def append_deletes_tx(self, tx_id: int, ids: Sequence[int]) -> None:
        """As the base method, in runs: the records that fit the current file and the write
        buffer are encoded in one compiled call (every id checked first) and indexed in one step
        (``LiveIndex.tx_records``), up to :data:`_BULK_HOLD` per hold of the append lock,
        without ``_append``'s call and checks per record. The buffer is handed over after a
        run as ``_append`` hands it over after a record (full, or no buffer timeout)."""
        if _append_records_run is None:  # (the compiled encode checks the ids itself)
            super().append_deletes_tx(tx_id, ids)
            return
        ids = ids if type(ids) is list else list(ids)
        n, done, total = _OVERHEAD, 0, len(ids)
        while done < total:
            w = self.writer
            if w is None:
                raise self._not_ready()
            token = None
            with w.lock:
                if w.refusing:
                    w.check_locked()  # waits while a compaction runs, which replaces the index
                stop = min(total, done + _BULK_HOLD)
                while done < stop and token is None:
                    seg = w.current
                    if seg.end + n > seg.size:
                        seg = self._roll_locked()
                    if not seg.first_lsn:
                        self._begin_file_locked(seg, n)
                    fits = min((seg.size - seg.end) // n, -((len(w.buf) - w.buffer_size) // n))
                    end, buf = min(stop, done + max(1, fits)), w.buf
                    _append_records_run(
                        buf, DELETE_TX, _FLOOR, seg.file_id, w.lsn + 1, w.stamp_lsn, ids, done,
                        end, tx_id,
                    )  # fmt: skip
                    w.lsn += end - done
                    seg.end += (end - done) * n
                    self.index.tx_records(tx_id, OP_DELETE, ids[done:end], seg, n)
                    done = end
                    if w.direct or len(buf) >= w.buffer_size:
                        token = w.after_append_locked(False)
                        if token is None:
                            break  # another appender is writing the buffer out
                if token is None and not w.woken:
                    w.wake_locked()
            if token is not None:
                w.wait(token)

    def append_prepare(self, tx_id: int, xid: bytes, *, sync: bool = True) -> None:
        self._append(PREPARE, 0, tx_id, 0, bytes(xid), sync and self.options.sync_transactional)

    def append_commit(self, tx_id: int, *, sync: bool = True) -> None:
        self._append(COMMIT, 0, tx_id, 0, b"", sync and self.options.sync_transactional)

    def append_rollback(self, tx_id: int, *, sync: bool = True) -> None:
        self._append(ROLLBACK, 0, tx_id, 0, b"", sync and self.options.sync_transactional)

    def append_event(self, id: int, user_record_type: int, data: bytes) -> None:
        self._append(EVENT, id, 0, user_record_type, data, False)

    def flush(self) -> None:
        w = self.writer
        if w is None:
            raise self._not_ready()
        if w.refusing:  # paused, failed or closed (else check_locked has nothing to do)
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
        old.last_lsn = w.lsn  # every record appended so far went into it
        new = self.segments.take()
        self.data_files.append(old)
        w.switch_segment_locked(new)
        self.segments.files_in_use = len(self.data_files) + 1
        if self.options.retention is not None:
            self._retention_pending.append(old)
        self._maint_wake.set()
        return new

    # -- file-list markers (store.file.format; the argument in store.file.integrity) --------

    def _begin_file_locked(self, seg: Segment, room: int, *, always: bool = False) -> None:
        """Start ``seg`` (the current file, nothing written into it yet): its first record is
        a FILES marker listing every data file, leaving ``room`` bytes for the record that
        follows. A list over ``_marker_budget`` (or one that would not leave the room) is left
        out: which files must exist is then unknown until the next file.

        Without data files the marker is written only when ``always`` (a change of the data
        files must be recorded even when none is left); otherwise its absence says the same.
        """
        w = self.writer
        assert w is not None
        seg.first_lsn = w.lsn + 1
        self.index.enter(seg)
        if not self.data_files and not always:
            return
        files = tuple(_entry(f) for f in self.data_files)
        size = fmt.marker_size(len(files))
        if size > self._marker_budget or seg.end + size + room > seg.size:
            log.warning(
                "file list of %d data files left out of %s: too long for one marker",
                len(files),
                seg.path,
            )
            marker = fmt.Marker(fmt.MARKER_FILES, known=False)
        else:
            marker = fmt.Marker(fmt.MARKER_FILES, files)
        self._put_marker_locked(seg, marker)

    def _change_marker_locked(
        self, retired: list[fmt.MarkerEntry], added: list[fmt.MarkerEntry]
    ) -> None:
        """Append CHANGE markers saying ``retired`` files left the data files and ``added``
        joined them (``data_files`` already says so); the caller flushes before acting."""
        w = self.writer
        assert w is not None
        per_marker = max(1, (self._marker_budget - fmt.marker_size(0)) // fmt.MARKER_ENTRY.size)
        items = [(e, True) for e in retired] + [(e, False) for e in added]
        for start in range(0, len(items), per_marker):
            chunk = items[start : start + per_marker]
            seg = w.current
            if seg.end + fmt.marker_size(len(chunk)) > seg.size:
                seg = self._roll_locked()
            if not seg.first_lsn:
                # A file started now lists the data files as they are after the change.
                self._begin_file_locked(seg, 0, always=True)
                return
            marker = fmt.Marker(
                fmt.MARKER_CHANGE,
                files=tuple(e for e, gone in chunk if not gone),
                retired=tuple(e for e, gone in chunk if gone),
            )
            self._put_marker_locked(seg, marker)

    def _put_marker_locked(self, seg: Segment, marker: fmt.Marker) -> None:
        w = self.writer
        assert w is not None and seg is w.current
        lsn = w.lsn + 1
        w.lsn = lsn
        record = fmt.encode_record(
            EVENT,
            file_id=seg.file_id,
            lsn=lsn,
            durable_lsn=w.stamp_lsn,
            body=fmt.encode_marker(marker),
            flags=fmt.FLAG_MARKER | _FLOOR,
        )
        w.buf.extend(record)
        seg.end += len(record)

    def reclaim(self) -> int:
        """Reuse every data file whose records are all dead; returns how many were reclaimed.

        With retention on, the finished files not yet copied to the history folder are copied
        first (a file is never reused before its copy exists), so that a call reclaims
        everything dead now rather than what the maintenance thread happened to archive."""
        w = self.writer
        if w is None:
            raise self._not_ready()
        with self._maint_lock:
            self.copy_to_retention()
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
            for f in gone:
                self.index.leave(f)
            for f in (*self.data_files, w.current):
                for target in [t for t in f.neg if t in gone_set]:
                    del f.neg[target]
            self.segments.files_in_use = len(self.data_files) + 1
            self._recycling = len(gone)
            self._change_marker_locked([_entry(f) for f in gone], [])
        try:
            # The deletes that made these files dead, and the marker retiring them, must be
            # durable before the files are reused.
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
                    self.copy_to_retention()
                    self._reclaim_locked()
                    if self._should_compact() and compact.compact(self):
                        self._reclaim_locked()
                        self._trim_free_files()
            except StoreError as exc:
                log.error("journal maintenance failed in %s: %s", self.options.directory, exc)
                log.debug("maintenance failure", exc_info=True)

    def copy_to_retention(self) -> None:
        """Copy the finished files still waiting for their retention copy, then prune the
        history folder (no-op without retention). Called under the maintenance lock (the
        compactor calls it before its old files go). Raises StoreIOError."""
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
        """Rewrite the live records of every finished file into as few files as possible, then
        delete the free files beyond what the journal needs (see :meth:`_trim_free_files`).

        Crash-safe: see ``store.file.compact``. Raises StoreIOError on I/O failure (the journal
        keeps its old files then).
        """
        if self.writer is None:
            raise self._not_ready()
        with self._maint_lock:
            self._reclaim_locked()
            if compact.compact(self):
                self._reclaim_locked()
            self._trim_free_files()

    def _trim_free_files(self) -> None:
        """After a compaction: delete the free files beyond what the journal needs, so that a
        compaction never leaves the store bigger than it found it (its output took new files
        while the old ones went to the pool, which ``journal-pool-files`` -1 never bounds).
        Needed: ``journal-min-files`` in all, and at least one file beside those in use (the
        pre-opened one). ``journal-pool-files`` bounded the pool already when the old files
        were recycled."""
        w = self.writer
        assert w is not None
        with w.lock:  # under the maintenance lock: no reclaim is handing files back now
            in_use = len(self.data_files) + 1
        removed = self.segments.trim(max(self.options.min_files - in_use, 1))
        if removed:
            log.info("removed %d free journal files after compaction", removed)

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
        """Make everything appended durable, stop background work, release the directory lock.

        With retention on, the finished files the maintenance thread has not copied yet are
        copied to the history folder first, so a clean close leaves a copy of every finished
        file (a copy that fails is logged and left to the next open, which copies every data
        file that has none)."""
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
            with self._maint_lock:
                try:
                    self.copy_to_retention()
                except StoreError as exc:
                    log.warning("journal history copy at close failed: %s", exc)
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


def _check_fields(id: int, tx_id: int, urt: int) -> None:
    """The argument checks of an append (the compiled encode makes the same ones)."""
    if not (MIN_ID <= id <= MAX_ID and MIN_ID <= tx_id <= MAX_ID):
        raise ValueError(
            f"record and transaction ids must be signed 64-bit integers: {id}, {tx_id}"
        )
    if not 0 <= urt <= 255:
        raise ValueError(f"user_record_type must be 0..255, not {urt}")


def _aligned_file_size(size: int, align: int) -> int:
    """``size`` rounded to the nearest multiple of ``align`` (at least one block), as Artemis
    rounds the journal file size for AIO; logged when it changes."""
    if align <= 1 or size % align == 0:
        return size
    rounded = max(align, (size + align // 2) // align * align)
    log.warning("journal-file-size %d is not a multiple of %d; using %d", size, align, rounded)
    return rounded


def _entry(seg: Segment) -> fmt.MarkerEntry:
    return fmt.MarkerEntry(seg.file_id, seg.first_lsn, seg.last_lsn)


def _closed(seg: Segment) -> Segment:
    close(seg)
    return seg
