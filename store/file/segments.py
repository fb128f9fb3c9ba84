"""Journal files ("segments"): naming, header, pre-allocation, reuse and the ready file.

Naming: ``<prefix>-<file_id:020d>.<ext>`` (``data-00000000000000065536.jrn``), so names sort by
file id. A file being created is ``<name>.tmp`` until it is filled, its header written and
synced; then it is renamed to its final name and the directory synced. Compaction writes
``<name>.cmp`` files. Files that cannot be used (no header, wrong size) are moved to
``attic/`` instead of being deleted, keeping at most ``journal-max-attic-files``.

File ids: ordinary files get ids that are multiples of ``ID_STEP``, strictly increasing; the
compactor gives its output files the ids just above the newest file it compacts
(``old + 1``, ``old + 2``, …), which sort after every compacted file and before the current one
without reusing an id (see ``store.file.compact``).

Reuse: a reclaimed file is "neutralised" at once by writing a header with a fresh id (its old
records no longer match the header, so they can never be loaded again) and kept in the free
list, up to ``journal-pool-files`` files in total; taking a free file into use writes a fresh id
again, so a file in use always has the highest id. Reused files are not re-zeroed. After a
compaction the journal trims the free list (:meth:`SegmentManager.trim`) to what it needs, so
that an unbounded pool (``journal-pool-files`` -1) never makes a compacted store bigger.

The ready file is made on a daemon thread (``journal-preopen``) right after a load and after
each switch of files. A process that ends without closing its store (a script that forgets
``close()``, an exception out of it) would kill that thread at interpreter exit, in the middle
of ``create`` or ``stamp``, and leave ``<name>.tmp`` behind: harmless (the next load removes
it; ``store data verify`` says so, and read-only opens leave it), but a leftover a healthy
store should not show. So an ``atexit`` hook waits (up to :data:`EXIT_WAIT` seconds) for every
preparation still running; only a killed process leaves one.

Thread-safety: :class:`SegmentManager` is safe to call from several threads; a
:class:`Segment`'s counters belong to the journal's append lock.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass

from store.errors import StoreIOError
from store.file import format as fmt
from store.fs import FileHandle, FileSystem

__all__ = ["ID_STEP", "Segment", "SegmentManager", "SegmentNaming"]

log = logging.getLogger(__name__)

ID_STEP = 1 << 16
#: How long interpreter exit waits for the ready files still being made (module docstring).
EXIT_WAIT = 10.0
_PREPARING: weakref.WeakSet[SegmentManager] = weakref.WeakSet()


@atexit.register
def _finish_preparations() -> None:
    for manager in list(_PREPARING):
        manager.wait_idle(EXIT_WAIT)


@dataclass(frozen=True, slots=True)
class SegmentNaming:
    """How one journal names its files in its directory."""

    directory: str
    prefix: str
    ext: str = "jrn"

    def name(self, file_id: int) -> str:
        return f"{self.prefix}-{file_id:020d}.{self.ext}"

    def path(self, file_id: int) -> str:
        return os.path.join(self.directory, self.name(file_id))

    def parse(self, name: str) -> int | None:
        """The file id in a final file name of this journal, or None."""
        head = f"{self.prefix}-"
        tail = f".{self.ext}"
        if not (name.startswith(head) and name.endswith(tail)):
            return None
        digits = name[len(head) : -len(tail)]
        return int(digits) if digits.isdigit() else None


class Segment:
    """One journal file and its reclaim counters (see ``store.file.index``)."""

    __slots__ = (
        "end",
        "file_id",
        "first_lsn",
        "handle",
        "last_lsn",
        "live_bytes",
        "neg",
        "path",
        "pos",
        "size",
    )

    def __init__(self, path: str, file_id: int, size: int, handle: FileHandle | None) -> None:
        self.path = path
        self.file_id = file_id
        self.size = size
        self.handle = handle
        self.pos = 0
        self.neg: dict[Segment, int] = {}
        self.live_bytes = 0
        self.end = fmt.DATA_START  # end of the records written (append position)
        # The lsns of this use of the file (0: none yet), for the file-list markers: the first
        # is set by the first record written or read, the last when the file is finished.
        self.first_lsn = 0
        self.last_lsn = 0

    def reset_counts(self) -> None:
        self.pos = 0
        self.neg = {}
        self.live_bytes = 0
        self.end = fmt.DATA_START
        self.first_lsn = 0
        self.last_lsn = 0

    def __repr__(self) -> str:
        return f"Segment({os.path.basename(self.path)} id={self.file_id} end={self.end})"


class SegmentManager:
    """Creates, neutralises, reuses and pre-opens the files of one journal."""

    def __init__(
        self,
        fs: FileSystem,
        naming: SegmentNaming,
        *,
        kind: int,
        file_size: int,
        pool_files: int,
        max_attic_files: int,
    ) -> None:
        self.fs = fs
        self.naming = naming
        self.kind = kind
        self.file_size = file_size
        self.pool_files = pool_files
        self.max_attic_files = max_attic_files
        self._lock = threading.Lock()
        self._next_id = ID_STEP
        self.free: list[Segment] = []
        self._ready: Segment | None = None
        self._ready_cond = threading.Condition(self._lock)
        self._preparing = False
        self.files_in_use = 0  # data files + current, maintained by the journal
        self._max_used_id = 0  # highest id of a file taken into use
        #: The I/O alignment of the journal's writer: the header block is written as a whole
        #: (header + zeros up to it), so a writer that starts at the first aligned offset of a
        #: reused file never leaves stale bytes between the header and its first record.
        self.align = 1

    # -- ids ---------------------------------------------------------------------------------

    def note_existing_id(self, file_id: int) -> None:
        """Make sure fresh ids are above ``file_id`` (called for every file found at open)."""
        with self._lock:
            self._max_used_id = max(self._max_used_id, file_id)
            nxt = (file_id // ID_STEP + 1) * ID_STEP
            if nxt > self._next_id:
                self._next_id = nxt

    def _allocate_id(self) -> int:
        fid = self._next_id
        self._next_id += ID_STEP
        return fid

    def _header_block(self, file_id: int, size: int) -> bytes:
        # The header states the file's size so that a truncated file is told apart from a
        # short one (store.file.integrity); a reused file keeps the size it has.
        header = fmt.encode_header(file_id, self.kind, file_size=size)
        if self.align > fmt.HEADER_SIZE:
            return header + bytes(self.align - fmt.HEADER_SIZE)
        return header

    # -- creation and reuse ------------------------------------------------------------------

    def create(self, file_id: int | None = None, *, suffix: str = "") -> Segment:
        """A new pre-allocated file with a synced header; final name unless ``suffix`` is given."""
        if file_id is None:
            with self._lock:
                file_id = self._allocate_id()
        final = self.naming.path(file_id) + suffix
        tmp = self.naming.path(file_id) + ".tmp"
        handle = self.fs.open(tmp, create=True)
        try:
            handle.truncate(0)
            handle.allocate(self.file_size)
            handle.pwrite(self._header_block(file_id, self.file_size), 0)
            handle.datasync()
            self.fs.rename(tmp, final)
            handle.path = final
            self.fs.fsync_dir(self.naming.directory)
        except BaseException:
            handle.close()
            raise
        seg = Segment(final, file_id, self.file_size, handle)
        return seg

    def for_compaction(self, file_id: int) -> Segment:
        """An output file for the compactor, named ``<name>.cmp``: a free file if there is one."""
        with self._lock:
            seg = self.free.pop() if self.free else None
        if seg is None:
            return self.create(file_id, suffix=".cmp")
        self.stamp(seg, file_id, suffix=".cmp")
        return seg

    def stamp(self, seg: Segment, file_id: int | None = None, *, suffix: str = "") -> None:
        """Give ``seg`` a fresh id: rename it aside, write and sync a new header, rename it in.

        The file is first renamed to ``<new name>.tmp`` (directory synced) so that a crash
        while its header is rewritten leaves a ``.tmp`` file (removed at the next open: the
        file held only dead records) rather than a torn header under a journal name.
        """
        if file_id is None:
            with self._lock:
                file_id = self._allocate_id()
        final = self.naming.path(file_id) + suffix
        aside = self.naming.path(file_id) + ".tmp"
        self.fs.rename(seg.path, aside)
        self.fs.fsync_dir(self.naming.directory)
        seg.path = aside
        if seg.handle is not None:
            seg.handle.path = aside
        if seg.handle is None:
            seg.handle = self.fs.open(aside)
        seg.handle.pwrite(self._header_block(file_id, seg.size), 0)
        seg.handle.datasync()
        self.fs.rename(aside, final)
        self.fs.fsync_dir(self.naming.directory)
        seg.path = final
        seg.handle.path = final
        seg.file_id = file_id
        seg.reset_counts()

    def recycle(self, seg: Segment) -> None:
        """Take back a file whose records are all dead: neutralise it and pool it, or delete it."""
        with self._lock:
            keep = self.pool_files < 0 or (len(self.free) + self.files_in_use) < self.pool_files
        if seg.size != self.file_size:
            self.to_attic(seg)
            return
        if keep:
            self.stamp(seg)
            close(seg)
            with self._lock:
                self.free.append(seg)
        else:
            close(seg)
            self.fs.remove(seg.path)
            self.fs.fsync_dir(self.naming.directory)

    def to_attic(self, seg: Segment) -> None:
        """Move a file that cannot be used out of the way, keeping a bounded number."""
        close(seg)
        attic = os.path.join(self.naming.directory, "attic")
        self.fs.makedirs(attic)
        name = os.path.basename(seg.path)
        self.fs.rename(seg.path, os.path.join(attic, name))
        self.fs.fsync_dir(self.naming.directory)
        kept = self.fs.listdir(attic)
        for old in kept[: max(0, len(kept) - self.max_attic_files)]:
            self.fs.remove(os.path.join(attic, old))
        log.warning("journal file moved to attic", extra={"path": seg.path})

    # -- the ready file ----------------------------------------------------------------------

    def _prepare_one(self) -> Segment:
        with self._lock:
            seg = self.free.pop() if self.free else None
        if seg is None:
            return self.create()
        self.stamp(seg)
        return seg

    def take(self) -> Segment:
        """The next file to write into: the pre-opened one if ready, else one made now."""
        with self._lock:
            seg = self._ready
            self._ready = None
        if seg is None:
            seg = self._prepare_one()
        with self._lock:
            stale = seg.file_id <= self._max_used_id
        if stale:
            # A file prepared in the background can finish after one made synchronously and
            # carry a lower id; files in use must have increasing ids, so give it a fresh one.
            self.stamp(seg)
        with self._lock:
            self._max_used_id = max(self._max_used_id, seg.file_id)
        self.prepare_async()
        return seg

    def prepare_async(self) -> None:
        """Pre-open the next file on a background thread (one at a time)."""
        with self._lock:
            if self._ready is not None or self._preparing:
                return
            self._preparing = True
        _PREPARING.add(self)
        thread = threading.Thread(target=self._prepare_bg, name="journal-preopen", daemon=True)
        thread.start()

    def _prepare_bg(self) -> None:
        try:
            seg = self._prepare_one()
        except StoreIOError as exc:
            # take() does the same work again on the appender's thread and raises the error
            # (with its hint) to the caller: one line here, the traceback only when debugging.
            log.warning("cannot pre-open the next journal file: %s", exc)
            log.debug("pre-open failure", exc_info=True)
            seg = None
        with self._lock:
            self._preparing = False
            if seg is not None:
                if self._ready is None:
                    self._ready = seg
                else:
                    self.free.append(seg)
            self._ready_cond.notify_all()

    def wait_idle(self, timeout: float | None = None) -> None:
        """Wait for a background preparation to finish (used before closing), at most
        ``timeout`` seconds (None: no limit)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while self._preparing and (deadline is None or time.monotonic() < deadline):
                self._ready_cond.wait(0.05)

    def unused_count(self) -> int:
        """Free files, the ready file, and one being prepared in the background."""
        with self._lock:
            return len(self.free) + (self._ready is not None) + self._preparing

    def unused(self) -> Iterator[Segment]:
        """The free files and the ready file (all hold no records)."""
        with self._lock:
            segs = list(self.free)
            if self._ready is not None:
                segs.append(self._ready)
        yield from segs

    def trim(self, keep: int) -> int:
        """Delete free files until at most ``keep`` files are unused (free, ready, or being
        prepared; the ready file itself is never deleted). Returns how many were deleted.
        Raises StoreIOError when one cannot be removed."""
        removed: list[Segment] = []
        with self._lock:
            while self.free and len(self.free) + (self._ready is not None) + self._preparing > keep:
                removed.append(self.free.pop())
        for seg in removed:
            close(seg)
            self.fs.remove(seg.path)
        if removed:
            self.fs.fsync_dir(self.naming.directory)
        return len(removed)

    def adopt_free(self, seg: Segment) -> None:
        """Record an existing file with no live records as free (found at open)."""
        with self._lock:
            self.free.append(seg)


def close(seg: Segment) -> None:
    """Close a segment's handle, if open."""
    handle = seg.handle
    seg.handle = None
    if handle is not None:
        handle.close()
